"""The live slowdown from a job's own pace: its loader workers' cores beside other jobs against
while it ran alone (analyse/slowdown/pace.py), and where the live judge uses it (analyse/live/passive.py);
hand-made samples, no process, no clock."""

from collections import deque
from dataclasses import replace

import pytest
from rich.console import Console

from gputop_dl.analyse.slowdown import pace as O
from gputop_dl.analyse.slowdown import pace_tracks as T
from gputop_dl.analyse.live.passive import WINDOW, PassiveJudge, annotate
from gputop_dl.collect.proc.procs import TreeSample
from gputop_dl.collect.proc.cpu_wait import tree_wait, wait_fields
from gputop_dl.present.headless import jobs_table
from gputop_dl.present.verdict_text import job_line, provenance_text, slowdown_text, slowdown_tone
from gputop_dl.snapshot import HostSample, JobSample, Snapshot
from tests.schema_check import check

TWO = HostSample(cpus=2, cpu_busy=1.0, cpu_pressure_some10=0.9)
POOL = ((0.5, 1.0), (0.5, 1.0))  # two busy trainer threads, runnable all the time: they spin


def job(name, pid, workers, f=0.5, cores=1.0, **kw):
    return JobSample(name=name, pid=pid, launched=False, pids=(pid, pid + 1), cpu_cores=cores,
                     cpu_wait_fraction=f, cpu_cores_workers=workers, **kw)


def feed(judge, phases, t0=0):
    """`phases`: (ticks, jobs) pairs, fed in order, one tick a second from `t0`; the last
    verdict."""
    t, out = t0, (None, {})
    for ticks, jobs in phases:
        for _ in range(ticks):
            out = judge.verdict(jobs, TWO, t=float(t))
            t += 1
    return out


def test_the_pace_is_the_loader_rate_alone_over_now_after_it_settled():
    pace = T.OwnPace()
    a = lambda w: job("a", 100, w)  # noqa: E731
    b = job("b", 200, 0.1)
    # start-up (not its pace), then alone at 0.40 cores, then beside b at 0.10
    for t in range(T.SETTLE):
        got = pace.update([a(5.0)], float(t))
    for t in range(T.SETTLE, T.SETTLE + O.REF_MIN):
        got = pace.update([a(0.40)], float(t))
    assert got["a"].slowdown is None and got["a"].why == "it runs alone"
    assert got["a"].loader.cores_alone == pytest.approx(0.40)  # the start-up's 5 cores are not in it
    for t in range(T.SETTLE):  # b's start-up: a's ticks count neither as alone nor as beside
        got = pace.update([a(0.40), b], 80.0 + t)
    assert got["a"].loader.now_ticks == 0 and got["a"].loader.alone_ticks == O.REF_MIN
    for t in range(O.NOW_MIN - 1):
        got = pace.update([a(0.10), b], 100.0 + t)
    assert got["a"].slowdown is None and "readings beside the others" in got["a"].why
    got = pace.update([a(0.10), b], 200.0)
    assert got["a"].slowdown == pytest.approx(4.0)
    assert got["a"].alone_until == float(T.SETTLE + O.REF_MIN - 1)
    # b never ran alone: nothing of its own to compare
    assert got["b"].slowdown is None and "has not run alone" in got["b"].why


@pytest.mark.parametrize("workers, why", [
    (None, "no loader worker processes"),
    (0.002, "too little to pace"),
])
def test_no_pace_without_a_loader_that_works(workers, why):
    pace = T.OwnPace()
    for t in range(T.SETTLE + O.REF_MIN):
        pace.update([job("a", 100, workers)], float(t))
    for t in range(O.NOW_MIN):
        got = pace.update([job("a", 100, workers), job("b", 200, 0.1)], 50.0 + t)
    assert got["a"].slowdown is None and why in got["a"].why


def test_a_loader_idle_beside_the_others_gives_no_pace_and_alone_again_clears_now():
    pace = T.OwnPace()
    for t in range(T.SETTLE + O.REF_MIN):
        pace.update([job("a", 100, 0.3)], float(t))
    for t in range(T.SETTLE + O.NOW_MIN):
        got = pace.update([job("a", 100, 0.0), job("b", 200, 0.1)], 50.0 + t)
    assert got["a"].slowdown is None and "did no work" in got["a"].why
    pace.update([job("a", 100, 0.3)], 80.0)  # b ended: alone again, the window starts over
    for t in range(T.SETTLE + 1):  # b2's start-up, then one tick beside it
        got = pace.update([job("a", 100, 0.1), job("b2", 300, 0.1)], 81.0 + t)
    assert got["a"].loader.now_ticks == 1 and got["a"].slowdown is None


def test_a_job_renamed_when_its_twin_starts_keeps_its_pace_alone():
    pace = T.OwnPace()
    for t in range(T.SETTLE + O.REF_MIN):
        pace.update([job("train.py", 100, 0.4)], float(t))
    for t in range(T.SETTLE + O.NOW_MIN):
        got = pace.update([job("train.py (100)", 100, 0.1), job("train.py (200)", 200, 0.1)],
                          50.0 + t)
    assert got["train.py (100)"].slowdown == pytest.approx(4.0)


