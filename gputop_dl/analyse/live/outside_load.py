"""Load from outside the jobs as a cause: who takes the cores the jobs wait for, and its cost.

The live judge (analyse/live/passive.py) splits each job's CPU wait between the other jobs and
everything else (`set_share`, analyse/live/cpu_wait_model.py). The part behind everything else is
what processes that are not judged jobs cost it: without them, the other jobs still beside it,
its critical path would run `outside` times faster, the CPU-wait model on that part of its wait
only (analyse/live/job_estimate.py). Here: the busiest of those processes over the judge's
window (collect/proc/busiest.py, read only while a job waits), the `outside-load` verdict when they
and not the jobs slow the jobs, and the clause and fixes a jobs' own verdict gets when both do.
How the split is made: docs/verdict.md. And the probe's side (engine/diagnose_plan.py): a job
timed "alone" with the other jobs paused still shares the box with them; `solo_outside` is
what they cost its solo window, and a probe that finds the jobs at their solo speed while that
window was not alone says `outside-load`, not parallel (`probe_verdict`). The solo baselines
measured before a launch's co-run (`baseline = "measure"`) are read the same way (`by =
"baseline"`): outside load during a job's solo run makes its solo figure slow and its slowdown
too small.
"""

from __future__ import annotations

from collections import deque
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any, Collection, NotRequired, Sequence, TypedDict, cast

from gputop_dl.analyse.live.cpu_wait_model import clip_wait, cpu_speedup, demand, spins
from gputop_dl.analyse.thresholds import SLOW
from gputop_dl.analyse.verdict_types import Evidence, JobVerdict, Verdict
from gputop_dl.snapshot import NAMED_MIN_CORES as NAMED_CORES, ProcLoad

if TYPE_CHECKING:
    from gputop_dl.analyse.live.job_estimate import Estimate

TOP = 3  # consumers named
COMMAND_CHARS = 60  # a consumer's command line as shown


@dataclass
class OutsideWindow:
    """The processes outside the judged jobs over the judge's last ticks."""

    window: int = 5
    _seen: deque[tuple[ProcLoad, ...]] = field(default_factory=deque)

    def add(self, procs: tuple[ProcLoad, ...] | None) -> None:
        """One tick's busiest processes that are not the jobs' (None: not read this tick)."""
        if procs is not None:
            self._seen.append(procs)
            while len(self._seen) > self.window:
                self._seen.popleft()

    def clear(self) -> None:
        self._seen.clear()

    @property
    def readings(self) -> int:
        """The ticks of the window that read the busiest processes."""
        return len(self._seen)

    def consumers(self, top: int = TOP) -> tuple[ProcLoad, ...] | None:
        """The busiest, by mean cores over the ticks that read them (a process absent from a
        reading counts 0 there), each NAMED_CORES or more on that mean (a process busy in one
        tick of the window, gputop-dl's own start, is not named); None when no tick of the
        window read them."""
        if not self._seen:
            return None
        cores: dict[int, float] = {}
        last: dict[int, ProcLoad] = {}
        for procs in self._seen:
            for p in procs:
                cores[p.pid] = cores.get(p.pid, 0.0) + p.cores
                last[p.pid] = p
        n = len(self._seen)
        best = [pid for pid in sorted(cores, key=lambda pid: -cores[pid])[:top]
                if cores[pid] / n >= NAMED_CORES]
        return tuple(replace(last[pid], cores=round(cores[pid] / n, 2)) for pid in best)

    def cores(self) -> float | None:
        """The mean cores all of them used together (None: not read)."""
        if not self._seen:
            return None
        return round(sum(sum(p.cores for p in procs) for procs in self._seen) / len(self._seen), 2)


def slowed(judged: Sequence[Estimate]) -> list[Estimate]:
    """The jobs the load from outside them slows by more than SLOW."""
    return [e for e in judged if e.outside is not None and e.outside > SLOW]


def _command(p: ProcLoad) -> str:
    cmd = " ".join((p.command or "?").split())  # one line: a `-c` script's newlines as spaces
    return cmd if len(cmd) <= COMMAND_CHARS else cmd[:COMMAND_CHARS - 1] + "…"


def _priority(p: ProcLoad) -> str:
    """", nice 19", ", idle class" (SCHED_IDLE), then ", session nice 19" where its session's
    autogroup is niced; "" for the usual class at nice 0 or unknown."""
    session = f", session nice {p.autogroup_nice}" if p.autogroup_nice else ""
    if p.policy == "idle":
        return ", idle class" + session
    out = f", nice {p.nice}" if p.nice else ""
    return out + (f", {p.policy} class" if p.policy not in (None, "other") else "") + session


