"""Step phases: mean seconds per step by phase, the input-bound class, per-rank rows, the straggler.

Pure functions over step events (docs/phases.md): each event has `t_step`, `t_data` and, when
the phases were measured, `ph` = {h2d, forward, backward, optimizer} in seconds (a phase never
seen in a step is absent). `data` is `t_data`; `other` is the rest of the step.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypedDict

from gputop_dl.analyse.stats.jobstats import StepEvent
from gputop_dl.analyse.verdict_types import Verdict
from gputop_dl.step_phases import RankPhases, StepPhases, Straggler

if TYPE_CHECKING:
    from gputop_dl.analyse.recorded.evidence import JobSeries

PARTS = ("data", "h2d", "forward", "backward", "optimizer", "other")
MEASURED = ("h2d", "forward", "backward", "optimizer")  # what the phase clock times
OWN_WORK = ("data", "h2d", "forward")  # a rank's own work before the all-reduce in backward
CAUSES = ("data", "h2d", "forward", "backward")
MIN_STEPS = 20  # fewer steps: no class, no straggler (a few slow first steps would decide it)
INPUT_BOUND = 0.20  # data >= 20 % of the step: input-bound (TraceML's threshold)
STRAGGLER_MIN_S = 0.002  # a rank must be this much later than the others' median, and
STRAGGLER_MIN_FRAC = 0.05  # this share of the median step, to be named

# mean seconds per step by phase, `{data_s, h2d_s, forward_s, backward_s, optimizer_s, other_s}`
# (keys built from PARTS, so a plain map); None: the phase was not seen
PhaseMeans = dict[str, float | None]


class RankRow(TypedDict):
    """One rank's row for find_straggler: its median step, step count and phases."""

    rank: int
    step_time_s: float
    steps: int
    phases: PhaseMeans | None


class RankJson(TypedDict):
    """One rank of a distributed job as the session JSON has it (`jobs[].ranks[]`)."""

    rank: int
    step_time_s: float | None
    phases: PhaseMeans | None


class StragglerJson(TypedDict):
    """The late rank of a distributed job as the session JSON has it (`jobs[].straggler`)."""

    rank: int
    cause: str
    excess_s: float


def mean_phases(steps: Sequence[StepEvent]) -> PhaseMeans | None:
    """`{data_s, h2d_s, forward_s, backward_s, optimizer_s, other_s}`: mean seconds per step
    over the steps that carry phases; a phase seen in none of them is None; other_s is the
    mean step minus the rest, at least 0 (CUDA-event times can overlap the host's data wait).
    None when no step carries phases."""
    usable = [s for s in steps if isinstance(s.get("ph"), dict) and s.get("t_step") is not None]
    if not usable:
        return None
    n = len(usable)
    out: dict[str, float | None] = {"data_s": sum(s.get("t_data") or 0.0 for s in usable) / n}
    for p in MEASURED:
        vals = [s["ph"].get(p) for s in usable]
        out[f"{p}_s"] = (sum(v or 0.0 for v in vals) / n) if any(v is not None for v in vals) else None
    step = sum(s["t_step"] for s in usable) / n
    out["other_s"] = max(0.0, step - sum(v for v in out.values() if v is not None))
    return {f"{p}_s": out[f"{p}_s"] for p in PARTS}


def solo_phases(steps: Sequence[StepEvent]) -> dict[str, float | None] | None:
    """A baseline's `solo_phases`: mean_phases of its steps after warm-up, with their count."""
    ph = mean_phases(steps)
    if ph is None:
        return None
    return dict(ph, steps=sum(1 for s in steps if isinstance(s.get("ph"), dict)))


def step_of(phases: Mapping[str, Any] | None) -> float | None:
    """The mean step the parts add up to (None without phases)."""
    if not phases:
        return None
    return sum(phases.get(f"{p}_s") or 0.0 for p in PARTS)