def test_a_job_gone_is_forgotten():
    pace = T.OwnPace()
    for t in range(T.SETTLE + O.REF_MIN):
        pace.update([job("a", 100, 0.3)], float(t))
    pace.update([job("b", 200, 0.3)], 99.0)  # a ended; a new a (another pid) starts from nothing
    got = pace.update([job("a", 101, 0.3), job("b", 200, 0.3)], 100.0)
    assert got["a"].loader.alone_ticks == 0


def test_spinning_pools_take_their_slowdown_from_their_own_pace():
    """Two jobs with spinning intra-op pools: the CPU-wait model reads them 0.1-1.4 of their
    truth (docs/validation.md). The first ran alone at 0.40 loader cores, now 0.08 beside the
    second: 5× by its own pace, which is its slowdown ("own pace"); the second never ran
    alone and keeps the estimate."""
    alone = [job("a", 100, 0.40, f=0.05, cpu_pool=((0.05, 1.0), (0.05, 1.0)))]
    both = [job("a", 100, 0.08, cpu_pool=POOL), job("b", 200, 0.08, cpu_pool=POOL)]
    v, est = feed(PassiveJudge(), [(T.SETTLE + O.REF_MIN, alone), (T.SETTLE + O.NOW_MIN, both)])
    a, b = est["a"], est["b"]
    assert a.pace_used and a.slowdown == pytest.approx(5.0) and a.cause == "cpu"
    assert not b.pace_used and b.slowdown is not None and b.slowdown < 5.0
    assert v.kind == "cpu-bound"
    data = v.to_json()
    check(data, "verdict")
    rows = {j["name"]: j for j in data["jobs"]}
    assert rows["a"]["slowdown_source"] == "own pace" and rows["b"]["slowdown_source"] == "estimated"
    assert "by its own pace" in job_line(rows["a"])
    pace = data["evidence"]["own_pace"]
    assert pace["a"]["used"] and pace["a"]["loader_cores_alone"] == pytest.approx(0.40)
    assert pace["b"]["slowdown"] is None and "has not run alone" in pace["b"]["why"]
    assert any("its own pace 5.00× slower" in line for line in v.evidence_lines)
    assert "a 5.00× (its own pace)" in v.evidence_lines[0]
    assert slowdown_text(5.0, "own pace") == "5.00× pace"


def test_a_pace_that_agrees_with_the_estimate_is_evidence_only():
    """No spin, the model's estimate and the pace within 1.6×: the estimate stays the slowdown,
    the pace is said beside it."""
    alone = [job("a", 100, 0.30, f=0.0, cores=0.9)]
    both = [job("a", 100, 0.18, f=0.5, cores=0.6), job("b", 200, 0.18, f=0.5, cores=0.6)]
    v, est = feed(PassiveJudge(), [(T.SETTLE + O.REF_MIN, alone), (T.SETTLE + O.NOW_MIN, both)])
    a = est["a"]
    assert not a.pace_used and a.pace.slowdown == pytest.approx(0.30 / 0.18, rel=1e-3)
    assert a.slowdown is not None and a.slowdown != pytest.approx(a.pace.slowdown)
    assert any("the CPU-wait estimate agrees" in line for line in v.evidence_lines)
    assert v.to_json()["jobs"][0]["slowdown_source"] == "estimated"


def test_a_pace_far_from_the_estimate_wins_without_spin():
    alone = [job("a", 100, 0.60, f=0.0, cores=0.9)]
    both = [job("a", 100, 0.10, f=0.2, cores=0.6), job("b", 200, 0.10, f=0.2, cores=0.6)]
    _, est = feed(PassiveJudge(), [(T.SETTLE + O.REF_MIN, alone), (T.SETTLE + O.NOW_MIN, both)])
    assert est["a"].pace_used and est["a"].slowdown == pytest.approx(6.0)


def test_the_loader_cores_are_the_tree_less_its_trainers():
    ts = TreeSample(pids=(10, 11, 12, 13), cpu_cores=1.5, rss=0, threads=9,
                    cpu_by_pid={10: 1.0, 11: 0.2, 12: 0.25, 13: 0.05})
    cw = tree_wait(ts, 10)
    assert cw.workers_cores == pytest.approx(0.5)
    assert wait_fields(cw)["cpu_cores_workers"] == pytest.approx(0.5)
    alone = replace(ts, pids=(10,), cpu_by_pid={10: 1.0})
    assert tree_wait(alone, 10).workers_cores is None  # no worker: no pace, not 0
    assert tree_wait(replace(ts, cpu_by_pid=None), 10).workers_cores is None  # first tick
    # the workers' main threads' schedstat, where read, before their 10 ms clock ticks
    precise = replace(ts, main_cores_by_pid={11: 0.004, 12: 0.0021, 13: 0.0})
    assert tree_wait(precise, 10).workers_cores == pytest.approx(0.0061)
    # a quiet tick read no worker: no figure (the next reading's rate spans it), not 0
    assert tree_wait(replace(ts, quiet=True, main_cores_by_pid=None), 10).workers_cores is None


