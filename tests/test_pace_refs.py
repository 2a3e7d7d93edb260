"""Stored pace references (engine/pace_refs.py): a found job's readings alone kept in the session
database, lent in a later gputop-dl run to a copy of it that never ran alone, and only where
its command (but for the options twins differ in), directory, files and interpreter are the
same; the fingerprint read from real processes, the store round trip through two monitor runs."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import replace
from types import SimpleNamespace

import pytest

from gputop_dl.analyse.slowdown import pace as O
from gputop_dl.analyse.slowdown import pace_tracks as T
from gputop_dl.analyse.slowdown import pace_evidence as PE
from gputop_dl.analyse.slowdown import pace_words as E
from gputop_dl.engine.monitor_plan import MonitorPlan
from gputop_dl.engine.pace_refs import PaceRefs, from_data, machine_ident, to_data
from gputop_dl.engine.recorder import Recorder
from gputop_dl.record.store import Store
from gputop_dl.snapshot import HostSample, JobSample
from tests.schema_check import check

# a trainer that waits for its stdin to close: a real process, whose /proc/PID/cwd and exe the
# fingerprint reads
SCRIPT = "import sys\nprint('ready', flush=True)\nsys.stdin.read()\n"


def start(cwd, *args):
    p = subprocess.Popen([sys.executable, "train.py", *args], cwd=cwd, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stdout.readline() == "ready\n"  # running, its cwd set
    return p


@pytest.fixture()
def procs(tmp_path):
    (tmp_path / "train.py").write_text(SCRIPT)
    started: list[subprocess.Popen[str]] = []

    def spawn(*args, cwd=tmp_path):
        started.append(start(cwd, *args))
        return started[-1]

    yield spawn
    for p in started:
        p.kill()
        p.wait()


def sample(p, cwd, *args, writes=None, cores=None, name=None):
    command = " ".join(["python", "train.py", *args])
    return JobSample(name=name or f"train.py ({p.pid})", pid=p.pid, launched=False,
                     pids=(p.pid,), cpu_cores=1.0, cpu_wait_fraction=0.5, command=command,
                     cwd=str(cwd), cpu_cores_workers=cores, loader_writes_per_s=writes)


def ref(**kw):
    return T.Reference("python train.py", **({"until": 100.0, "writes": (20.0,) * O.REF_MIN}
                                             | kw))


def test_a_stored_reference_paces_a_job_that_never_ran_alone():
    """Started beside another job, with no twin running: the stored reference's 20 write calls
    a second alone against its own 5 now is 4×, said with the reference's age; a running
    twin's own reading alone comes first; one older than STORED_MAX_AGE_S paces nothing."""
    pace = T.OwnPace()
    pace.lend_stored(200, ref())
    b = JobSample(name="b", pid=200, launched=False, pids=(200,), command="python train.py",
                  loader_writes_per_s=5.0)
    c = JobSample(name="c", pid=300, launched=False, pids=(300,), loader_writes_per_s=5.0)
    for t in range(T.SETTLE + O.NOW_MIN):
        got = pace.update([b, c], 1000.0 + t)
    assert got["b"].slowdown == pytest.approx(4.0) and got["b"].source == "batches"
    assert got["b"].lender.stored_age_s == 1000 + T.SETTLE + O.NOW_MIN - 1 - 100
    assert got["b"].lender.pid is None and got["c"].slowdown is None
    fig = O.pace_figure(got["b"])
    assert (fig.kind, fig.method, fig.reference) == ("pace", "loader writes", "stored run")
    line = E.pace_line("b", got["b"], True)
    assert "a stored run's (the same command in the same directory, files unchanged, 15 min ago)" \
        in line and "4.00× slower" in line
    ev = PE.evidence(got["b"], True)
    assert ev["stored_age_s"] == got["b"].lender.stored_age_s

    old = T.OwnPace()
    old.lend_stored(200, ref(until=1000.0 - T.STORED_MAX_AGE_S - 1))
    for t in range(T.SETTLE + O.NOW_MIN):
        got = old.update([b, c], 1000.0 + t)
    assert got["b"].slowdown is None and got["b"].lender is None


