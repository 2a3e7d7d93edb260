"""The stuck judgement (analyse/live/stuck.py): a table of jobs that are stuck, busy, slow or moving."""

import pytest

from gputop_dl.analyse.live.stuck import (
    Dump, Look, StuckJudge, judge_window, kind_of, place_of, threshold)
from gputop_dl.stuck import StackFrame, ThreadStack

SITE = "/usr/lib/python3/site-packages/torch"
LOADER = (StackFrame("Queue.get", "/usr/lib/python3.11/multiprocessing/queues.py", 113),
          StackFrame("_MultiProcessingDataLoaderIter._try_get_data",
                     f"{SITE}/utils/data/dataloader.py", 1133),
          StackFrame("_MultiProcessingDataLoaderIter._next_data",
                     f"{SITE}/utils/data/dataloader.py", 1295),
          StackFrame("train", "/home/u/train.py", 42, "for x in loader:"))
ALLREDUCE = (StackFrame("all_reduce", f"{SITE}/distributed/distributed_c10d.py", 2501),
             StackFrame("step", "/home/u/train.py", 30, "dist.all_reduce(t)"))
BACKWARD = (StackFrame("_engine_run_backward", f"{SITE}/autograd/graph.py", 768),
            StackFrame("backward", f"{SITE}/autograd/__init__.py", 289),
            StackFrame("step", "/home/u/train.py", 31, "loss.backward()"))
LOCK = (StackFrame("work", "/home/u/train.py", 12, "lock.acquire()"),)
SYNC = (StackFrame("synchronize", f"{SITE}/cuda/__init__.py", 985),
        StackFrame("step", "/home/u/train.py", 50, "torch.cuda.synchronize()"))
SLEEPING = (StackFrame("wait_for_file", "/home/u/train.py", 7, "time.sleep(5)"),)
WORKER_IDLE = (StackFrame("Queue.get", "/usr/lib/python3.11/multiprocessing/queues.py", 103),
               StackFrame("_worker_loop", f"{SITE}/utils/data/_utils/worker.py", 300))
WORKER_SLEEPS = (StackFrame("__getitem__", "/home/u/ds.py", 9, "time.sleep(3600)"),
                 StackFrame("fetch", f"{SITE}/utils/data/_utils/fetch.py", 52),
                 StackFrame("_worker_loop", f"{SITE}/utils/data/_utils/worker.py", 349))


def stack(pid, frames):
    return ThreadStack(pid, pid, "MainThread", True, False, frames)


@pytest.mark.parametrize("frames,distributed,kind", [
    (LOADER, False, "dataloader"),
    (ALLREDUCE, False, "collective"),
    (BACKWARD, True, "collective"),  # DDP: the gradient all-reduce runs inside backward
    (BACKWARD, False, "unknown"),  # one process: backward is compute, not a wait
    (LOCK, False, "lock"),
    (SYNC, False, "cuda-sync"),
    (SLEEPING, False, "sleep"),
    ((), False, "unknown"),
])
def test_where_a_main_thread_waits(frames, distributed, kind):
    assert kind_of(frames, distributed) == kind


def test_a_loader_wait_names_the_jobs_frame_and_the_worker_that_sleeps():
    d = Dump(10.0, (stack(100, LOADER),), (stack(101, WORKER_IDLE), stack(102, WORKER_SLEEPS)))
    p = place_of(d)
    assert (p.where, p.frame, p.pid, p.worker_pid) == ("dataloader", "train.py:42 train", 100, 102)
    assert p.worker_frame.startswith("ds.py:9 __getitem__") and "sleep" in p.worker_frame


def test_a_collective_names_the_rank_that_is_not_in_it():
    other = (StackFrame("load_batch", "/home/u/train.py", 20, "time.sleep(9)"),)
    # rank 0 is read after rank 1 here: the rank in the collective still names the place
    d = Dump(10.0, (stack(201, other), stack(200, ALLREDUCE)), ranks=((0, 200), (1, 201), (2, 202)))
    p = place_of(d, distributed=True)
    assert p.where == "collective" and p.pid == 200
    assert p.missing_ranks == ((1, "train.py:20 load_batch"), (2, None))  # 2: no stack read


def test_the_threshold_is_the_floor_or_ten_steps():
    assert threshold(None) == 60.0
    assert threshold(2.0) == 60.0
    assert threshold(20.0) == 200.0
    assert threshold(0.5, min_s=3.0) == 5.0


