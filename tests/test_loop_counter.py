"""A found job's own loop counter (collect/pyspy/loop_counter.py): py-spy's dump of its main thread's
locals parsed, the counter chosen, torn readings dropped, dumps scheduled within a budget; and
one real dump of a running loop."""

import json
import subprocess
import sys
import time

import pytest

from gputop_dl.collect.pyspy import loop_counter as L
from gputop_dl.collect.pyspy import run as pyspy


def frame(name, fname, **ints):
    return {"name": name, "short_filename": fname, "filename": "/x/" + fname, "line": 1,
            "locals": [{"name": k, "repr": str(v), "arg": False} for k, v in ints.items()]}


def dump_text(pid, frames, other_thread=True):
    """py-spy's --json: threads, each with its frames innermost first."""
    threads = [{"pid": pid, "os_thread_id": pid, "frames": frames}]
    if other_thread:  # a pool thread with a loop of its own comes first
        threads.insert(0, {"pid": pid, "os_thread_id": pid + 1,
                           "frames": [frame("worker", "pool.py", i=99)]})
    return json.dumps(threads)


def test_a_dump_gives_the_main_threads_named_ints_outermost_first():
    text = dump_text(42, [
        {**frame("<listcomp>", "fetch.py", idx=4071), "filename": "/x/torch/utils/fetch.py"},
        {**frame("fetch", "fetch.py", i=9), "filename": "/x/site-packages/torch/utils/fetch.py"},
        frame("forward", "model.py", i=3, hidden=7),             # innermost of the user's
        {**frame("train", "main.py", batch=12, i=420, ntokens=3001),
         "locals": [*frame("train", "main.py", batch=12, i=420, ntokens=3001)["locals"],
                    {"name": "loss", "repr": "tensor(2.3)"}, {"name": "step", "repr": "1.5"}]},
        frame("<module>", "main.py")])
    got = L.parse_dump(text, 42)
    # (torch's frames and the comprehension are not read: a DataLoader's sample indices)
    assert got == {(1, "main.py:train", "batch"): 12, (1, "main.py:train", "i"): 420,
                   (2, "model.py:forward", "i"): 3}
    assert L.parse_dump(text, 7) is None  # no main thread of that process
    assert L.parse_dump("not json", 42) is None


def test_the_counter_is_the_outermost_that_moved_and_is_kept():
    loop, inner, sweep = (1, "main.py:train", "batch_idx"), (2, "m.py:forward", "i"), \
        (0, "main.py:main", "i")
    d1 = (0.0, {sweep: 3, loop: 10, inner: 1})
    assert L.choose([d1], None) is None  # nothing moved yet
    d2 = (10.0, {sweep: 3, loop: 110, inner: 0})
    # the sweep's outer `i` stands still; the loop's moved and is outer to forward's
    assert L.choose([d1, d2], None) == loop
    d3 = (20.0, {sweep: 3, inner: 2})  # in its evaluation: the loop is not on the stack
    assert L.choose([d1, d2, d3], loop) == loop  # kept: a dump of the last 3 found it
    gone = [d1, d2, d3, (30.0, {sweep: 3, inner: 5}), (40.0, {sweep: 3, inner: 9})]
    assert L.choose(gone, loop) == inner  # not in the last 3: what moved and is there
    assert L.choose([d1, d2, (30.0, {sweep: 3, loop: 5, inner: 1})], loop) == loop


def test_torn_readings_are_dropped_and_a_new_epoch_starts_a_new_run():
    c = (1, "main.py:train", "batch_idx")

    def d(t, v, epoch=None):
        return (t, {c: v} if epoch is None else {c: v, (0, "main.py:main", "epoch"): epoch})

    # a tight loop read 957 then 19999 (torn: another local's value), then 1112
    acc, paired = L.confirm(d(0, 900), d(10, 19999), d(20, 1112), c)
    assert acc == d(0, 900) and paired is None
    # ... and the next reading pairs across it: 900 -> 1112 over 20 s
    acc, paired = L.confirm(acc, d(20, 1112), d(30, 1200), c)
    assert acc == d(20, 1112) and paired == (212, 20)
    # torn low between two in order
    assert L.confirm(d(0, 3261), d(10, 5), d(20, 3404), c) == (d(0, 3261), None)
    # a new epoch: 900 at the end of one, 5 and 100 in the next: 5 starts the new run
    assert L.confirm(d(0, 900), d(10, 5), d(20, 100), c) == (d(10, 5), None)
    # an epoch local that moved: no pair, though the count went up
    assert L.confirm(d(0, 50, epoch=1), d(10, 80, epoch=2), d(20, 90, epoch=2), c) \
        == (d(10, 80, epoch=2), None)
    assert L.confirm(None, d(10, 80), d(20, 90), c) == (d(10, 80), None)