def named(consumers: Sequence[ProcLoad] | None) -> str:
    """The consumers in words: `python3 -c '…' (PID 4242, user ana, nice 19, 1.00 cores)`."""
    if consumers is None:
        return "processes not named yet (read from the second tick a job waits)"
    if not consumers:
        return f"no single process of {NAMED_CORES:g} cores or more (many small ones)"
    return ", ".join(f"{_command(p)} (PID {p.pid}, user {p.user or '?'}{_priority(p)}, "
                     f"{p.cores:.2f} cores)" for p in consumers)


class Consumer(TypedDict):
    """A process beside the jobs, as `ProcLoad`'s fields, in a verdict's or a window's JSON
    (stored with a solo baseline: one stored before a field was added lacks it)."""

    pid: int
    user: str | None
    command: str | None
    cores: float
    nice: NotRequired[int | None]
    policy: NotRequired[str | None]
    autogroup: NotRequired[str | None]
    autogroup_nice: NotRequired[int | None]


def consumer_json(p: ProcLoad) -> Consumer:
    """A consumer in a verdict's or a window's JSON: every field of its `ProcLoad`."""
    return cast(Consumer, asdict(p))


def costs(out: Sequence[Estimate]) -> str:
    """Each slowed job's estimated slowdown from the outside load."""
    return ", ".join(f"{e.name} {e.outside or 1:.2f}×" for e in out)


def doubts(out: Sequence[Estimate]) -> str:
    """"; ..." for the slowed jobs whose intra-op pools spin: their figures can be several times
    too low (18-28× read 3.6-3.8×: docs/validation.md); "" for none."""
    spun = [e.name for e in out if spins(e.last.pool, e.last.pool_slice_ms, e.last.pool_yields)]
    if not spun:
        return ""
    pools = "its intra-op pool spins" if len(spun) == 1 else "their intra-op pools spin"
    return f"; {', '.join(spun)}: {pools}, so the true figure can be several times this"


def clause(out: Sequence[Estimate], consumers: Sequence[ProcLoad] | None) -> str:
    """The line a jobs' own verdict adds when outside load slows them too."""
    return (f"load from outside the jobs takes cores too: {named(consumers)}; without it "
            f"{costs(out)} faster{doubts(out)}")


def job_groups(judged: Sequence[Estimate]) -> frozenset[str]:
    """The autogroups the judged jobs are scheduled in (collect/proc/autogroup.py)."""
    return frozenset(g for e in judged if (g := e.last.autogroup) is not None)


