"""A found job's identity (collect/proc/identity.py): user, start, working directory, Slurm job from
the environment or the cgroup, container and Kubernetes pod, another gputop-dl session's
marker; an unreadable environment is a note, never an error. Two jobs of one script are told
apart by what differs (found.tell_apart); the headless table keeps its columns in place."""

from __future__ import annotations

import io
import os
import time

from rich.console import Console

from gputop_dl.collect.proc import identity
from gputop_dl.collect.jobs.discover import Found
from gputop_dl.collect.jobs.found import tell_apart
from gputop_dl.collect.proc.identity import Identity, container_of, read_identity, slurm_of
from gputop_dl.present.headless import jobs_table
from gputop_dl.snapshot import JobSample, SlurmJob, Snapshot

SLURM_ENV = (b"PATH=/usr/bin\0SLURM_JOB_ID=4711\0SLURM_JOB_USER=ada\0SLURM_JOB_PARTITION=gpu\0"
             b"SLURM_JOB_ACCOUNT=ml-lab\0SLURM_JOB_NAME=x\0")


def fake_proc(tmp_path, pid=123, environ=b"", cgroup="0::/user.slice\n"):
    d = tmp_path / str(pid)
    d.mkdir(parents=True)
    (d / "environ").write_bytes(environ)
    (d / "cgroup").write_text(cgroup)
    os.symlink(str(tmp_path), d / "cwd")
    return str(tmp_path)


def test_slurm_from_the_environment_and_user_cwd_and_start(tmp_path):
    proc = fake_proc(tmp_path, environ=SLURM_ENV)
    ident = read_identity(123, 1000, proc)
    assert ident.slurm == SlurmJob("4711", "ada", "gpu", "ml-lab")
    assert ident.cwd == str(tmp_path) and ident.user and ident.note is None
    assert ident.container is None and ident.launched_by is None
    assert ident.started is not None and ident.elapsed_s(ident.started + 5) == 5


def test_slurm_from_the_cgroup_when_the_environment_is_not_readable(tmp_path, monkeypatch):
    proc = fake_proc(tmp_path, environ=SLURM_ENV,
                     cgroup="0::/system.slice/slurmstepd.scope/job_9001/step_0/user/task_0\n")
    real_open = open

    def deny_environ(path, *a, **kw):
        if str(path).endswith("/environ"):
            raise PermissionError(13, "Permission denied", path)
        return real_open(path, *a, **kw)

    monkeypatch.setattr(identity, "open", deny_environ, raising=False)
    ident = read_identity(123, None, proc)
    assert ident.slurm == SlurmJob("9001")  # the id only: partition and account were in environ
    assert "environment not readable" in ident.note and "from its cgroup only" in ident.note
    assert ident.started is None and ident.elapsed_s(time.time()) is None


def test_a_vanished_process_is_a_note_not_an_error(tmp_path):
    ident = read_identity(99999, None, str(tmp_path))
    assert ident.note == "process gone" and ident.user is None


def test_containers_and_kubernetes_pods_from_cgroup_paths():
    cid = "0123456789abcdef" * 4
    assert container_of(f"0::/system.slice/docker-{cid}.scope\n") == "docker 0123456789ab"
    assert container_of(f"12:memory:/docker/{cid}\n") == "docker 0123456789ab"
    pod = "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1c2d3e4f_aaaa_bbbb_cccc_0123456789ab.slice/" \
          f"cri-containerd-{cid}.scope\n"
    assert container_of(pod) == "k8s pod 1c2d3e4f-aaaa-bbbb-cccc-0123456789ab · containerd 0123456789ab"
    v1 = f"4:memory:/kubepods/besteffort/pod1c2d3e4f-aaaa-bbbb-cccc-0123456789ab/{cid}\n"
    assert container_of(v1) == "k8s pod 1c2d3e4f-aaaa-bbbb-cccc-0123456789ab · containerd 0123456789ab"
    assert container_of(f"0::/machine.slice/libpod-{cid}.scope/container\n") == "podman 0123456789ab"
    assert container_of("0::/user.slice/user-1000.slice/session-3.scope\n") is None
    assert container_of("4:memory:/process_api/e776a625c3247b35a2cf953b40bb11e1\n") is None
    assert slurm_of(None, "0::/user.slice\n") is None