def test_the_sampler_counts_paired_dumps_within_its_budget():
    c = (0, "main.py:train", "batch_idx")
    values = iter([10, 110, 210, 19999, 410, 510])
    calls = []

    def dump(pid, exe):
        calls.append(pid)
        return {c: next(values)}, None, 0.02

    now = [0.0]
    s = L.CounterSampler(every_s=10, cpu_budget=0.001, credit=0.05, dump=dump,
                         clock=lambda: now[0])
    assert s.round([("a", 1), ("b", 2)])  # one at a time: "a" first
    s.join()
    assert calls == [1]
    now[0] = 1.0
    assert s.round([("a", 1), ("b", 2)])
    s.join()
    assert calls == [1, 2]  # b's turn, paid from the credit (0.05 - 0.02)
    now[0] = 2.0
    assert not s.round([("a", 1), ("b", 2)])  # 0.01 left: under a dump's cost
    now[0] = 5.0
    assert not s.round([("a", 1)])  # a was dumped 5 s ago; b is forgotten
    assert s.result("b") is None
    now[0] = 30.0  # refilled: 0.001 x 28 s of credit = 0.028 >= a dump's 0.02
    s.round([("a", 1)])
    s.join()
    got = s.result("a")
    assert got.name == "main.py:train:batch_idx" and got.steps == 0  # not confirmed yet


def _dumps_per_job(n_jobs: int, **kw) -> list[int]:
    """Each job's dumps over the last 200 of 300 simulated seconds, a round a second, a
    dump costing 20 ms of CPU."""
    calls: list[int] = []

    def dump(pid, exe):
        calls.append(pid)
        return {(0, "main.py:train", "batch_idx"): len(calls)}, None, 0.02

    now = [0.0]
    s = L.CounterSampler(dump=dump, clock=lambda: now[0], **kw)
    jobs = [(f"j{i}", i) for i in range(n_jobs)]
    start = 0
    for t in range(300):
        now[0] = float(t)
        if t == 100:
            start = len(calls)
        s.round(jobs)
        s.join()
    return [calls[start:].count(i) for i in range(n_jobs)]


def test_each_job_read_gets_its_own_share_of_the_dumps_budget_up_to_the_cap():
    # 0.2 % of a core a job: a dump of 20 ms every 10 s each (EVERY_S), for 3 jobs as for one
    assert _dumps_per_job(1) == [20]
    assert all(19 <= n <= 21 for n in _dumps_per_job(3))
    # the cap, 0.6 %: 6 jobs share 60 dumps in 200 s, every 20 s each
    got = _dumps_per_job(6)
    assert sum(got) in range(58, 62) and all(9 <= n <= 11 for n in got)
    # one share for all (the cap at the per-job share) made them every 30 s beside two others
    assert all(6 <= n <= 7 for n in _dumps_per_job(3, cpu_max=L.COUNTER_BUDGET))


def test_the_sampler_sums_confirmed_pairs_and_stops_where_py_spy_may_not_read():
    c = (0, "main.py:train", "batch_idx")
    s = L.CounterSampler(dump=lambda pid, exe: (None, "py-spy: Permission denied (os error 13)",
                                                0.01))
    for i, v in enumerate([10, 110, 210, 19999, 410, 510]):
        s.add("a", (100.0 + 10 * i, {c: v}))
    got = s.result("a")
    # 10 -> 110 -> 210 -> (19999 torn) -> 410: 400 steps over 40 s; 510 awaits the next
    assert (got.value, got.steps, got.span_s, got.t) == (410, 400, 40.0, 140.0)
    assert s.round([("x", 5)])
    s.join()
    assert s.denied and not s.round([("x", 5)])


PROG = """
import sys, time
def train():
    for epoch in range(3):
        for batch_idx in range(10**9):
            time.sleep(0.001)
            if batch_idx == 20:
                print("ready", flush=True)
train()
"""


@pytest.mark.skipif(pyspy.pyspy_path() is None, reason="py-spy is not installed")
def test_a_real_loop_is_read_by_its_own_counter():
    """A real process counting `batch_idx`: py-spy's dumps find it in `train` and count it."""
    p = subprocess.Popen([sys.executable, "-c", PROG], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"  # its loop runs
        s = L.CounterSampler(every_s=0, cpu_budget=0)
        deadline = time.monotonic() + 60
        got = None
        while time.monotonic() < deadline:
            s.round([("job", p.pid)])
            s.join()
            got = s.result("job")
            if got is not None and got.span_s >= 1.0:
                break
        if s.denied:
            pytest.skip("py-spy may not read this process here (ptrace rights)")
        assert got is not None and got.name == "<string>:train:batch_idx"
        assert got.steps > 0 and got.span_s > 0
        assert 50 < got.steps / got.span_s < 1100  # a sleep of 1 ms a step: under 1,000 a second
    finally:
        p.kill()
        p.wait()