def test_a_job_started_beside_others_is_paced_once_they_end():
    """b never ran alone before: no pace while a runs. a ends; after 10 readings of b alone,
    its pace alone over its last window beside a says how much slower it ran then, in the
    `alone` verdict's evidence."""
    both = [job("a", 100, 0.1), job("b", 200, 0.1)]
    alone = [job("b", 200, 0.3, f=0.0, cores=0.9)]
    judge = PassiveJudge()
    v, est = feed(judge, [(O.NOW_TICKS, both)])
    assert est["b"].pace.slowdown is None and "has not run alone" in est["b"].pace.why
    v, est = feed(judge, [(O.REF_MIN - 1, alone)], t0=O.NOW_TICKS)
    assert est["b"].pace.earlier is None  # too few readings alone yet
    v, est = feed(judge, [(1, alone)], t0=O.NOW_TICKS + O.REF_MIN - 1)
    assert v.kind == "alone"
    assert est["b"].pace.earlier == pytest.approx(3.0)
    data = check(v.to_json(), "verdict")
    assert data["evidence"]["own_pace"]["b"]["earlier_slowdown"] == pytest.approx(3.0)
    assert data["evidence"]["own_pace"]["b"]["earlier_ago_s"] == pytest.approx(O.REF_MIN)
    assert any("its loader's pace was 3.00× slower than alone" in line
               for line in v.evidence_lines)


def test_a_job_without_loader_workers_is_paced_by_its_step_times():
    """PyTorch's word_language_model has no loader workers: alone, py-spy read 44 ms then 46 ms
    a step; beside a second copy the value it shows at first is still its last one alone (not
    a reading beside them), then a burst reads 1.5 s: 33.3x by its own steps, its slowdown
    where its pool spins (the estimate read 4x)."""
    def a(step, pool=((0.05, 1.0), (0.05, 1.0))):
        return job("a", 100, None, f=0.05, step_time_s=step, cpu_pool=pool)

    b = job("b", 200, None, cpu_pool=POOL)
    phases = [(T.SETTLE + 2, [a(None)]), (5, [a(0.044)]), (5, [a(0.046)]),
              (3, [a(0.046, POOL), b])]
    v, est = feed(PassiveJudge(), phases)
    assert not est["a"].pace_used  # its last reading alone is no pace beside b
    assert est["a"].pace.why == "no step time read since the others run beside it"
    # a burst that ended 3 s after b came may have begun before: no reading beside b
    _, est = feed(PassiveJudge(), [*phases, (2, [a(0.052, POOL), b])])
    assert est["a"].pace.why == "no step time read since the others run beside it"
    phases[-1] = (int(T.STRADDLE_S) + 1, phases[-1][1])
    v, est = feed(PassiveJudge(), [*phases, (2, [a(1.5, POOL), b])])
    e = est["a"]
    assert e.pace_used and e.slowdown == pytest.approx(1.5 / 0.045, abs=1e-3)
    assert e.pace.source == "steps"
    data = v.to_json()
    check(data, "verdict")
    p = data["evidence"]["own_pace"]["a"]
    assert p["source"] == "steps" and p["step_alone_readings"] == 2
    assert p["step_alone_s"] == pytest.approx(0.045) and p["step_now_s"] == 1.5
    assert any("its step time (py-spy) was 45 ms while it ran alone (2 readings) and 1500 ms"
               in line for line in v.evidence_lines)
    # a reading in its first SETTLE ticks is no reference (its start-up is not its pace)
    pace = T.OwnPace()
    for t in range(T.SETTLE):
        got = pace.update([job("c", 300, None, step_time_s=0.05)], float(t))
    got = pace.update([job("c", 300, None, step_time_s=0.2), b], 50.0)
    assert got["c"].slowdown is None and "no step time of it alone" in got["c"].why
    # with loader workers, their pace comes first
    pace = T.OwnPace()
    for t in range(T.SETTLE + O.REF_MIN):
        pace.update([job("d", 400, 0.4, step_time_s=0.05 + 0.001 * t)], float(t))
    for t in range(T.SETTLE_NO_WORKERS + O.NOW_MIN):  # (b has no loader workers)
        got = pace.update([job("d", 400, 0.1, step_time_s=0.3), b], 100.0 + t)
    assert got["d"].slowdown == pytest.approx(4.0) and got["d"].source == "loader"


def test_steps_too_long_for_py_spy_to_count_give_a_bound_not_a_slowdown():
    """The pair fell into the regime where each step takes 3.3 s (74x): py-spy's 8 s bursts
    count fewer than 4, so no step to divide; what they do say, steps over 1.6 s against 45 ms
    alone, is evidence of at least 36x, and the estimate stays the slowdown."""
    def a(step, over=None):
        return job("a", 100, None, f=0.05, step_time_s=step, step_time_over_s=over, cpu_pool=POOL)

    b = job("b", 200, None, cpu_pool=POOL)
    phases = [(T.SETTLE + 2, [a(None)]), (5, [a(0.045)]), (3, [a(0.3), b]),
              (3, [a(None, 1.6), b])]
    v, est = feed(PassiveJudge(), phases)
    e = est["a"]
    assert not e.pace_used and e.slowdown is not None and e.slowdown < 10
    assert e.pace.slowdown is None and e.pace.at_least == pytest.approx(35.6)
    data = v.to_json()
    check(data, "verdict")
    assert data["evidence"]["own_pace"]["a"]["at_least"] == pytest.approx(35.6)
    assert any("at least 36× slower by its own steps (a bound" in line
               for line in v.evidence_lines)
    # a step read again beside the others replaces the bound (its burst began after b came)
    phases[-1] = (int(T.STRADDLE_S) + 1, phases[-1][1])
    v, est = feed(PassiveJudge(), [*phases, (1, [a(0.9), b])])
    assert est["a"].pace.at_least is None and est["a"].pace.slowdown == pytest.approx(20.0)


