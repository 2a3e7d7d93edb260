"""The Slurm batch scripts of `gputop-dl queue FILE --sbatch DIR` (sched/sbatch.py, runner/sbatch.py)."""

from __future__ import annotations

import json
import sys

from gputop_dl.cli import main
from gputop_dl.sched.model import Job
from gputop_dl.sched.sbatch import cpus_per_gpu, nice_values, sbatch_script, submit_script


def test_cpus_per_gpu_is_the_measured_need_per_gpu_with_headroom():
    assert cpus_per_gpu(6.0, 2) == 4  # ceil(3.3), the docs' example
    assert cpus_per_gpu(0.9, 1) == 1
    assert cpus_per_gpu(3.0, 1) == 4  # ceil(3.3)
    assert cpus_per_gpu(0.0, 1) is None


def test_the_policy_becomes_nice_values_or_nothing():
    jobs = [Job("long", duration_s=10, priority=0), Job("short", duration_s=1, priority=2),
            Job("mid", duration_s=5, priority=1)]
    assert nice_values("sjf", jobs) == {"short": 0, "mid": 10, "long": 20}
    assert nice_values("priority", jobs) == {"short": 0, "mid": 100, "long": 200}
    assert nice_values("fifo", jobs) == nice_values("lyapunov", jobs) == {}
    fifo = submit_script([("a", "a.sbatch"), ("b", "b.sbatch")], "fifo")
    assert "sbatch --parsable ${prev:+--dependency=after:$prev} b.sbatch" in fifo
    assert "dependency" not in submit_script([("a", "a.sbatch")], "sjf")


def test_a_script_asks_for_gpus_cpus_and_keeps_env_values_out():
    text = sbatch_script(Job("ddp", arrival_s=12.5, duration_s=300, gpus=2), ["python", "train.py", "--lr", "0.1 x"],
                         cwd="/data/run", out_dir="/data/out", policy="sjf", nice=10, cpu_cores=6.0,
                         cpu_source="cached solo baseline", env_keys=["HF_TOKEN"])
    for line in ("#SBATCH --job-name=ddp", "#SBATCH --chdir=/data/run", "#SBATCH --output=/data/out/ddp-%j.out",
                 "#SBATCH --gres=gpu:2", "#SBATCH --cpus-per-gpu=4", "#SBATCH --nice=10", "#SBATCH --begin=now+13",
                 ': "${HF_TOKEN?HF_TOKEN is not set: export it before sbatch (workload ddp)}"',
                 "python train.py --lr '0.1 x'"):
        assert line + "\n" in text, line
    bare = sbatch_script(Job("x"), "echo hi | cat", cwd="/", out_dir="/o", policy="fifo", nice=None,
                         cpu_cores=0.0, cpu_source="no measured solo CPU need")
    assert "--cpus-per-gpu" not in bare.replace("# CPUs: no --cpus-per-gpu", "")
    assert "--nice" not in bare and "--begin" not in bare and "\necho hi | cat\n" in bare


def test_queue_sbatch_writes_one_script_per_workload_and_a_submit_script(tmp_path, capsys):
    q = tmp_path / "q.toml"
    py = json.dumps(sys.executable)
    q.write_text(f'[session]\npolicy = "sjf"\n\n[[workload]]\nname = "long"\ncommand = [{py}, "-c", "pass"]\n'
                 f'duration_s = 60\ngpus = 2\nenv = {{ TOKEN = "hidden-value" }}\n\n'
                 f'[[workload]]\nname = "short"\narrival = 3\ncommand = [{py}, "-c", "pass"]\nduration_s = 5\n\n'
                 f'[[workload]]\nname = "builtin"\nmodel = "synthetic"\nepochs = 1\nsteps_per_epoch = 2\n'
                 f'duration_s = 9\n')
    out = tmp_path / "sb"
    assert main(["queue", str(q), "--sbatch", str(out)]) == 0
    assert "wrote 3 sbatch scripts" in capsys.readouterr().out
    long = (out / "long.sbatch").read_text()
    assert "#SBATCH --gres=gpu:2\n" in long and "#SBATCH --nice=20\n" in long and "hidden-value" not in long
    assert "no measured solo CPU need: run `gputop-dl launch" in long
    assert "#SBATCH --nice=0\n" in (out / "short.sbatch").read_text()
    assert f"-m gputop_dl launch {q} --only builtin --baseline none --headless" in (out / "builtin.sbatch").read_text()
    submit = (out / "submit.sh").read_text()
    assert submit.index("long.sbatch") < submit.index("builtin.sbatch") < submit.index("short.sbatch")
