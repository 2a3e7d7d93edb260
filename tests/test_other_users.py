"""Other users' jobs seen without root: discovery from what all may read (a faked /proc whose
maps are denied), and the same with real users (`gputopdl_alice` trains, `gputopdl_bob` looks)."""

from __future__ import annotations

import pytest

from gputop_dl.collect import hidden_jobs
from gputop_dl.collect.discover import Discoverer

from tests.fakes.procs import BASH_MAPS, TORCH_MAPS, Clock
from tests.test_discover import fake_box

GiB = 1 << 30
TICK = 100  # clock ticks per second of the fake CPU counters (CLK_TCK on Linux)


class Blind(Discoverer):
    """Discovery as a user without root sees other users' processes: maps and environ denied."""

    mine: set[int] = set()

    def _read(self, pid, what):
        if what in ("maps", "environ") and pid not in self.mine:
            raise PermissionError(13, "Permission denied")
        return super()._read(pid, what)


def box(tmp_path):
    """test_discover's box (a trainer with forked workers, torchrun with two ranks, a web
    server), with more Python processes that are not training."""
    fp = fake_box(tmp_path)
    # not training: a web server, an idle notebook kernel (threads, no CPU), python -c, a shell
    fp.add(310, 10, ["/opt/conda/bin/python", "-m", "ipykernel_launcher", "-f", "k.json"],
           TORCH_MAPS, threads=8)
    fp.add(320, 10, ["python3", "-c", "import time; time.sleep(99)"], TORCH_MAPS)
    # a web server that forks its workers with its own command line, as a DataLoader does
    fp.add(330, 10, ["/usr/bin/python3", "/usr/bin/gunicorn", "app:app"], BASH_MAPS, comm="gunicorn")
    fp.add(331, 330, ["/usr/bin/python3", "/usr/bin/gunicorn", "app:app"], BASH_MAPS,
           comm="gunicorn")
    return fp


def jobs(d, gpu=()):
    d.refresh()
    return {f.pid: f for f in d.find(gpu)}


def test_other_users_jobs_are_found_from_their_command_lines_and_twins(tmp_path):
    fp = box(tmp_path)
    d = Blind(fp.root, own_pid=400, clock=Clock())
    found = jobs(d)
    assert set(found) == {100, 200}  # the web server, the kernel, -c and gunicorn stay out
    assert found[100].found_by == "cmdline" and found[100].pids == (100, 101, 102, 103)
    assert found[200].found_by == "cmdline" and found[200].pids == (200, 201, 202, 203)
    assert found[100].name == "train.py" and not found[100].torch


def test_a_busy_thread_pool_makes_a_job_an_idle_one_does_not(tmp_path):
    fp = box(tmp_path)
    clock = Clock()
    d = Blind(fp.root, own_pid=400, clock=clock)
    assert 310 not in jobs(d)
    # the kernel stays idle (its CPU ticks do not move): never a job, however often looked at
    for _ in range(4):
        clock.t += 40
        assert 310 not in jobs(d)
    # a single-threaded busy script is no thread pool; a pool of threads that burns CPU is one
    fp.add(450, 10, ["python3", "solo.py"], TORCH_MAPS, threads=1, cpu_ticks=0)
    fp.add(410, 10, ["python3", "pool.py"], TORCH_MAPS, threads=hidden_jobs.MANY_THREADS)
    assert not {450, 410} & set(jobs(d))  # first look: no CPU rate yet
    clock.t += 1
    fp.add(450, 10, ["python3", "solo.py"], TORCH_MAPS, threads=1, cpu_ticks=TICK)
    fp.add(410, 10, ["python3", "pool.py"], TORCH_MAPS, threads=hidden_jobs.MANY_THREADS,
           cpu_ticks=TICK)
    found = jobs(d)
    assert 410 in found and found[410].found_by == "cmdline" and 450 not in found
    # the notebook kernel starts training: its pool burns CPU, it becomes a job at its re-look
    clock.t += 31
    fp.add(310, 10, ["/opt/conda/bin/python", "-m", "ipykernel_launcher", "-f", "k.json"],
           TORCH_MAPS, threads=8, cpu_ticks=40 * TICK)
    assert 310 in jobs(d)


def test_a_gpu_process_of_another_user_is_a_job_found_by_nvml(tmp_path):
    fp = box(tmp_path)
    fp.add(500, 10, ["/opt/app/bin/solver"], BASH_MAPS)  # no Python: only NVML tells
    d = Blind(fp.root, own_pid=400, clock=Clock())
    found = jobs(d, {500: 2 * GiB, 300: GiB, 9999: GiB})
    assert found[500].found_by == "nvml" and found[500].gpu
    assert found[300].found_by == "nvml"  # on a GPU: a job, even with a server's name
    assert d.outside == {9999: GiB}  # not a process of this namespace


def test_own_processes_keep_being_found_by_their_maps(tmp_path):
    fp = box(tmp_path)
    Mine = type("Mine", (Blind,), {"mine": {100, 101, 102}})
    d = Mine(fp.root, own_pid=400, clock=Clock())
    found = jobs(d)
    assert found[100].found_by == "maps" and found[100].torch
    assert found[200].found_by == "cmdline"


@pytest.mark.parametrize("cmd,comm,entry", [
    (("python3", "train.py"), "python3", "script"),
    (("/usr/bin/python3.11", "-u", "-W", "ignore", "train.py"), "python3.11", "script"),
    (("python", "-m", "pkg.train"), "python", "module"),
    (("python", "-mpkg.train"), "python", "module"),
    (("/venv/bin/python3", "/venv/bin/torchrun", "x.py"), "torchrun", "launcher"),
    (("python", "-m", "torch.distributed.run", "x.py"), "python", "launcher"),
    (("/venv/bin/python", "/venv/bin/accelerate", "launch", "x.py"), "accelerate", "launcher"),
    (("/venv/bin/python", "/venv/bin/deepspeed", "x.py"), "deepspeed", "launcher"),
    (("python", "-m", "http.server"), "python", None),
    (("python", "-c", "pass"), "python", None),
    (("python",), "python", None),
    (("/venv/bin/python", "/venv/bin/jupyter-lab"), "jupyter-lab", None),
    (("/venv/bin/python", "/venv/bin/tensorboard", "--logdir", "x"), "tensorboard", None),
])
def test_training_entry_points(cmd, comm, entry):
    assert hidden_jobs.entry_point(cmd, comm) == entry


def test_interpreters():
    assert hidden_jobs.interpreter(("/usr/bin/python3.11", "x.py"), "python3.11")
    assert hidden_jobs.interpreter(("/venv/bin/python3", "/venv/bin/torchrun"), "torchrun")
    assert hidden_jobs.interpreter(("pypy3", "x.py"), "pypy3")
    assert not hidden_jobs.interpreter(("/usr/bin/bash",), "bash")
    assert not hidden_jobs.interpreter(("/usr/bin/gunicorn", "app:app"), "gunicorn")