def bound_without_an_estimate():
    """The regime above, but a's CPU wait unread on its last ticks (a hidden process): the
    live judge has no estimate of it, only its pace's bound."""
    def a(step, over=None, f=0.05):
        return job("a", 100, None, f=f, step_time_s=step, step_time_over_s=over, cpu_pool=POOL)

    b = job("b", 200, None, cpu_pool=POOL)
    phases = [(T.SETTLE + 2, [a(None)]), (5, [a(0.045)]), (3, [a(0.3), b]),
              (WINDOW, [a(None, 1.6, f=None), b])]
    return feed(PassiveJudge(), phases), phases[-1][1]


def test_a_bound_without_a_slowdown_is_the_rows_figure():
    """No estimate and no pace value, but a bound: the row carries it (`slowdown_at_least`,
    with what read it) where its slowdown stays null, and the table shows "≥36× pace"."""
    (v, est), jobs = bound_without_an_estimate()
    assert est["a"].slowdown is None and est["a"].pace.at_least == pytest.approx(35.6)
    rows = {j.name: j for j in annotate(jobs, est)}
    a = rows["a"]
    assert a.slowdown is None and a.slowdown_at_least == pytest.approx(35.6)
    assert (a.slowdown_source, a.slowdown_method, a.slowdown_reference) == (
        "own pace", "py-spy steps", "own readings")
    assert rows["b"].slowdown_at_least is None  # b has an estimate, no bound
    data = check(Snapshot(time=1.0, gpu_status="no-driver", host=TWO, jobs=tuple(rows.values()),
                          verdict=v.to_json()).to_json(), "snapshot")
    got = {j["name"]: j for j in data["jobs"]}["a"]
    assert (got["slowdown"], got["slowdown_at_least"], got["slowdown_method"]) == (
        None, 35.6, "py-spy steps")
    assert slowdown_text(a.slowdown, a.slowdown_source, a.slowdown_doubt,
                         a.slowdown_at_least) == "≥36× pace"
    assert slowdown_tone(a.slowdown, a.slowdown_at_least) == "bad"
    con = Console(width=160, record=True)  # --once's table
    con.print(jobs_table(Snapshot(time=1.0, gpu_status="no-driver", jobs=(a,))))
    assert "≥36× pace" in con.export_text()
    # the verdict's row carries it too, and its line and evidence say it
    vrow = {j["name"]: j for j in data["verdict"]["jobs"]}["a"]
    assert (vrow["slowdown"], vrow["slowdown_at_least"], vrow["slowdown_method"]) == (
        None, 35.6, "py-spy steps")
    assert "slowdown_at_least" not in {j["name"]: j for j in data["verdict"]["jobs"]}["b"]
    assert job_line(vrow).startswith("a: slowdown ≥36×, a bound by its own pace (its py-spy "
                                     "step times alone and now)")
    assert sum("at least 36× slower by its own steps" in line for line in v.evidence_lines) == 1
    # a row with a slowdown of its own (launch's) keeps it, and gets no bound
    launched = replace(jobs[0], slowdown=1.5, slowdown_source="measured")
    assert annotate([launched, jobs[1]], est)[0].slowdown_at_least is None


def test_the_bounds_words_and_tone():
    assert slowdown_text(None, "own pace", None, 1200.0) == "≥1200× pace"
    assert slowdown_text(None, "own pace", None, 1.64) == "≥1.6× pace"
    assert slowdown_text(None, None, None, None) == "–"
    assert slowdown_text(2.0, "own pace", None, 35.6) == "2.00× pace"  # a value comes first
    assert provenance_text(None, "own pace", "loop counter", "twin", 1200.0) == (
        "≥1200× pace · counter · twin")
    assert slowdown_tone(None, 1.05) is None  # at least 1.05×: not known to be good or bad
    assert slowdown_tone(None, 1.3) == "warn"


def test_a_step_reading_beside_the_others_ages_and_stops_pacing_when_stale():
    """Beside the other job, later bursts may read no step (too short, rates that disagree):
    the newest reading stands, its age in the evidence, and past STEP_STALE_S it paces the job
    no longer (the estimate is its slowdown again, with that reason)."""
    def a(step):
        return job("a", 100, None, f=0.05, step_time_s=step, cpu_pool=POOL)

    b = job("b", 200, None, cpu_pool=POOL)
    phases = [(T.SETTLE + 2, [a(None)]), (5, [a(0.05)]), (int(T.STRADDLE_S) + 1, [a(0.05), b]),
              (1, [a(0.5), b])]
    v, est = feed(PassiveJudge(), phases)
    assert est["a"].pace_used and est["a"].pace.steps.now_age_s == 0.0
    # 100 s more: the same reading (no burst read another), 100 s old, still its pace
    v, est = feed(PassiveJudge(), [*phases, (100, [a(0.5), b])])
    assert est["a"].pace_used and est["a"].slowdown == pytest.approx(10.0)
    assert est["a"].pace.steps.now_age_s == pytest.approx(100.0)
    data = v.to_json()
    check(data, "verdict")
    assert data["evidence"]["own_pace"]["a"]["step_now_age_s"] == pytest.approx(100.0)
    assert any("and 500 ms beside the others, read 100 s ago" in line for line in v.evidence_lines)
    # past STEP_STALE_S: no pace; the estimate again, and why
    v, est = feed(PassiveJudge(), [*phases, (int(O.STEP_STALE_S) + 2, [a(0.5), b])])
    assert not est["a"].pace_used and est["a"].pace.slowdown is None
    assert "read 242 s ago" in est["a"].pace.why and "not its pace now" in est["a"].pace.why
    check(v.to_json(), "verdict")