def test_another_gputop_dl_sessions_job_says_which_session(tmp_path):
    env = b"GPUTOP_DL_EVENTS=/home/ada/.local/share/gputop-dl/sessions/20261124-101500-ab12/hog.events.jsonl\0"
    ident = read_identity(123, None, fake_proc(tmp_path, environ=env))
    assert ident.launched_by == "20261124-101500-ab12"


def found(pid, *argv):
    return Found(name="scenario_job.py", pid=pid, start=1, pids=(pid,), target=pid, torch=True,
                 gpu=False, cmdline=tuple(argv))


def test_two_jobs_of_one_script_are_told_apart_by_what_differs():
    a = found(10, "python", "scenario_job.py", "--batch", "64")
    b = found(11, "python", "scenario_job.py", "--batch", "128")
    ada, bob = Identity(user="ada"), Identity(user="bob")
    names = {"scenario_job.py"}
    assert tell_apart(b, ada, [(a, ada)], names) == "scenario_job.py --batch 128"
    same = found(12, "python", "scenario_job.py", "--batch", "64")
    assert tell_apart(same, bob, [(a, ada)], names) == "scenario_job.py @bob"
    s1, s2 = Identity(user="ada", slurm=SlurmJob("1")), Identity(user="ada", slurm=SlurmJob("2"))
    assert tell_apart(same, s2, [(a, s1)], names) == "scenario_job.py slurm 2"
    # one script started in two experiment folders: the folder; an unknown one tells nothing
    run1, run2 = Identity(user="ada", cwd="/home/ada/exp/run1"), Identity(user="ada", cwd="/home/ada/exp/run2/")
    assert tell_apart(same, run2, [(a, run1)], names) == "scenario_job.py in run2"
    assert tell_apart(same, run2, [(a, ada)], names) == "scenario_job.py (12)"
    assert tell_apart(same, ada, [(a, ada)], names) == "scenario_job.py (12)"  # nothing differs
    # two copies of one command started by hand: the second's start time; within one second, PID
    t0 = time.mktime((2026, 11, 24, 9, 30, 5, 0, 0, -1))
    first, second = Identity(user="ada", started=t0), Identity(user="ada", started=t0 + 7)
    assert tell_apart(same, second, [(a, first)], names) == "scenario_job.py 09:30:12"
    assert tell_apart(same, Identity(user="ada", started=t0 + 0.4), [(a, first)], names) \
        == "scenario_job.py (12)"


def test_the_sampler_keeps_a_jobs_names_while_the_same_jobs_share_its_base_name(monkeypatch):
    """FoundJobs works the candidates out once, not every tick, and again when the jobs that
    share the name change; which one is free is still decided each tick."""
    from gputop_dl.collect.jobs import found as found_mod

    a = found(10, "python", "scenario_job.py", "--batch", "64")
    b = found(11, "python", "scenario_job.py", "--batch", "128")
    c = found(12, "python", "scenario_job.py", "--batch", "32")
    ada = Identity(user="ada")
    jobs = found_mod.FoundJobs(stall=False)
    calls = []
    real = found_mod.apart_names
    monkeypatch.setattr(found_mod, "apart_names", lambda *args: calls.append(args[0].pid) or real(*args))
    names = {"scenario_job.py"}
    for _ in range(3):
        assert jobs._apart((11, 1), b, ada, [(a, ada)], names) == "scenario_job.py --batch 128"
    assert calls == [11]
    taken = names | {"scenario_job.py --batch 128"}  # its first choice taken: the next one
    assert jobs._apart((11, 1), b, ada, [(a, ada)], taken) == "scenario_job.py (11)"
    assert jobs._apart((11, 1), b, ada, [(a, ada), (c, ada)], names) == "scenario_job.py --batch 128"
    assert calls == [11, 11]  # another job shares the name now: worked out again


