"""Other users' jobs seen without root: discovery from what all may read (a faked /proc whose
maps are denied), and the same with real users (`gputopdl_alice` trains, `gputopdl_bob` looks)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import psutil
import pytest

from gputop_dl.collect.jobs import hidden as hidden_jobs
from gputop_dl.collect.jobs.privilege import WAYS_OUT, Access, box_line, ptrace_scope
from gputop_dl.collect.jobs.discover import Discoverer

from tests.fakes.procs import BASH_MAPS, TORCH_MAPS, Clock
from tests.fakes.users import Users, why_not
from tests.schema_check import check
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
    (("python", "-m", "gputop_dl.injob.trainer", "a.json"), "python", "module"),
    (("python", "-m", "gputop_dl"), "python", None),
])
def test_training_entry_points(cmd, comm, entry):
    assert hidden_jobs.entry_point(cmd, comm) == entry


def test_interpreters():
    assert hidden_jobs.interpreter(("/usr/bin/python3.11", "x.py"), "python3.11")
    assert hidden_jobs.interpreter(("/venv/bin/python3", "/venv/bin/torchrun"), "torchrun")
    assert hidden_jobs.interpreter(("pypy3", "x.py"), "pypy3")
    assert not hidden_jobs.interpreter(("/usr/bin/bash",), "bash")
    assert not hidden_jobs.interpreter(("/usr/bin/gunicorn", "app:app"), "gunicorn")


# --- what may be read: Yama's rule, root, another user --------------------------------------------


@pytest.mark.parametrize("text,scope", [("1\n", 1), ("0\n", 0), ("3", 3), (None, None), ("x", None)])
def test_ptrace_scope_is_read_from_yama_file(tmp_path, text, scope):
    path = tmp_path / "ptrace_scope"
    if text is not None:
        path.write_text(text)
    assert ptrace_scope(str(path)) == scope


def test_what_each_privilege_may_trace(tmp_path):
    yama = tmp_path / "ptrace_scope"
    yama.write_text("1\n")
    status = tmp_path / "status"
    status.write_text("Name:\tx\nCapEff:\t0000000000000000\n")
    me = Access.read(str(yama), str(status))
    if me.euid == 0:  # read as a user, whatever runs the test
        me = Access(euid=1000, sys_ptrace=False, scope=me.scope)
    assert me.scope == 1
    # Ubuntu's default: even the user's own job started in another shell is refused
    assert me.refusal(me.euid) is not None
    own = dict(me.limits(me.euid))
    assert set(own) == {"data stall", "step time", "loop counter"}
    assert WAYS_OUT in own["data stall"]  # the three ways out, where they help
    # another user's: refused whatever the rule; disk, environment, cwd too; no Yama advice
    other = dict(me.limits(me.euid + 1))
    assert {"data stall", "disk reads", "loader pace", "working directory"} <= set(other)
    assert WAYS_OUT not in other["data stall"]
    assert me.other(me.euid + 1) and not me.other(me.euid)
    # no Yama, or ptrace_scope=0: own jobs open, others' closed
    open_rule = Access(euid=1000, sys_ptrace=False, scope=0)
    assert open_rule.refusal(1000) is None and open_rule.limits(1000) == ()
    assert Access(euid=1000, sys_ptrace=False, scope=None).refusal(1000) is None
    # root (or CAP_SYS_PTRACE): everything, unless ptrace is off altogether
    status.write_text("CapEff:\t0000000000080000\n")  # bit 19: CAP_SYS_PTRACE
    assert Access.read(str(yama), str(status)).sys_ptrace
    status.write_text("CapEff:\t00000000a80425fb\n")  # Docker's default set: no SYS_PTRACE
    assert not Access.read(str(yama), str(status)).sys_ptrace
    root = Access(euid=0, sys_ptrace=True, scope=1)
    assert root.refusal(1000) is None and root.limits(1000) == ()
    assert Access(euid=0, sys_ptrace=True, scope=3).refusal(1000) is not None


def test_limited_lines_group_jobs_by_reason():
    from gputop_dl.present.limited_text import limited_lines
    from gputop_dl.snapshot import JobSample

    lim = Access(euid=1000, sys_ptrace=False, scope=None).limits(1001)
    jobs = [JobSample(name=n, pid=p, launched=False, limited=lim) for n, p in (("a.py", 1), ("b.py", 2))]
    lines = limited_lines(jobs + [JobSample(name="mine.py", pid=3, launched=False)])
    assert len(lines) == 1 and "a.py, b.py" in lines[0] and "mine.py" not in lines[0]
    assert "data stall" in lines[0] and "disk reads" in lines[0]


# --- real users: gputopdl_alice trains, gputopdl_bob looks (no root) -----------------------------

TRAIN = """
import os, sys, time
def burn(s):
    end = time.process_time() + s
    while time.process_time() < end:
        pass