def test_a_copy_started_beside_its_twin_borrows_the_twins_pace_alone():
    """The usual order by hand: one copy alone, then a second of the same command (another
    output folder) in the same directory beside it. The second never ran alone, but it makes
    the same batches: its loader's pace is divided by the first's alone (`twin_pid`). Its own
    first SETTLE ticks (its workers' start-up, 5 cores here) are not its pace beside the
    others; a job whose command, directory or user differs borrows nothing."""
    cmd = dict(command="python main.py --workers 1 --outf o1", cwd="/runs/dcgan")
    a = lambda w, **kw: job("main.py", 100, w, cpu_pool=POOL, **(cmd | kw))  # noqa: E731
    b = lambda w: job("main.py (200)", 200, w, cpu_pool=POOL,  # noqa: E731
                      command="python main.py --workers 1 --outf o2", cwd="/runs/dcgan")
    other = lambda w: job("other.py", 300, w, cpu_pool=POOL, command="python other.py",  # noqa: E731
                          cwd="/runs/dcgan")
    there = lambda w: job("main.py (400)", 400, w, cpu_pool=POOL,  # noqa: E731
                          command=cmd["command"], cwd="/elsewhere")
    theirs = lambda w: job("main.py (500)", 500, w, cpu_pool=POOL, user="bo",  # noqa: E731
                           command=cmd["command"], cwd="/runs/dcgan")
    judge = PassiveJudge()
    feed(judge, [(T.SETTLE + O.REF_MIN, [a(0.40, f=0.05)])])
    t0 = T.SETTLE + O.REF_MIN
    v, est = feed(judge, [(T.SETTLE, [a(0.08), b(5.0), other(0.1), there(0.1), theirs(0.1)]),
                          (O.NOW_MIN, [a(0.08), b(0.10), other(0.1), there(0.1), theirs(0.1)])],
                  t0=t0)
    pb = est["main.py (200)"].pace
    assert pb.lender.pid == 100 and pb.slowdown == pytest.approx(4.0)  # 0.40 / 0.10: no 5 cores
    assert est["main.py (200)"].pace_used  # its pool spins: the pace is its slowdown
    assert est["main.py"].pace.lender is None and est["main.py"].pace.slowdown == pytest.approx(5.0)
    for name in ("other.py", "main.py (400)", "main.py (500)"):  # another user's: no twin
        assert est[name].pace.slowdown is None and "has not run alone" in est[name].pace.why
    data = check(v.to_json(), "verdict")
    rows = {j["name"]: j for j in data["jobs"]}  # where each slowdown comes from
    assert (rows["main.py (200)"]["slowdown_method"],
            rows["main.py (200)"]["slowdown_reference"]) == ("loader CPU", "twin")
    assert (rows["main.py"]["slowdown_method"],
            rows["main.py"]["slowdown_reference"]) == ("loader CPU", "own readings")
    assert data["evidence"]["own_pace"]["main.py (200)"]["twin_pid"] == 100
    assert data["evidence"]["own_pace"]["main.py (200)"]["twin_args"] == ["--outf"]
    assert data["evidence"]["own_pace"]["main.py"]["twin_pid"] is None
    assert any(line.startswith("main.py (200): its twin's (PID 100, the same command but for "
                               "--outf) loader "
                               "workers used 0.40 cores while it ran alone (10 readings) and its "
                               "own 0.10 beside the others: its own pace 4.00× slower")
               for line in v.evidence_lines)


def test_a_twins_reference_outlives_it_for_an_hour_and_an_own_one_wins():
    pace = T.OwnPace()
    cmd = dict(command="python train.py", cwd="/w")
    for t in range(T.SETTLE + O.REF_MIN):
        pace.update([job("train.py", 100, 0.4, **cmd)], float(t))
    t = 100.0  # the first copy ended; two copies started together later
    for i in range(T.SETTLE + O.NOW_MIN):
        got = pace.update([job("train.py (200)", 200, 0.2, **cmd),
                           job("train.py (300)", 300, 0.1, **cmd)], t + i)
    assert got["train.py (200)"].slowdown == pytest.approx(2.0)
    assert got["train.py (300)"].slowdown == pytest.approx(4.0)
    assert got["train.py (300)"].lender.pid == 100
    # an hour after the first copy's last tick alone, its reference is no longer lent
    late = T.SETTLE + O.REF_MIN - 1 + T.TWIN_MAX_AGE_S + 1
    got = pace.update([job("train.py (200)", 200, 0.2, **cmd), job("train.py (300)", 300, 0.1, **cmd)],
                      late)
    assert got["train.py (300)"].slowdown is None
    # a copy that ran alone itself keeps its own reference, not its twin's
    own = T.OwnPace()
    for t in range(T.SETTLE + O.REF_MIN):
        own.update([job("a", 100, 0.4, **cmd)], float(t))
    for t in range(T.SETTLE + O.REF_MIN):
        own.update([job("b", 200, 0.2, **cmd)], 100.0 + t)  # a ended; b alone at 0.2
    for t in range(T.SETTLE + O.NOW_MIN):
        got = own.update([job("b", 200, 0.1, **cmd), job("c", 300, 0.1)], 200.0 + t)
    assert got["b"].lender is None and got["b"].slowdown == pytest.approx(2.0)