def test_identity_in_the_once_json_contract():
    j = JobSample(name="t.py", pid=1, launched=False, user="ada", elapsed_s=65.0,
                  slurm=SlurmJob("4711", "ada", "gpu", "ml-lab"), container="docker 0123456789ab")
    out = Snapshot(time=0.0, gpu_status="ok", jobs=(j,)).to_json()["jobs"][0]
    assert out["user"] == "ada" and out["elapsed_s"] == 65.0 and out["container"] == "docker 0123456789ab"
    assert out["slurm"] == {"job_id": "4711", "user": "ada", "partition": "gpu", "account": "ml-lab"}
    plain = Snapshot(time=0.0, gpu_status="ok", jobs=(JobSample(name="x", pid=2, launched=False),)).to_json()
    assert plain["jobs"][0]["slurm"] is None and plain["jobs"][0]["container"] is None


def header_and_rows(jobs) -> list[str]:
    console = Console(width=160, file=io.StringIO(), color_system=None)
    console.print(jobs_table(Snapshot(time=0.0, gpu_status="ok", jobs=tuple(jobs))))
    return console.file.getvalue().splitlines()


def test_headless_columns_do_not_shift_on_a_long_found_job_name():
    short = JobSample(name="a.py", pid=1, launched=False, cpu_cores=0.5, user="ada", elapsed_s=70)
    long = JobSample(name="x" * 80, pid=2, launched=False, cpu_cores=0.5, user="ada",
                     elapsed_s=70, launched_by="20261124-101500-ab12")
    before = header_and_rows([short])[0]
    lines = header_and_rows([short, long])
    assert lines[0].startswith(before.rstrip())  # same columns in the same places (one more at the end)
    assert lines[2].index("running") == lines[1].index("running")
    assert "…" in lines[2] and "1:10" in lines[2] and "ada" in lines[2]
    assert "launched by" in lines[0] and "session 20261124-101500-ab12" in lines[2]


def test_serve_puts_user_and_slurm_job_on_the_job_info_series_only():
    from prometheus_client import CollectorRegistry, generate_latest

    from gputop_dl.present.prometheus import SnapshotCollector

    c = SnapshotCollector(hostname="node7")
    j = JobSample(name="t.py", pid=5, launched=False, cpu_cores=1.0, user="ada",
                  slurm=SlurmJob("4711"))
    plain = JobSample(name="u.py", pid=6, launched=False, cpu_cores=1.0)
    c.feed(Snapshot(time=1.0, gpu_status="no NVML", jobs=(j, plain)))
    reg = CollectorRegistry(auto_describe=False)
    reg.register(c)
    text = generate_latest(reg).decode()
    info = [line for line in text.splitlines() if line.startswith("gputop_dl_job_info{")]
    assert any('user="ada"' in x and 'slurm_job_id="4711"' in x for x in info)
    assert any('job_name="u.py"' in x and 'user=""' in x and 'slurm_job_id=""' in x for x in info)
    cpu = [line for line in text.splitlines() if line.startswith("gputop_dl_job_cpu")]
    assert cpu and not any("slurm_job_id" in x for x in cpu)