def phase_class(phases: Mapping[str, Any] | None, steps: int) -> str | None:
    """"input-bound" when data is >= 20 % of the step, "compute-bound" otherwise; None (no
    class) below MIN_STEPS steps or without phases."""
    total = step_of(phases)
    if not total or phases is None or steps < MIN_STEPS or phases.get("data_s") is None:
        return None
    return "input-bound" if phases["data_s"] >= INPUT_BOUND * total - 1e-12 else "compute-bound"


def phase_growth(solo: Mapping[str, Any] | None, now: Mapping[str, Any] | None) -> list[tuple[str, float]]:
    """(phase, seconds per step now minus solo), largest growth first; only the phases known
    in both."""
    if not solo or not now:
        return []
    out = [(p, now[f"{p}_s"] - solo[f"{p}_s"]) for p in PARTS
           if now.get(f"{p}_s") is not None and solo.get(f"{p}_s") is not None]
    return sorted(out, key=lambda x: -x[1])


def _ms(s: float) -> str:
    v = s * 1000
    return f"{v:+.0f} ms" if abs(v) >= 10 else f"{v:+.1f} ms"


def phase_evidence(name: str, solo: Mapping[str, Any] | None,
                   now: Mapping[str, Any] | None) -> str | None:
    """The verdict's line naming the phase that grew most, e.g. "bs64: data +410 ms/step,
    forward +2 ms"; None without phases on both sides."""
    grown = phase_growth(solo, now)
    if not grown:
        return None
    (p0, d0), rest = grown[0], [g for g in grown[1:2] if abs(g[1]) >= 0.00005]  # not "+0.0"
    return f"{name}: {p0} {_ms(d0)}/step" + "".join(f", {p} {_ms(d)}" for p, d in rest)


def rank_rows(by_rank: Mapping[int, Sequence[StepEvent]]) -> list[RankRow]:
    """`[{rank, step_time_s, steps, phases}]` per rank, in rank order (median step time)."""
    rows: list[RankRow] = []
    for rank in sorted(by_rank):
        steps = [s for s in by_rank[rank] if s.get("t_step") is not None]
        if not steps:
            continue
        rows.append({"rank": rank, "step_time_s": statistics.median(s["t_step"] for s in steps),
                     "steps": len(steps), "phases": mean_phases(steps)})
    return rows


def _own(phases: Mapping[str, float | None]) -> float:
    return sum(phases.get(f"{p}_s") or 0.0 for p in OWN_WORK)


def find_straggler(rows: Sequence[RankRow]) -> StragglerJson | None:
    """`{rank, cause, excess_s}` of the late rank, or None.

    The all-reduce in backward equalises every rank's step: the fast ranks' backward absorbs
    the wait. So the late rank is the one whose own work before it (data + h2d + forward) is
    largest; `excess_s` is how much larger than the other ranks' median; `cause` is the phase
    (data, h2d, forward or backward) that exceeds the others' median most. None with fewer than
    two ranks with phases and MIN_STEPS steps, or when no rank is late by more than
    max(STRAGGLER_MIN_S, STRAGGLER_MIN_FRAC x the median step)."""
    usable = [(r, r["phases"]) for r in rows if r["phases"] and r["steps"] >= MIN_STEPS]
    if len(usable) < 2:
        return None
    late, late_ph = max(usable, key=lambda rp: _own(rp[1]))
    others = [ph for r, ph in usable if r is not late]
    excess = _own(late_ph) - statistics.median(_own(ph) for ph in others)
    step = statistics.median(r["step_time_s"] for r, _ in usable)
    if excess < max(STRAGGLER_MIN_S, STRAGGLER_MIN_FRAC * step):
        return None

    def over(p: str) -> float:
        mine = late_ph.get(f"{p}_s")
        theirs = [v for v in (ph.get(f"{p}_s") for ph in others) if v is not None]
        return -1.0 if mine is None or not theirs else mine - statistics.median(theirs)

    cause = max(CAUSES, key=over)
    return {"rank": late["rank"], "cause": cause, "excess_s": round(excess, 6)}