def test_a_spinning_pools_estimate_without_a_pace_is_marked_as_doubtful():
    """b's pool spins and it has no pace (never alone, no twin): its slowdown is the CPU-wait
    estimate, which reads 0.08-1.40 of such jobs' truth. It is shown "est?" with the reason, in
    the verdict's row, the snapshot's row, the details' line; a's, its own pace, and a job whose
    pool sleeps, carry no doubt."""
    from gputop_dl.present.verdict_text import passive_line

    sleeping = ((0.5, 1.0), (0.5, 1.0))
    alone = [job("a", 100, 0.40, f=0.05, cpu_pool=((0.05, 1.0), (0.05, 1.0)))]
    both = [job("a", 100, 0.08, cpu_pool=POOL), job("b", 200, 0.08, cpu_pool=POOL),
            job("c", 300, 0.08, cpu_pool=sleeping, cpu_pool_yields=0.6)]
    v, est = feed(PassiveJudge(), [(T.SETTLE + O.REF_MIN, alone), (T.SETTLE + O.NOW_MIN, both)])
    assert est["b"].doubt and "spins" in est["b"].doubt
    assert est["a"].doubt is None and est["c"].doubt is None and est["c"].slowdown is not None
    rows = {j["name"]: j for j in check(v.to_json(), "verdict")["jobs"]}
    assert "spins" in rows["b"]["slowdown_doubt"] and "slowdown_doubt" not in rows["a"]
    assert "can be several times this" in passive_line(rows["b"])
    snap_rows = {j.name: j for j in annotate(both, est)}
    assert snap_rows["b"].slowdown_doubt == est["b"].doubt and snap_rows["c"].slowdown_doubt is None
    b = snap_rows["b"]
    assert slowdown_text(b.slowdown, b.slowdown_source, b.slowdown_doubt).endswith("× est?")
    assert slowdown_text(2.0, "estimated") == "2.00× est"
    assert slowdown_text(2.0, None, "x") == "2.00×"  # a mark only where there is a source


def test_a_slow_loaders_window_holds_eight_of_its_batches():
    """PyTorch's dcgan beside a copy of it: a batch every 6 ticks. 20 ticks held 3 or 4 of them
    and its pace moved ±30 % from tick to tick; the window goes back until it holds NOW_BUSY
    busy ticks (48 here), up to NOW_MAX. A loader busy every tick keeps NOW_TICKS."""
    slow = deque([0.1 if i % 6 == 0 else 0.0 for i in range(O.NOW_MAX)], maxlen=O.NOW_MAX)
    idle = O.MIN_CORES / 50
    got = O._recent(slow, idle)
    assert len(got) == 48 and sum(x > 0 for x in got) == O.NOW_BUSY  # back to the 8th batch
    assert len(O._recent(deque([0.1] * O.NOW_MAX), idle)) == O.NOW_TICKS
    assert len(O._recent(deque([0.0] * O.NOW_MAX), idle)) == O.NOW_MAX  # idle: all it has
    assert O._recent(deque([0.1] * 5), idle) == (0.1,) * 5
    # the pace over that window: one reading of 0.1 in 6 against 0.05 alone is 3.0×
    pace = T.OwnPace()
    for t in range(T.SETTLE + O.REF_MIN):
        pace.update([job("a", 100, 0.05)], float(t))
    for i in range(O.NOW_MAX):
        got = pace.update([job("a", 100, 0.1 if i % 6 == 0 else 0.0), job("b", 200, 0.1)],
                          100.0 + i)
    assert got["a"].loader.now_ticks == 48 and got["a"].slowdown == pytest.approx(3.0)


def test_batches_pace_a_job_whose_loader_takes_more_cpu_a_batch_beside_the_others():
    """PyTorch's dcgan beside a copy (the 2-core box): its worker spent 0.154 s of CPU a batch
    against 0.109 s alone, always 9 write calls a batch. Its loader's cores read 2.0× slower,
    its batches 2.9× (its own iterations: 2.88×). The write calls pace it, and the pace is its
    slowdown even where the CPU-wait estimate is within CONTRADICT of it (a count of its own
    batches over a model); the line says so."""
    a = lambda cores, writes, f=0.5: job("a", 100, cores, f=f,  # noqa: E731
                                         loader_writes_per_s=writes)
    b = job("b", 200, 0.1, loader_writes_per_s=1.0)
    judge = PassiveJudge()
    feed(judge, [(T.SETTLE + O.REF_MIN, [a(0.0417, 3.44, f=0.05)])])
    v, est = feed(judge, [(T.SETTLE + O.NOW_MIN, [a(0.0205, 1.20), b])], t0=100)
    p = est["a"].pace
    assert p.source == "batches" and p.slowdown == pytest.approx(3.44 / 1.20, rel=1e-3)
    assert p.loader.cores_alone == pytest.approx(0.0417)  # the cores' pace, 2.03x, is not used
    assert est["a"].pace_used and est["a"].slowdown == pytest.approx(2.867, rel=1e-3)
    data = check(v.to_json(), "verdict")["evidence"]["own_pace"]["a"]
    assert data["source"] == "batches" and data["loader_writes_alone"] == pytest.approx(3.44)
    assert data["loader_writes_now"] == pytest.approx(1.2)
    assert any(line.startswith("a: its loader workers handed over batches at 3.44 write calls "
                               "a second while it ran alone (10 readings) and at 1.20 beside "
                               "the others (a batch is a fixed number of them): its own pace "
                               "2.87× slower; its slowdown is this pace")
               for line in v.evidence_lines)