def fixes(consumers: Sequence[ProcLoad] | None, cpus: int,
          groups: Collection[str] = ()) -> tuple[str, ...]:
    """What to do about it, naming the busiest consumer where known. Where the pass found no
    single process worth naming (many small ones), no command with a PID to fill in: how to
    find them instead. `groups`: the jobs' autogroups, where read: a consumer in another one
    competes as its whole session, so its session's nice value is the lever, not its own."""
    move = "move the job to a machine (or GPU node) with idle cores"
    if consumers is not None and not consumers:
        return ("find what takes the cores, spread over many small processes (none used "
                f"{NAMED_CORES:g} cores or more): `ps -eo pid,user,pcpu,args --sort=-pcpu | head`; "
                "put them in the idle class with `chrt -a --idle -p 0 PID` (those in another "
                "session than the jobs, where autogroups are on: `echo 19 > /proc/PID/autogroup`), "
                "or give the jobs cores of their own (a cpuset per job: `systemd-run --scope -p "
                "AllowedCPUs=...`)", move)
    top = consumers[0] if consumers else None
    pid = str(top.pid) if top else "PID"
    who = f" (user {top.user})" if top and top.user else ""
    half = max(1, cpus // 2)
    cores = (f"keep the jobs and the outside work on separate cores: `taskset -a -cp 0-{half - 1} "
             f"{pid}` for it and the other cores for the jobs, or a cpuset per job "
             "(`systemd-run --scope -p AllowedCPUs=...`, a container's `--cpuset-cpus`)")
    if top is not None and top.autogroup is not None and top.autogroup not in groups:
        session = (f"lower the outside process's session: `echo 19 > /proc/{pid}/autogroup`{who}, "
                   "or ask its owner to (only root raises it back): with autogroups on, a "
                   "process in another session than the job's competes as its whole session, "
                   "and its own nice value and class count only inside it")
        if not groups:  # the jobs' sessions unknown: the fix for one in the job's own too
            session += f"; in the job's own session, `chrt -a --idle -p 0 {pid}` instead"
        return session, cores, move
    if top is not None and top.policy == "idle":  # its priority is as low as it goes
        return (f"the outside process {pid}{who} already runs in the idle class and still takes "
                "the jobs' time: where it sits in another cgroup, that cgroup's CPU weight "
                "counts before a process's class; give the jobs' cgroup more weight "
                "(`systemd-run -p CPUWeight=...`, `cpu.weight`) or the other's less", cores, move)
    milder = "" if top is not None and top.nice == 19 else (
        f" (`renice -n 19 -p {pid}` takes off less: a nice-19 process still takes the cores "
        "a job's threads wake up to)")
    return (f"put the outside process in the idle class, where it runs only on cores nothing "
            f"else wants: `chrt -a --idle -p 0 {pid}`{who}{milder}, or ask its owner to (only "
            "root raises it back)", cores, move)


def evidence(est: Sequence[Estimate], win: OutsideWindow) -> Evidence:
    """The verdict's `outside_load` evidence (contract: docs/contracts.md)."""
    consumers = win.consumers()
    return {"consumers": None if consumers is None else [consumer_json(p) for p in consumers],
            "cores": win.cores(), "readings": win.readings,
            "share": {e.name: round(1.0 - e.last.set_share, 3) for e in est},
            "slowdowns": {e.name: e.outside for e in est}}


def job_row(e: Estimate, row: JobVerdict) -> JobVerdict:
    """A job's verdict row with its outside slowdown, where estimated."""
    return row if e.outside is None else row.replace(outside_slowdown=e.outside)


def outside_verdict(judged: Sequence[Estimate], out: Sequence[Estimate],
                    consumers: Sequence[ProcLoad] | None, cpus: int, evidence: Evidence,
                    lines: Sequence[str], rows: tuple[JobVerdict, ...]) -> Verdict:
    """`outside-load`: the jobs do not slow each other, processes outside them do."""
    conf = max(e.outside_confidence or 0.0 for e in out)
    who = named(consumers)
    return Verdict(kind="outside-load", confidence=conf, evidence=evidence,
                   evidence_lines=tuple(lines), jobs=rows,
                   recommendations=fixes(consumers, cpus, job_groups(judged)),
                   reason=f"the jobs wait for a CPU mostly behind processes that are not training "
                          f"jobs: {who}; without them {costs(out)} faster{doubts(out)} (each "
                          f"other: at most {max(e.slowdown or 1.0 for e in judged):.2f}×; "
                          "estimated live, nothing paused)")



def solo_outside(wait: float | None, cores: float | None, outside_cores: float | None,
                 cpus: int, stall: float | None = None) -> float | None:
    """How much faster a job's solo window (the other jobs paused) would have run without the
    processes outside the jobs (>= 1; None: its wait unknown). Its threads' demand beyond the
    cores allowed is its own wait, there on an idle box too; the rest of its wait is put down
    to the processes outside it, in proportion to the cores they were seen to use (all of it
    where its threads fit the cores). `stall`: a GPU job's data stall alone (only that wait
    can shrink), None on the CPU."""
    if wait is None:
        return None
    own = max(0.0, (demand(wait, cores) or 0.0) - cpus)
    out = outside_cores or 0.0
    share = 1.0 if own == 0 else out / (out + own)
    s = cpu_speedup(wait, cores, cpus, share) or 1.0
    if stall is not None:
        s = min(s, 1.0 / (1.0 - clip_wait(stall)))
    return round(max(1.0, s), 3)


# who timed the jobs alone: the in-situ probe (the other jobs paused) or the solo baselines
# measured before the co-run (`baseline = "measure"` / `"cache"`): the words and evidence key
BY = {"probe": ("probe", "solo window", "the probe", "probe_outside"),
      "baseline": ("solo baseline", "solo run", "the solo baselines", "baseline_outside")}


def solo_line(name: str, step_s: float | None, s_out: float, wait: float | None,
              consumers: Sequence[ProcLoad] | None, slowdown: float | None,
              by: str = "probe") -> str:
    """The evidence line of a solo window that was not alone."""
    who, window, _, _ = BY[by]
    step = f"its solo step {step_s:.3f} s is" if step_s else "its solo figures are"
    vs = (f"; its slowdown {slowdown:.2f}× is against that {window}, about "
          f"{slowdown * s_out:.2f}× against an idle box" if slowdown else "")
    return (f"{who}: {name} was not alone in its {window}: it waited {wait or 0:.0%} of its "
            f"runnable time for a CPU behind processes outside the jobs ({named(consumers)}); "
            f"{step} about {s_out:.2f}× what it would be on an idle box{vs}")


def probe_verdict(v: Verdict, slowed: Sequence[tuple[str, float]],
                  consumers: Sequence[ProcLoad] | None, cpus: int, by: str = "probe") -> Verdict:
    """The probe's verdict when load from outside the jobs slowed their solo windows by more
    than SLOW (`slowed`: name, solo_outside): `outside-load` where the probe found the jobs at
    their solo speed (`parallel`); else the jobs' own verdict, the outside load said after it."""
    if not slowed or v.kind == "outside-load":
        return v
    _, window, timed, _ = BY[by]
    costs_ = ", ".join(f"{n} {s:.2f}×" for n, s in slowed)
    if v.kind != "parallel":
        return v.replace(reason=f"{v.reason}; even alone the jobs waited for a CPU behind "
                                f"processes outside them: {named(consumers)}; without them "
                                f"their {window}s {costs_} faster",
                         recommendations=v.recommendations + fixes(consumers, cpus))
    return v.replace(kind="outside-load", title="",
                     recommendations=fixes(consumers, cpus),
                     reason=f"the jobs do not slow each other ({timed}: each at about its solo "
                            f"speed), but even alone they wait for a CPU behind processes that "
                            f"are not training jobs: {named(consumers)}; without them {costs_} "
                            f"faster (their {window}s)")


@dataclass(frozen=True)
class SoloWindow:
    """What ran beside one job's probe window (collect/jobs/solo_window.py reads it): its threads'
    run-queue wait share and cores over the window, the busiest processes that were not jobs
    (None: not read), its solo step time, and, for a GPU job, its data stall alone (only that
    wait can shrink; None on the CPU)."""

    name: str
    seconds: float
    wait: float | None
    cores: float | None
    outside: tuple[ProcLoad, ...] | None
    step_s: float | None = None
    stall: float | None = None


def window_json(w: SoloWindow, cpus: int) -> dict[str, Any]:
    """A probe window's `solo_outside` in the JSON: the window, what ran beside the job and how
    much faster it would have run on an idle box (`slowdown`, null: its wait unknown)."""
    cores = None if w.outside is None else round(sum(p.cores for p in w.outside), 2)
    return {"seconds": w.seconds, "wait": w.wait, "cores": w.cores, "outside_cores": cores,
            "consumers": None if w.outside is None else [consumer_json(p) for p in w.outside[:TOP]],
            "slowdown": solo_outside(w.wait, w.cores, cores, cpus, w.stall)}


def not_alone(v: Verdict, windows: Sequence[SoloWindow], cpus: int, by: str = "probe") -> Verdict:
    """The probe's verdict once its solo windows are known: each window that the load outside
    the jobs slowed by more than SLOW gets a line (its figure, and the job's slowdown against
    an idle box), the windows go in the evidence (`probe_outside`; `baseline_outside` for the
    solo baselines, `by = "baseline"`), and `probe_verdict` names the outside load
    (`outside-load` where the jobs ran at about their solo speed). The baselines ran before the
    co-run, whose own outside load is judged live: for them the kind stays, with a fix."""
    slowed: list[tuple[str, float]] = []
    consumers: Sequence[ProcLoad] | None = None
    win: dict[str, dict[str, Any]] = {}
    for w in windows:
        out = win[w.name] = window_json(w, cpus)
        s = out["slowdown"]
        if s is None or s <= SLOW:
            continue
        slowed.append((w.name, s))
        top = w.outside[:TOP] if w.outside is not None else None
        consumers = consumers or top
        probed = next((r.slowdown for r in v.jobs if r.name == w.name), None)
        v = v.with_lines(solo_line(w.name, w.step_s, s, w.wait, top, probed, by))
    if win:
        v = v.with_evidence(**{BY[by][3]: win})
    if by == "probe":
        return probe_verdict(v, slowed, consumers, cpus, by)
    if not slowed:  # the baselines ran before the co-run: the load may have gone since
        return v
    return v.replace(recommendations=v.recommendations + (
        "measure the solo baselines again on a quieter box (baseline = \"measure\"): "
        f"{', '.join(n for n, _ in slowed)} shared the CPU with {named(consumers)} while "
        f"timed alone, so {'its slowdown' if len(slowed) == 1 else 'their slowdowns'} here "
        f"{'is' if len(slowed) == 1 else 'are'} too small",))