# --- the live values a JobSample carries (step_phases.StepPhases, RankPhases, Straggler) ----
LIVE_STEPS = 200  # the live view: the latest steps after warm-up


def as_step_phases(phases: Mapping[str, Any] | None, steps: int,
                   solo: Mapping[str, Any] | None = None) -> StepPhases | None:
    """A `phases` dict as step_phases.StepPhases, with its class and the solo baseline's."""
    if not phases:
        return None
    return StepPhases(**{f"{p}_s": phases.get(f"{p}_s") for p in PARTS}, steps=steps, cls=phase_class(phases, steps),
                      solo=as_step_phases(solo, (solo or {}).get("steps", 0)) if solo else None)


def _latest(steps: Sequence[StepEvent], warmup: int) -> Sequence[StepEvent]:
    """The latest LIVE_STEPS steps after the first `warmup` (no copy of a long list)."""
    return steps[max(warmup, len(steps) - LIVE_STEPS):]


def live_phases(steps: Sequence[StepEvent], warmup: int,
                solo: Mapping[str, Any] | None = None) -> StepPhases | None:
    """The job's phases over its latest LIVE_STEPS steps after warm-up (None without any)."""
    recent = [s for s in _latest(steps, warmup) if isinstance(s.get("ph"), dict)]
    return as_step_phases(mean_phases(recent), len(recent), solo)


def live_ranks(by_rank: Mapping[int, Sequence[StepEvent]], warmup: int
               ) -> tuple[tuple[RankPhases, ...], Straggler | None]:
    """(ranks, straggler) for a JobSample: each rank's latest steps after warm-up."""
    if len(by_rank) < 2:
        return (), None
    rows = rank_rows({r: _latest(s, warmup) for r, s in by_rank.items()})
    ranks = tuple(RankPhases(r["rank"], r["step_time_s"], as_step_phases(r["phases"], r["steps"]))
                  for r in rows)
    st = find_straggler(rows)
    return ranks, Straggler(**st) if st else None


def add_phase_evidence(verdict: Verdict, jobs: list[JobSeries], now: float) -> Verdict:
    """The verdict with the step phases' evidence (its own block, beside the verdict rules): per
    job its co-run phases over the overlap window (`evidence["phases"]`) and a line naming
    the phase that grew most against its solo baseline. `jobs`: analyse.recorded.evidence.JobSeries."""
    from gputop_dl.analyse.recorded.evidence import overlap_window

    win = overlap_window(jobs, now)
    if win is None:
        return verdict
    per_job, lines = {}, []
    for j in jobs:
        steps = [s for s in j.steps if win[0] < s["t"] <= win[1]]
        now_ph = mean_phases(steps)
        if now_ph is None:
            continue
        solo = (j.solo or {}).get("solo_phases")
        per_job[j.name] = {"phases": now_ph, "growth": dict(phase_growth(solo, now_ph)) or None,
                           "class": phase_class(now_ph, len(steps))}
        line = phase_evidence(j.name, solo, now_ph)
        if line:
            lines.append(line)
    if per_job:
        return verdict.with_evidence(phases=per_job).with_lines(*lines)
    return verdict


def ranks_json(ranks: Sequence[RankPhases], straggler: Straggler | None
               ) -> tuple[list[RankJson] | None, StragglerJson | None]:
    """A JobSample's `ranks` and `straggler` as the session JSON has them: `[{rank,
    step_time_s, phases}]` (None for a job that is not distributed) and `{rank, cause,
    excess_s}` or None."""
    rows: list[RankJson] = [{"rank": r.rank, "step_time_s": r.step_time_s,
             "phases": {f"{p}_s": r.phases.parts()[p] for p in PARTS} if r.phases else None}
            for r in ranks]
    st: StragglerJson | None = ({"rank": straggler.rank, "cause": straggler.cause, "excess_s": straggler.excess_s}
          if straggler is not None else None)
    return rows or None, st