def test_without_write_calls_the_cores_pace_it_and_no_batch_says_so():
    """Another user's worker: /proc/PID/io is not readable, so no write calls: the cores pace
    it as before. A loader whose write calls stop beside the others handed no batch over: no
    pace by its cores either (they may be spent on a batch that never arrives)."""
    pace = T.OwnPace()
    for t in range(T.SETTLE + O.REF_MIN):
        pace.update([job("a", 100, 0.4)], float(t))
    for t in range(T.SETTLE + O.NOW_MIN):
        got = pace.update([job("a", 100, 0.1), job("b", 200, 0.1)], 50.0 + t)
    assert got["a"].source == "loader" and got["a"].slowdown == pytest.approx(4.0)
    pace = T.OwnPace()
    for t in range(T.SETTLE + O.REF_MIN):
        pace.update([job("c", 300, 0.4, loader_writes_per_s=9.0)], float(t))
    for t in range(T.SETTLE + O.NOW_MIN):
        got = pace.update([job("c", 300, 0.3, loader_writes_per_s=0.0), job("b", 200, 0.1)],
                          50.0 + t)
    assert got["c"].slowdown is None and got["c"].source == "batches"
    assert got["c"].why == "its loader handed its trainer no batch in the last readings"


def test_alone_again_its_earlier_slowdown_is_by_its_batches():
    pace = T.OwnPace()
    c = lambda cores, writes: job("c", 300, cores, loader_writes_per_s=writes)  # noqa: E731
    for t in range(T.SETTLE + O.REF_MIN):
        pace.update([c(0.4, 9.0)], float(t))
    for t in range(T.SETTLE + O.NOW_MIN):
        pace.update([c(0.3, 3.0), job("b", 200, 0.1)], 50.0 + t)
    for t in range(O.REF_MIN):
        got = pace.update([c(0.4, 9.0)], 100.0 + t)
    assert got["c"].earlier == pytest.approx(3.0)  # 9 / 3 write calls, not 0.4 / 0.3 cores
    assert got["c"].earlier_ago == pytest.approx(100.0 + O.REF_MIN - 1
                                                 - (50 + T.SETTLE + O.NOW_MIN - 1))


def test_a_twin_borrows_the_write_calls_alone_too():
    pace = T.OwnPace()
    cmd = dict(command="python main.py --outf o", cwd="/w")
    for t in range(T.SETTLE + O.REF_MIN):
        pace.update([job("main.py", 100, 0.04, loader_writes_per_s=3.4, **cmd)], float(t))
    for t in range(T.SETTLE + O.NOW_MIN):
        got = pace.update([job("main.py", 100, 0.02, loader_writes_per_s=1.2, **cmd),
                           job("main.py (200)", 200, 0.02, loader_writes_per_s=1.1, **cmd)],
                          50.0 + t)
    twin = got["main.py (200)"]
    assert twin.lender.pid == 100 and twin.source == "batches"
    assert twin.slowdown == pytest.approx(3.4 / 1.1, rel=1e-3)


def test_a_newcomers_start_up_counts_neither_as_alone_nor_as_beside():
    """Two copies of a GPU-bound script on an H200 (docs/validation.md): the first handed over
    25 batches a second alone and 11.7 beside the second (its own steps: 2.13x), but for the
    second's first 15 s (its CUDA context, its workers' spawn) it ran as fast as alone; a
    window of 20 ticks that held them read 1.43x. The second is under way once its loader's
    workers run (SETTLE ticks after it was seen at the earliest)."""
    pace = T.OwnPace()
    a = lambda w: job("a", 100, 0.05, loader_writes_per_s=w)  # noqa: E731
    b = lambda w: job("b", 200, 0.05 if w else None, loader_writes_per_s=w)  # noqa: E731
    for t in range(T.SETTLE + O.REF_MIN):
        pace.update([a(25.0)], float(t))
    for t in range(15):  # b's start-up: no worker yet
        got = pace.update([a(25.0), b(None)], 100.0 + t)
    assert got["a"].loader.now_ticks == 0 and got["a"].loader.alone_ticks == O.REF_MIN
    assert got["a"].why == O.STARTING
    for t in range(O.NOW_MIN):
        got = pace.update([a(11.7), b(11.7)], 200.0 + t)
    assert got["a"].source == "batches" and got["a"].slowdown == pytest.approx(25 / 11.7, rel=1e-3)
    # a job whose workers' write calls are not read is under way SETTLE ticks after it came,
    # one with no worker SETTLE_NO_WORKERS ticks (its workers come with its first batch)
    for c, settle in ((0.05, T.SETTLE), (None, T.SETTLE_NO_WORKERS)):
        pace = T.OwnPace()
        for t in range(T.SETTLE + O.REF_MIN):
            pace.update([a(25.0)], float(t))
        for t in range(settle + 1):
            got = pace.update([a(12.5), job("c", 300, c)], 100.0 + t)
        assert got["a"].loader.now_ticks == 1