def test_a_running_twins_reference_comes_before_a_stored_one():
    pace = T.OwnPace()
    a = JobSample(name="a", pid=100, launched=False, pids=(100,), command="python train.py",
                  loader_writes_per_s=10.0)
    for t in range(T.SETTLE + O.REF_MIN):
        pace.update([a], float(t))
    pace.lend_stored(200, ref())  # stored alone at 20/s; its running twin read 10/s
    b = JobSample(name="b", pid=200, launched=False, pids=(200,), command="python train.py",
                  loader_writes_per_s=5.0)
    for t in range(T.SETTLE + O.NOW_MIN):
        got = pace.update([replace_writes(a, 5.0), b], 100.0 + t)
    assert got["b"].lender.pid == 100 and got["b"].slowdown == pytest.approx(2.0)
    assert got["b"].lender.stored_age_s is None
    [mine] = [r for r in pace.references() if r.pid == 100]  # what the monitor stores
    assert mine.writes == (10.0,) * O.REF_MIN and mine.until == T.SETTLE + O.REF_MIN - 1
    assert mine.command == "python train.py" and mine.usable()


def replace_writes(j, w):
    return replace(j, loader_writes_per_s=w)


@pytest.mark.parametrize("until, data", [
    (float("nan"), {"writes": [1.0] * 10}), (1.0, None), (1.0, ["x"]),
    (1.0, {"writes": [1.0] * 9}),  # too few readings to pace by
    (1.0, {"writes": [1.0] * 9 + [float("inf")]}), (1.0, {"writes": [1.0] * 9 + [-1.0]}),
    (1.0, {"writes": [1.0] * 9 + ["2"]}), (1.0, {"cores": "0.4"}),
])
def test_a_stored_row_that_is_not_a_reference_is_skipped(until, data):
    assert from_data(until, "python train.py", data) is None


def test_a_reference_survives_the_store_shape():
    r = ref(cores=(0.4,) * 12, steps=(0.05,))
    assert from_data(r.until, r.command, to_data(r)) == r


def test_a_loop_counter_alone_is_stored_and_paces_a_copy_started_beside_another():
    """A job with no loader workers, paced by its own loop counter (collect/pyspy/loop_counter.py):
    its pairs of dumps alone are its stored reference (30 s at 10 steps a second), which a
    later monitor lends to a copy that never ran alone: 2.5 a second beside another job is 4×,
    by its own count, with the stored run's age. A stored counter of another name paces
    nothing; one damaged in the store is left out, the rest of the row kept."""
    name = "main.py:train:batch"

    def a(pid, steps, span, at, counter=name):
        return JobSample(name=f"main.py ({pid})", pid=pid, launched=False, pids=(pid,),
                         command="python main.py", cwd="/w", elapsed_s=600.0, cpu_cores=1.0,
                         loop_counter=counter, loop_steps=steps, loop_span_s=span, loop_read_t=at)

    first = T.OwnPace()
    for k in range(5):  # alone, a dump every 10 s
        first.update([a(100, 100 * k, 10.0 * k, 10.0 * k)], 10.0 * k)
    [stored] = first.references()  # the counter's first pair is its loop's warm-up
    assert stored.loop == name and stored.loop_pairs == ((100, 10.0),) * 3 and stored.usable()
    assert stored.cores == stored.writes == stored.steps == ()
    back = from_data(stored.until, stored.command, to_data(stored))
    assert back == replace(stored, pid=None)

    c = JobSample(name="c", pid=300, launched=False, pids=(300,), elapsed_s=600.0, cpu_cores=1.0)
    for counter, want in ((name, 4.0), ("main.py:train:i", None)):
        later = T.OwnPace()
        later.lend_stored(200, back)
        for k in range(4):  # beside c from its start: 25 steps every 10 s
            got = later.update([a(200, 25 * k, 10.0 * k, 1000.0 + 10 * k, counter), c],
                               1000.0 + 10 * k)
        b = got["main.py (200)"]
        assert b.slowdown == (pytest.approx(want) if want else None), (counter, b)
        if want:
            assert b.source == "counter" and b.lender.stored_age_s == 1030 - 40 and b.counter.now == 2.5
            assert b.counter.now_s == 20.0  # its first pair beside c was its warm-up
            assert "a stored run's (the same command in the same directory, files unchanged, " \
                "16 min ago) own loop counter" in E.pace_line("b", b, True)

    damaged = dict(to_data(ref()), loop={"name": name, "steps": [100, -1], "seconds": [10.0, 10.0]})
    kept = from_data(100.0, "python train.py", damaged)
    assert kept is not None and kept.loop is None and kept.writes == ref().writes
    assert from_data(100.0, "python train.py", {"loop": {"name": name, "steps": [100],
                                                         "seconds": [10.0]}}) is None  # 10 s