def test_the_process_tree_comes_from_what_the_tick_read():
    from gputop_dl.collect.nvml.gpu_use import GpuUse
    from gputop_dl.collect.proc.procs import Stat
    from gputop_dl.collect.proc.proctree import proc_tree, ranks_of
    from gputop_dl.snapshot import Distributed, GpuProcess, RankProc

    stats = {10: Stat(1.0, 100, 1, 0.0, "S"), 11: Stat(1.0, 200, 1, 0.0, "R"),
             12: Stat(1.0, 300, 1, 0.0, "S"), 13: Stat(1.0, 400, 1, 0.0, "D")}
    cmap = {10: [12, 11], 11: [13], 99: [10]}
    dist = Distributed(ranks=(RankProc(0, 0, 11), RankProc(1, 1, 12)))
    gpu = GpuUse.of([GpuProcess(0, 11, mem_used=5 << 30, sm_util=0.4)])
    tree = proc_tree(10, cmap, stats, {10: 0.1, 11: 0.9}, ranks_of(dist), gpu)
    assert [(p.pid, p.depth, p.role, p.state) for p in tree] == [
        (10, 0, "main", "S"), (11, 1, "rank 0", "R"), (13, 2, "worker", "D"), (12, 1, "rank 1", "S")]
    assert tree[1].gpu_mem == 5 << 30 and tree[1].gpu_sm == 0.4 and tree[2].cpu_cores is None
    j = JobSample(name="ddp", pid=10, launched=False, procs=tree)
    out = Snapshot(time=0.0, gpu_status="ok", jobs=(j,)).to_json()["jobs"][0]["procs"]
    assert out[1] == {"pid": 11, "ppid": 10, "depth": 1, "role": "rank 0", "cpu_cores": 0.9,
                      "rss": 200, "state": "R", "gpu_mem": 5 << 30, "gpu_sm": 0.4}


def test_jobs_whose_commands_differ_are_all_named_by_the_first_argument_that_differs():
    """`--compute-ms 60` and `--compute-ms 50` (whose other values swap places)
    were `scenario_job.py` and `scenario_job.py (8897)`; each is named by what differs, the first
    one too, and only identical commands fall back to the start time, then the PID."""
    from gputop_dl.collect.jobs.found import FoundJobs

    a = found(10, "python", "scenario_job.py", "--compute-ms", "60", "--seconds", "50")
    b = found(11, "python", "scenario_job.py", "--compute-ms", "50", "--seconds", "60")
    c = found(12, "python", "scenario_job.py", "--compute-ms", "60", "--seconds", "50",
              "--prep-ms", "2")
    t0 = time.mktime((2026, 11, 24, 9, 30, 5, 0, 0, -1))
    d = found(13, "python", "scenario_job.py", "--compute-ms", "50", "--seconds", "60")
    e = found(14, "python", "scenario_job.py", "--compute-ms", "50", "--seconds", "60")
    jobs = FoundJobs(stall=False)
    for f, started in ((a, t0), (b, t0), (c, t0), (d, t0 + 7), (e, t0 + 7.4)):
        jobs._idents[(f.pid, f.start)] = Identity(user="ada", started=started)
    names = jobs.names([a, b, c])
    assert names == {(10, 1): "scenario_job.py --compute-ms 60",
                     (11, 1): "scenario_job.py --compute-ms 50",
                     (12, 1): "scenario_job.py --prep-ms 2"}
    # one alone keeps its base name; a launched job's name taken: told apart even so
    assert jobs.names([a]) == {(10, 1): "scenario_job.py"}
    # identical commands: the start time, then the PID
    assert jobs.names([b, d]) == {(11, 1): "scenario_job.py 09:30:05",
                                  (13, 1): "scenario_job.py 09:30:12"}
    assert jobs.names([d, e]) == {(13, 1): "scenario_job.py (13)", (14, 1): "scenario_job.py (14)"}
    # a path-valued argument is shown by its last part
    p = found(20, "python", "scenario_job.py", "--out", "/tmp/run-a/log.txt")
    q = found(21, "python", "scenario_job.py", "--out", "/tmp/run-b/log2.txt")
    for f in (p, q):
        jobs._idents[(f.pid, f.start)] = Identity(user="ada")
    assert set(jobs.names([p, q]).values()) == {"scenario_job.py --out log.txt",
                                                "scenario_job.py --out log2.txt"}