def test_a_job_older_than_the_monitor_is_under_way_at_once():
    """Its process's age, where read, says whether it is starting: a monitor started beside a
    job that ran for an hour keeps its readings alone from its first tick."""
    pace = T.OwnPace()
    for t in range(O.REF_MIN):
        got = pace.update([job("a", 100, 0.4, elapsed_s=3600.0 + t)], float(t))
    assert got["a"].loader.alone_ticks == O.REF_MIN
    young = T.OwnPace()
    for t in range(O.REF_MIN):
        got = young.update([job("a", 100, 0.4, elapsed_s=1.0 + t)], float(t))
    assert got["a"].loader.alone_ticks == 0  # its first SETTLE seconds are its start-up


def test_a_job_without_loader_workers_is_paced_by_its_own_loop_counter():
    """PyTorch's mnist on the CPU has no loader workers: py-spy's dumps read its `batch_idx`.
    Alone it counted 10 steps a second; beside a second copy 2.5: 4x by its own count, its
    slowdown (the CPU-wait estimate read 2x). A pair of dumps across the change counts for
    neither side; one whose counter did not move over 2 minutes gives a bound."""
    name = "main.py:train:batch_idx"

    def a(steps, span, at, pool=((0.05, 1.0), (0.05, 1.0))):
        return job("a", 100, None, f=0.05, cpu_pool=pool, loop_counter=name, loop_steps=steps,
                   loop_span_s=span, loop_read_t=at)

    b = job("b", 200, None, cpu_pool=POOL, elapsed_s=600.0)  # under way at once
    phases = [(T.SETTLE_NO_WORKERS + 1, [a(0, 0.0, 0.0)])]
    # alone: a dump every 10 s, 100 steps each (ticks of 10 s; readings at 40, 50, 60 s)
    phases += [(10, [a(100 * k, 10.0 * k, 30.0 + 10 * k)]) for k in range(1, 4)]
    v, est = feed(PassiveJudge(), phases)
    assert est["a"].pace.why == "it runs alone"
    # b comes at t = 61: the pair of dumps at 60 and 70 s began before that, so it counts for
    # neither side (nor did 0 -> 40 s alone, which began in a's start-up)
    beside = [(10, [a(300 + 25 * k, 30.0 + 10 * k, 60.0 + 10 * k, POOL), b]) for k in range(1, 3)]
    v, est = feed(PassiveJudge(), [*phases, *beside])
    e = est["a"]
    assert e.pace.source == "counter" and e.pace.slowdown is None
    assert e.pace.why == "10 of 20 s of its loop counter beside the others"
    beside.append((1, [a(375, 60.0, 90.0, POOL), b]))
    v, est = feed(PassiveJudge(), [*phases, *beside])
    e = est["a"]
    assert e.pace_used and e.slowdown == pytest.approx(4.0) and e.pace.source == "counter"
    data = v.to_json()
    check(data, "verdict")
    p = data["evidence"]["own_pace"]["a"]
    assert (p["loop_counter"], p["loop_rate_alone"], p["loop_rate_now"]) == (name, 10.0, 2.5)
    assert (p["loop_alone_s"], p["loop_now_s"]) == (20.0, 20.0)  # 40->50->60 s; 70->80->90 s
    assert any(f"its own loop counter ({name}, read by py-spy) moved 10.00 a second while it "
               "ran alone (20 s) and 2.50 beside the others (its last 20 s): its own pace "
               "4.00× slower" in line for line in v.evidence_lines)
    # its counter stands still for 2 minutes beside b: a bound (10 a second alone x 120 s)
    still = [(10, [a(375, 60.0 + 10 * k, 90.0 + 10 * k, POOL), b]) for k in range(1, 13)]
    v, est = feed(PassiveJudge(), [*phases, *beside, *still])
    e = est["a"]
    assert e.pace.slowdown is None and e.pace.at_least == pytest.approx(1200.0)
    assert any("did not move in 120 s beside the others" in line and "at least 1200×" in line
               for line in v.evidence_lines)
    # a job with loader workers keeps their pace first
    pace = T.OwnPace()
    for t in range(T.SETTLE + O.REF_MIN):
        pace.update([job("d", 400, 0.4, loop_counter=name, loop_steps=10 * t,
                         loop_span_s=float(t), loop_read_t=float(t))], float(t))
    for t in range(O.NOW_MIN):
        got = pace.update([job("d", 400, 0.1, loop_counter=name, loop_steps=200 + t,
                               loop_span_s=20.0 + t, loop_read_t=100.0 + t), b], 100.0 + t)
    assert got["d"].source == "loader" and got["d"].slowdown == pytest.approx(4.0)