kids = []
for _ in range(2):  # forked workers with the trainer's command line, as a DataLoader's
    pid = os.fork()
    if pid == 0:
        while True:
            burn(0.01); time.sleep(0.03)
    kids.append(pid)
while True:
    burn(0.01); time.sleep(0.03)
"""
IDLE_KERNEL = """
import threading, time
for _ in range(6):
    threading.Thread(target=time.sleep, args=(600,), daemon=True).start()
time.sleep(600)
"""
GPUTOP = os.path.join(os.path.dirname(sys.executable), "gputop-dl")


@pytest.fixture
def users():
    why = why_not()
    if why:
        pytest.skip(why)
    u = Users.make()
    yield u
    u.close()


def _started(p, children=0, timeout=30.0):
    """Wait until process `p` runs Python (its command line shows it) with `children` forked."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            proc = psutil.Process(p.pid)
            if "python" in " ".join(proc.cmdline()) and len(proc.children()) >= children:
                return
        except psutil.Error:
            pass
        time.sleep(0.05)
    raise AssertionError(f"PID {p.pid} did not start")


def test_another_users_jobs_are_found_judged_and_limited_without_root(users):
    train = users.write("train.py", TRAIN)
    trainers = [users.popen("alice", [sys.executable, train, "--run", str(i)]) for i in (1, 2)]
    server = users.popen("alice", [sys.executable, "-m", "http.server", "0", "--bind", "127.0.0.1"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    kernel = users.popen("alice", [sys.executable, users.write("kernel.py", IDLE_KERNEL)])
    for p in trainers:
        _started(p, children=2)
    for p in (server, kernel):
        _started(p)
    out = users.run("bob", [GPUTOP, "--once", "--json"])
    assert out.returncode == 0, out.stderr
    snap = json.loads(out.stdout)
    check(snap, "snapshot")
    jobs = {j["pid"]: j for j in snap["jobs"]}
    for p in trainers:
        j = jobs[p.pid]
        assert j["user"] == "gputopdl_alice" and j["found_by"] == "cmdline"
        assert j["name"].endswith("@gputopdl_alice")
        assert len(j["pids"]) == 3  # the trainer and its two workers
        # what every user may read: CPU, threads, CPU wait, state, age, command
        assert j["cpu_cores"] is not None and j["threads"] == 3
        assert j["cpu_wait_fraction"] is not None and j["elapsed_s"] > 0
        assert "train.py" in j["command"]
        whats = {x["what"] for x in j["limited"]}
        assert {"data stall", "step time", "disk reads"} <= whats
        assert j["stall_fraction"] is None and j["stall_note"]
    shown = {p for j in snap["jobs"] for p in j["pids"]}
    assert server.pid not in shown and kernel.pid not in shown  # not training: not jobs
    # one line for the box (root's jobs on this shared box count too: they are bob's others)
    others = sum(1 for j in snap["jobs"] if j["user"] != "gputopdl_bob")
    assert box_line(others) in snap["notes"] and others >= 2


def test_py_spy_is_refused_on_another_users_process_as_access_predicts(users):
    train = users.write("train.py", TRAIN)
    p = users.popen("alice", [sys.executable, train])
    _started(p, children=2)
    probe = (f"import json; from gputop_dl.collect.pyspy import run as pyspy; "
             f"from gputop_dl.collect.jobs.privilege import Access; "
             f"est, err = pyspy.record_stall({p.pid}, 0.5, 20); "
             f"print(json.dumps({{'err': err, 'perm': pyspy.is_permission_error(err), "
             f"'refusal': Access.read().refusal({users.uid['alice']})}}))")
    out = users.run("bob", [sys.executable, "-c", probe])
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["perm"] and got["refusal"] is not None  # refused, and gputop-dl knew it would be


def test_job_details_say_how_a_job_was_found_and_what_it_lacks():
    from gputop_dl.present.tui.job_detail import FOUND_BY, job_detail_lines
    from gputop_dl.snapshot import JobSample

    lim = Access(euid=1000, sys_ptrace=False, scope=None).limits(1001)
    text = job_detail_lines(JobSample(name="t.py", pid=5, launched=False, found_by="cmdline",
                                      limited=lim), None).plain
    assert FOUND_BY["cmdline"] in text and "disk reads" in text
    mine = job_detail_lines(JobSample(name="t.py", pid=5, launched=False, found_by="maps"), None).plain
    assert FOUND_BY["maps"] in mine and "disk reads" not in mine


class Spy:
    """A stall sampler that records whom it was asked to sample (py-spy itself never runs)."""

    note = None

    def __init__(self):
        self.asked = []

    def round(self, jobs):
        self.asked += [pid for _, pid in jobs]
        return False

    def result(self, key):
        return None

    def pending_note(self, after_s):
        return None


@pytest.mark.parametrize("whose", ["own under yama 1", "another user's"])
def test_py_spy_is_not_pointed_at_a_job_it_may_not_attach_to(tmp_path, monkeypatch, whose):
    from gputop_dl.collect.jobs import found as found_mod
    from gputop_dl.collect.jobs.found import FoundJobs
    from tests.fakes.procs import FakeProc

    monkeypatch.setattr(found_mod, "SPY_AFTER_S", 0.0)
    fp = FakeProc(str(tmp_path / "proc"))
    fp.add(os.getpid(), 1, ["python", "train.py"], TORCH_MAPS)  # owned by this test's user
    me = os.geteuid()
    access = (Access(euid=me, sys_ptrace=False, scope=1) if whose.startswith("own")
              else Access(euid=me + 4242, sys_ptrace=False, scope=None))
    spy = Spy()
    fj = FoundJobs(discoverer=Discoverer(fp.root, own_pid=1, clock=Clock()), stall_sampler=spy,
                   access=access)
    for _ in range(2):
        fj.refresh()
        jobs, notes = fj.sample()
    assert [j.pid for j in jobs] == [os.getpid()] and spy.asked == []
    j = jobs[0]
    assert {"data stall", "step time"} <= {w for w, _ in j.limited}
    assert j.stall_note and j.step_time_note  # the short reason beside the "–"
    if whose.startswith("own"):
        assert sum(WAYS_OUT in n for n in notes) == 1  # one line, the three ways out
        assert not any(n == box_line(1) for n in notes)
    else:
        assert box_line(1) in notes and not any(WAYS_OUT in n for n in notes)
        assert "disk reads" in {w for w, _ in j.limited}
        assert j.name == f"train.py @{j.user}"  # whose it is, wherever it is named
    # the same job with rights to trace: asked for, nothing limited
    spy2 = Spy()
    fj2 = FoundJobs(discoverer=Discoverer(fp.root, own_pid=1, clock=Clock()), stall_sampler=spy2,
                    access=Access(euid=me, sys_ptrace=True, scope=1))
    for _ in range(2):
        fj2.refresh()
        jobs2, _ = fj2.sample()
    assert spy2.asked and jobs2[0].limited == ()


def test_the_verdict_names_another_users_job_by_its_user(users):
    train = users.write("train.py", TRAIN)
    theirs = users.popen("bob", [sys.executable, train, "--bob"])
    _started(theirs, children=2)
    out = users.run("alice", [GPUTOP, "--once", "--json"])
    assert out.returncode == 0, out.stderr
    snap = json.loads(out.stdout)
    job = {j["pid"]: j for j in snap["jobs"]}[theirs.pid]
    # "train.py @gputopdl_bob" ("train.py --bob @gputopdl_bob" beside another train.py)
    assert job["name"].startswith("train.py") and job["name"].endswith(" @gputopdl_bob")
    assert job["user"] == "gputopdl_bob"
    if snap["verdict"] and snap["verdict"].get("jobs"):  # judged: it is one of the jobs, by name
        assert job["name"] in {j["name"] for j in snap["verdict"]["jobs"]}


def test_diagnose_with_its_probe_pauses_no_process_of_another_user(users):
    train = users.write("train.py", TRAIN)
    trainers = [users.popen("alice", [sys.executable, train, "--run", str(i)]) for i in (1, 2)]
    for p in trainers:
        _started(p, children=2)
    trees = [psutil.Process(p.pid) for p in trainers]
    trees += [c for t in list(trees) for c in t.children()]
    stopped = []
    done = threading.Event()

    def watch():  # every process of alice's jobs, all along: never stopped
        while not done.is_set():
            for t in trees:
                try:
                    if t.status() == psutil.STATUS_STOPPED:
                        stopped.append(t.pid)
                except psutil.Error:
                    pass
            time.sleep(0.02)

    w = threading.Thread(target=watch)
    w.start()
    try:
        out = users.run("bob", [GPUTOP, "diagnose", "--seconds", "4", "--json"], timeout=120)
    finally:
        done.set()
        w.join()
    assert out.returncode == 0, out.stderr
    assert not stopped
    res = json.loads(out.stdout)
    jobs = {j["pid"]: j for j in res["jobs"]}
    for p in trainers:
        j = jobs[p.pid]
        assert not j["measured_alone"] and j["why_not_alone"]  # says why: not ours to pause
        assert j["slowdown_source"] in (None, "estimated")  # the live estimate stands


def test_the_monitor_shows_another_users_job_how_it_was_found_and_what_it_lacks():
    from tests.test_tui import SIZE, aio, body_text, feed, new_app

    from gputop_dl.present.tui.job_detail import FOUND_BY
    from gputop_dl.present.tui.screens import JobDetailScreen
    from gputop_dl.snapshot import JobSample
    from tests.fakes.source import monitor_snapshot

    lim = Access(euid=1000, sys_ptrace=False, scope=None).limits(1001)
    job = JobSample(name="train.py @alice", pid=5100, launched=False, pids=(5100, 5101),
                    cpu_cores=1.4, threads=3, cpu_wait_fraction=0.6, user="alice", elapsed_s=90,
                    command="python train.py", cmdline="python train.py", found_by="cmdline",
                    limited=lim, stall_note=lim[0][1], step_time_note=lim[0][1])

    @aio
    async def run():
        app, src = new_app(mode="monitor", session_id=None, live=())
        async with app.run_test(size=SIZE) as pilot:
            await feed(pilot, src, monitor_snapshot(0, jobs=(job,), notes=(box_line(1),)))
            sub = str(app.table.border_subtitle)  # the jobs table's: one line for the box
            assert "1 job: CPU and waits only" in sub and "needs root" in sub
            await pilot.press("enter")
            assert isinstance(app.screen, JobDetailScreen)
            text = body_text(app.screen)
            assert FOUND_BY["cmdline"] in text and "disk reads" in text and "alice" in text

    run()


def test_a_hidden_process_is_judged_again_when_it_forks_not_at_its_back_off(tmp_path):
    fp = box(tmp_path)
    clock = Clock()
    d = Blind(fp.root, own_pid=400, clock=clock)
    fp.add(600, 10, ["python3", "late.py"], TORCH_MAPS)  # importing: no worker yet
    for _ in range(4):  # its back-off grows: 1, 2, 4 s
        clock.t += 8
        assert 600 not in jobs(d)
    clock.t += 0.5  # its loader forks its workers half a second later
    fp.add(601, 600, ["python3", "late.py"], TORCH_MAPS)
    assert 600 in jobs(d)  # found at once, not at its next look 8 s on