def look(t, *, step=None, cpu=0.0, read=0.0, writes=0.0, states=("S", "S"), step_t=0.1,
         alive=True, dist=False):
    return Look(t, alive, None if step is None else ("steps", 1, step),
                "steps" if step is not None else "none", step_t, cpu, read, writes, states, dist)


def run(looks_after, *, frames_a=LOADER, frames_b=None, min_s=10.0, dist=False, ranks=()):
    """A job that stepped until t=10, then shows `looks_after(t)` every second to t=40 with
    dumps of its main thread every 2.5 s; returns the judge's verdict at t=40."""
    j = StuckJudge(min_s=min_s)
    for t in range(0, 11):
        j.look("k", look(float(t), step=t, cpu=1.0, dist=dist))
    dumps = 0
    for t in range(11, 41):
        j.look("k", looks_after(float(t)))
        if j.dump_due("k", float(t)):
            frames = frames_a if frames_b is None or dumps % 2 == 0 else frames_b
            mains = (stack(100, frames),) + ((stack(101, ALLREDUCE),) if ranks else ())
            j.dumped("k", Dump(float(t), mains, ranks=ranks))
            dumps += 1
    return j.judge("k", 40.0, wall_now=1000.0)


@pytest.mark.parametrize("case,looks_after,kw,stuck", [
    ("asleep, stack still", lambda t: look(t, step=10), {}, True),
    ("no counter at all, asleep", lambda t: look(t), {}, True),
    ("checkpoint: computing, no steps", lambda t: look(t, step=10, cpu=1.0, states=("R", "S")),
     {}, False),
    ("checkpoint starved of CPU: R at 0.05 cores",
     lambda t: look(t, step=10, cpu=0.05, states=("R", "S")), {}, False),
    ("a process caught waking (R) with no CPU to speak of: asleep",
     lambda t: look(t, step=10, cpu=0.0 if t % 7 else 0.01, states=("R", "S") if t % 7 == 0
                    else ("S", "S")), {}, True),
    ("writing a checkpoint (D, writes)", lambda t: look(t, step=10, states=("D", "S")), {}, False),
    ("reading from disk", lambda t: look(t, step=10, read=5e6), {}, False),
    ("loader workers hand batches", lambda t: look(t, step=10, writes=12.0), {}, False),
    ("still stepping", lambda t: look(t, step=int(t), cpu=0.0), {}, False),
    ("slow: steps of 5 s lift the threshold", lambda t: look(t, step=10, step_t=5.0), {}, False),
    ("the stack moves", lambda t: look(t, step=10), {"frames_b": SLEEPING}, False),
    ("the processes ended", lambda t: look(t, step=10, alive=False), {}, False),
    ("collective spinning a core", lambda t: look(t, step=10, cpu=1.0, states=("R",), dist=True),
     {"frames_a": ALLREDUCE, "dist": True}, True),
    ("collective but writing", lambda t: look(t, step=10, cpu=1.0, states=("D",), dist=True),
     {"frames_a": ALLREDUCE, "dist": True}, False),
])
def test_stuck_or_not(case, looks_after, kw, stuck):
    got = run(looks_after, **kw)
    assert (got is not None) == stuck, case


def test_a_stuck_verdict_carries_its_evidence():
    st = run(lambda t: look(t, step=10))
    assert st.where == "dataloader" and st.frame == "train.py:42 train"
    assert st.for_s == 30.0 and st.threshold_s == 10.0 and st.since == 970.0
    assert st.progress == "steps" and st.dumps >= 2 and st.stack_same_s > 0
    assert st.cpu_cores_max == 0.0 and st.states == "S S" and st.quiet_s == 5.0


def test_it_is_called_only_past_the_threshold_and_clears_on_progress():
    j = StuckJudge(min_s=10.0)
    j.look("k", look(0.0, step=1))
    for t in range(1, 30):
        j.look("k", look(float(t), step=1))
        if j.dump_due("k", float(t)):
            j.dumped("k", Dump(float(t), (stack(1, LOADER),)))
        got = j.judge("k", float(t))
        assert (got is not None) == (t >= 10), t
    j.look("k", look(30.0, step=2))
    assert j.judge("k", 30.0) is None