def test_the_fingerprint_is_the_command_but_for_twin_options_its_directory_and_files(
        procs, tmp_path):
    """Read from real processes: two copies of a script that differ in their seed share it;
    another directory, another interpreter argument, or the script edited since is another
    job; a process that is gone has none."""
    refs = PaceRefs(None, lambda: machine_ident({}))
    other = tmp_path / "other"
    other.mkdir()
    (other / "train.py").write_text(SCRIPT)
    p1, p2 = procs("--seed", "1"), procs("--seed", "2")
    p3 = procs("--seed", "1", cwd=other)
    p4 = procs("--batch-size", "64")
    fp = [refs.fingerprint(sample(p, cwd, *a)) for p, cwd, a in (
        (p1, tmp_path, ("--seed", "1")), (p2, tmp_path, ("--seed", "2")),
        (p3, other, ("--seed", "1")), (p4, tmp_path, ("--batch-size", "64")))]
    assert fp[0] is not None and fp[0] == fp[1]
    assert len({fp[0], fp[2], fp[3]}) == 3
    (tmp_path / "train.py").write_text(SCRIPT + "# edited\n")
    p5 = procs("--seed", "1")
    assert refs.fingerprint(sample(p5, tmp_path, "--seed", "1")) not in (fp[0], None)
    p5.kill()
    p5.wait()
    gone = PaceRefs(None, lambda: machine_ident({}))
    assert gone.fingerprint(sample(p5, tmp_path, "--seed", "1")) is None


def run_monitor(path, ticks, t0):
    """One recording monitor run over `ticks` ((n, found jobs) pairs, a tick a second from
    `t0`), as the engine drives MonitorPlan: prepare, after_tick and the recorder's tick, close.
    Its plan and the last tick's estimates."""
    rec = Recorder(path)
    plan = MonitorPlan()
    engine = SimpleNamespace(recorder=rec, env={}, interval=1.0, say=lambda *_: None)
    plan.prepare(engine)
    t = t0
    for n, jobs in ticks:
        for _ in range(n):
            plan.after_tick(engine, t, SimpleNamespace(found=tuple(jobs), host=HostSample(cpus=2),
                                                       gpu_processes=(), gpus=()))
            rec.tick(t, HostSample(cpus=2), ())
            t += 1.0
    plan.close(engine)
    rec.tick(t, HostSample(cpus=2), ())
    rec.close("finished", plan.verdict)
    return plan


