"""A job's pace as the live verdict's JSON carries it: its `evidence.own_pace` entry.

The meters and what they compare are analyse/slowdown/pace.py; this module lays a `Pace` out
flat for the verdict's evidence (`PaceEvidence`, schemas/verdict.json), the shape recorded
verdicts have had since before `Pace` was split by meter. Its evidence lines in words:
analyse/slowdown/pace_words.py.
"""

from __future__ import annotations

from typing import TypedDict

from gputop_dl.analyse.slowdown.pace import Pace, PaceSource


class PaceEvidence(TypedDict):
    """One job's entry of the live verdict's `evidence.own_pace` (schemas/verdict.json)."""

    slowdown: float | None
    used: bool  # its slowdown is this pace, not the CPU-wait estimate
    loader_cores_alone: float | None
    loader_cores_now: float | None
    alone_readings: int
    now_readings: int
    why: str | None
    earlier_slowdown: float | None
    earlier_ago_s: float | None
    source: PaceSource
    step_alone_s: float | None
    step_now_s: float | None
    step_now_age_s: float | None
    step_alone_readings: int
    at_least: float | None
    twin_pid: int | None
    twin_args: list[str]
    loader_writes_alone: float | None
    loader_writes_now: float | None
    stored_age_s: float | None
    loop_counter: str | None
    loop_rate_alone: float | None
    loop_rate_now: float | None
    loop_alone_s: float
    loop_now_s: float


def evidence(p: Pace, used: bool) -> PaceEvidence:
    """A pace's `evidence.own_pace` entry: the meters that did not pace it read nothing (null,
    0), its reference alone is its own where no twin or stored run lent it."""
    ld, st, ct, ln = p.loader, p.steps, p.counter, p.lender
    return {"slowdown": p.slowdown, "used": used,
            "loader_cores_alone": ld.cores_alone if ld else None,
            "loader_cores_now": ld.cores_now if ld else None,
            "alone_readings": ld.alone_ticks if ld else 0,
            "now_readings": ld.now_ticks if ld else 0, "why": p.why,
            "earlier_slowdown": p.earlier, "earlier_ago_s": p.earlier_ago, "source": p.source,
            "step_alone_s": st.alone_s if st else None, "step_now_s": st.now_s if st else None,
            "step_now_age_s": st.now_age_s if st else None,
            "step_alone_readings": st.alone_readings if st else 0,
            "at_least": p.at_least, "twin_pid": ln.pid if ln else None,
            "twin_args": list(ln.args) if ln else [],
            "loader_writes_alone": _r(ld.writes_alone) if ld else None,
            "loader_writes_now": _r(ld.writes_now) if ld else None,
            "stored_age_s": ln.stored_age_s if ln else None,
            "loop_counter": ct.name if ct else None,
            "loop_rate_alone": _r(ct.alone) if ct else None,
            "loop_rate_now": _r(ct.now) if ct else None,
            "loop_alone_s": round(ct.alone_s, 1) if ct else 0.0,
            "loop_now_s": round(ct.now_s, 1) if ct else 0.0}


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 3)