@pytest.mark.parametrize("quiet_s,stuck", [(5, False), (12, True)])
def test_a_job_that_never_stepped_counts_from_when_it_went_quiet(quiet_s, stuck):
    """Its start-up (importing, loading: busy) is not time without progress."""
    j = StuckJudge(min_s=10.0)
    for t in range(0, 21):
        j.look("k", look(float(t), cpu=1.0))
    for t in range(21, 21 + quiet_s + 1):
        j.look("k", look(float(t)))
        if j.dump_due("k", float(t)):
            j.dumped("k", Dump(float(t), (stack(1, SLEEPING),)))
    assert (j.judge("k", 21.0 + quiet_s) is not None) == stuck


def test_dumps_are_due_from_half_the_threshold_and_sparser_once_stuck():
    j = StuckJudge(min_s=60.0)
    j.look("k", look(0.0, step=1))
    j.look("k", look(29.0, step=1))
    assert not j.dump_due("k", 29.0)
    j.look("k", look(30.0, step=1))
    assert j.dump_due("k", 30.0)
    j.dumped("k", Dump(30.0, (stack(1, LOADER),)))
    assert not j.dump_due("k", 44.0) and j.dump_due("k", 45.0)


@pytest.mark.parametrize("same,moved,idle,stuck", [
    (True, False, True, True), (False, False, True, False), (True, True, True, False),
    (True, False, False, False)])
def test_once_judges_its_own_window(same, moved, idle, stuck):
    first = look(0.0, step=5)
    last = look(2.0, step=6 if moved else 5, cpu=0.0 if idle else 1.0)
    a = Dump(0.0, (stack(1, LOADER),))
    b = Dump(2.0, (stack(1, LOADER if same else SLEEPING),))
    got = judge_window(first, last, [first, last], a, b)
    assert (got is not None) == stuck
    if got is not None:
        assert got.window_s == 2.0 and got.where == "dataloader"


def test_a_stuck_job_in_the_snapshot_json():
    from gputop_dl.snapshot import JobSample, Snapshot
    from gputop_dl.stuck import Stuck
    from tests.schema_check import check

    st = Stuck(since=1.0, for_s=70.0, threshold_s=60.0, where="collective", frame="t.py:30 step",
               stack=("c10d.py:1 all_reduce", "t.py:30 step"), pid=7,
               missing_ranks=((1, "t.py:20 load"), (2, None)), dumps=2, states="S S")
    j = JobSample(name="ddp", pid=7, launched=False, status="stuck", stuck=st, progress_age_s=70.0)
    doc = check(Snapshot(time=2.0, gpu_status="ok", jobs=(j,)).to_json())
    got = doc["jobs"][0]
    assert got["status"] == "stuck" and got["stuck"]["where"] == "collective"
    assert got["stuck"]["missing_ranks"] == [{"rank": 1, "frame": "t.py:20 load"},
                                             {"rank": 2, "frame": None}]
    assert got["stuck"]["stack"][-1] == "t.py:30 step" and got["progress_age_s"] == 70.0


def test_the_watch_calls_a_job_stuck_once_and_skips_only_jobs_py_spy_may_not_read():
    """engine/stuck_watch.py with a fake clock and fake dumps: job a (readable) is called stuck
    past its threshold and told once; job b (another user's: py-spy denied) is never dumped again
    and never called stuck, and does not stop a's dumps."""
    from gputop_dl.engine.stuck_watch import StuckWatch
    from gputop_dl.snapshot import JobSample, ProcSample

    now, dumped = [0.0], []

    def dump(pid):
        dumped.append(pid)
        if pid == 2:
            return None, "py-spy: Permission denied (os error 13)"
        return (stack(pid, SLEEPING),), None

    def row(name, pid):
        return JobSample(name=name, pid=pid, launched=False, status="running", cpu_cores=0.0,
                         epoch=1, step=7, procs=(ProcSample(pid, 1, 0, "main", 0.0, 1, "S"),))

    w = StuckWatch(StuckJudge(min_s=4.0), dump=dump, clock=lambda: now[0])
    told, when = [], None
    for i in range(40):
        now[0] = i * 0.5
        out = {j.name: j for j in w.annotate(1000.0 + now[0], [row("a", 1), row("b", 2)])}
        w.join()
        told += [(j.name, st is not None) for j, st in w.changes()]
        if when is None and out["a"].status == "stuck":
            when = now[0]
        assert out["b"].status == "running"
    assert when is not None and 4.0 <= when <= 6.0
    assert told == [("a", True)] and dumped.count(2) == 1 and dumped.count(1) >= 2
    assert "Permission denied" in w.denied and out["a"].stuck.where == "sleep"