def test_a_later_monitor_paces_copies_started_together_by_a_stored_run(procs, tmp_path):
    """Run 1: a copy alone (20 write calls a second). Run 2, another gputop-dl an hour and a
    half later: two copies started together (seeds differ) and another script, none ever alone:
    the copies are paced by the stored run (4× at 5 a second), the other script is not; the
    verdict's evidence says it and validates. Run 3: the script edited since: nothing lent."""
    path = str(tmp_path / "sessions.db")
    t1 = time.time() - 5400
    a = procs("--seed", "1")
    run_monitor(path, [(T.SETTLE + O.REF_MIN, [sample(a, tmp_path, "--seed", "1", writes=20.0)])],
                t1)
    a.kill()
    a.wait()
    b, c = procs("--seed", "2"), procs("--seed", "3")
    (tmp_path / "other.py").write_text(SCRIPT)
    d = subprocess.Popen([sys.executable, "other.py"], cwd=tmp_path, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    try:
        assert d.stdout is not None and d.stdout.readline() == "ready\n"
        together = [sample(b, tmp_path, "--seed", "2", writes=5.0, name="b"),
                    sample(c, tmp_path, "--seed", "3", writes=5.0, name="c"),
                    JobSample(name="other.py", pid=d.pid, launched=False, pids=(d.pid,),
                              cpu_cores=1.0, cpu_wait_fraction=0.5, command="python other.py",
                              cwd=str(tmp_path), loader_writes_per_s=5.0)]
        plan = run_monitor(path, [(T.SETTLE + O.NOW_MIN, together)], time.time())
    finally:
        d.kill()
        d.wait()
    for name in ("b", "c"):
        p = plan.estimates[name].pace
        assert p is not None and p.slowdown == pytest.approx(4.0)
        assert p.lender.stored_age_s is not None and 5400 - 60 < p.lender.stored_age_s < 5400 + 600
        assert p.lender.args == ("--seed",)
    other = plan.estimates["other.py"].pace
    assert other is not None and other.slowdown is None
    v = check(plan.verdict, "verdict")
    paced = v["evidence"]["own_pace"]
    assert paced["b"]["stored_age_s"] == plan.estimates["b"].pace.lender.stored_age_s
    assert any("a stored run's (the same command but for --seed" in e for e in v["evidence_lines"])

    (tmp_path / "train.py").write_text(SCRIPT + "# edited\n")
    os.utime(tmp_path / "train.py")
    e = procs("--seed", "4")
    plan = run_monitor(path, [(T.SETTLE + O.NOW_MIN, [
        sample(e, tmp_path, "--seed", "4", writes=5.0, name="e"),
        together[2]])], time.time())
    p = plan.estimates["e"].pace
    assert p is not None and p.slowdown is None and p.lender is None


def test_a_monitor_that_does_not_record_neither_reads_nor_stores(tmp_path):
    path = str(tmp_path / "sessions.db")
    plan = MonitorPlan()
    plan.prepare(SimpleNamespace(recorder=Recorder(path, enabled=False), env={}))
    assert plan.refs is None


def test_damaged_stored_rows_are_skipped_and_the_others_read(tmp_path):
    """Rows a damaged page or another version left (not JSON, a text time, no command, another
    host's, older than STORED_MAX_AGE_S) lend nothing; a good row beside them is read."""
    path = str(tmp_path / "sessions.db")
    st = Store(path)
    now, host, good = time.time(), socket.gethostname(), to_data(ref())
    rows = [("good", now - 60, host, "python train.py", json.dumps(good)),
            ("notjson", now - 60, host, "python train.py", "{writes: [1"),
            ("texttime", "yesterday", host, "python train.py", json.dumps(good)),
            ("nocommand", now - 60, host, None, json.dumps(good)),
            ("elsewhere", now - 60, host + "-other", "python train.py", json.dumps(good)),
            ("old", now - T.STORED_MAX_AGE_S - 60, host, "python train.py", json.dumps(good))]
    st.db.executemany("INSERT INTO pace_refs VALUES (?,?,?,?,?)", rows)
    st.commit()
    st.close()
    refs = PaceRefs(path, lambda: machine_ident({}))
    refs.load(now)
    assert set(refs._stored) == {"good"}
    assert refs._stored["good"].writes == tuple(good["writes"])


def test_nothing_is_read_before_the_first_job_is_found(tmp_path):
    """A monitor's start-up reads neither the stored references nor the machine's identity
    (the environment table): only the first found job does."""
    class Engine:
        recorder = Recorder(str(tmp_path / "sessions.db"))
        interval = 1.0

        @property
        def env(self):
            raise AssertionError("the environment was read before a job was found")

        def say(self, *_):
            pass

    plan, engine = MonitorPlan(), Engine()
    plan.prepare(engine)
    for t in range(3):
        plan.after_tick(engine, 100.0 + t, SimpleNamespace(found=(), host=HostSample(cpus=2),
                                                           gpu_processes=(), gpus=()))
    assert plan.refs is not None and not plan.refs._loaded and plan.refs._ident is None
