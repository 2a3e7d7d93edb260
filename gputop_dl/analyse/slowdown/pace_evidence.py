"""A job's pace as the live verdict shows it: its `evidence.own_pace` entry and its lines.

The meters and what they compare are analyse/slowdown/pace.py; this module words a `Pace` for the
verdict's evidence (`PaceEvidence`, schemas/verdict.json) and its evidence lines: the pace
alone and now with where its reference comes from (its own readings, a twin's, a stored run's),
the bound ("at least N×") and, alone again, how much slower it ran beside the others.
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
    return {"slowdown": p.slowdown, "used": used, "loader_cores_alone": p.alone_cores,
            "loader_cores_now": p.now_cores, "alone_readings": p.alone_ticks,
            "now_readings": p.now_ticks, "why": p.why, "earlier_slowdown": p.earlier,
            "earlier_ago_s": p.earlier_ago, "source": p.source, "step_alone_s": p.step_alone_s,
            "step_now_s": p.step_now_s, "step_now_age_s": p.step_now_age_s,
            "step_alone_readings": p.step_alone_readings,
            "at_least": p.at_least, "twin_pid": p.twin_pid,
            "twin_args": list(p.twin_args), "loader_writes_alone": _r(p.alone_writes),
            "loader_writes_now": _r(p.now_writes), "stored_age_s": p.stored_age_s,
            "loop_counter": p.counter, "loop_rate_alone": _r(p.counter_alone),
            "loop_rate_now": _r(p.counter_now), "loop_alone_s": round(p.counter_alone_s, 1),
            "loop_now_s": round(p.counter_now_s, 1)}


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 3)


def earlier_line(name: str, p: Pace) -> str:
    """An evidence line for a job alone again: how much slower it ran beside the others."""
    assert p.earlier is not None and p.earlier_ago is not None
    return (f"{name}: while other jobs ran beside it (until {p.earlier_ago:.0f} s ago), its "
            f"loader's pace was {p.earlier:.2f}× slower than alone: it ran about that much "
            "slower then (its own pace)")


def at_least_line(name: str, p: Pace) -> str:
    """An evidence line: a job whose steps beside the others py-spy cannot count is at least
    this much slower than its steps alone (a bound, not its slowdown)."""
    assert p.at_least is not None
    if p.source == "counter":
        assert p.counter_alone is not None
        return (f"{name}: its own loop counter ({p.counter}) did not move in "
                f"{p.counter_now_s:.0f} s beside the others, where it counted "
                f"{p.counter_alone:.2f} a second alone: at least {p.at_least:.0f}× slower by "
                "its own count (a bound: its slowdown is not measured)")
    assert p.step_alone_s is not None
    return (f"{name}: its steps beside the others are too long for py-spy to count (over "
            f"{p.at_least * p.step_alone_s:.1f} s) against {p.step_alone_s * 1000:.0f} ms while "
            f"it ran alone: at least {p.at_least:.0f}× slower by its own steps (a bound: its "
            "slowdown is not measured)")


def pace_line(name: str, p: Pace, used: bool) -> str:
    """An evidence line: a job's pace alone and now (its loader's, or its step time's), and
    whether its slowdown is it."""
    assert p.slowdown is not None
    but = f" but for {', '.join(p.twin_args)}" if p.twin_args else ""
    twin = "" if p.twin_pid is None else f" its twin's (PID {p.twin_pid}, the same command{but})"
    if p.stored_age_s is not None:
        twin = (f" a stored run's (the same command{but} in the same directory, files "
                f"unchanged, {_ago(p.stored_age_s)} ago)")
    if p.source == "counter":
        assert p.counter_alone is not None and p.counter_now is not None
        head = (f"{name}:{twin or ' its'} own loop counter ({p.counter}, read by py-spy) moved "
                f"{p.counter_alone:.2f} a second while it ran alone ({p.counter_alone_s:.0f} s) "
                f"and{' its own' if twin else ''} {p.counter_now:.2f} beside the others (its "
                f"last {p.counter_now_s:.0f} s)")
    elif p.source == "steps":
        assert p.step_alone_s is not None and p.step_now_s is not None
        ago = f", read {p.step_now_age_s:.0f} s ago" if p.step_now_age_s else ""
        head = (f"{name}:{twin or ' its'} step time (py-spy) was {p.step_alone_s * 1000:.0f} ms "
                f"while it ran alone ({p.step_alone_readings} readings) and"
                f"{' its own' if twin else ''} {p.step_now_s * 1000:.0f} ms beside the others{ago}")
    elif p.source == "batches":
        assert p.alone_writes is not None and p.now_writes is not None
        head = (f"{name}:{twin or ' its'} loader workers handed over batches at "
                f"{p.alone_writes:.2f} write calls a second while it ran alone ({p.alone_ticks} "
                f"readings) and{' its own' if twin else ''} at {p.now_writes:.2f} beside the "
                "others (a batch is a fixed number of them)")
    else:
        assert p.alone_cores is not None and p.now_cores is not None
        head = (f"{name}:{twin or ' its'} loader workers used {_cores(p.alone_cores)} cores "
                f"while it ran alone ({p.alone_ticks} readings) and{' its own' if twin else ''} "
                f"{_cores(p.now_cores)} beside the others")
    return (f"{head}: its own pace {p.slowdown:.2f}× slower"
            + ("; its slowdown is this pace, not the CPU-wait estimate" if used
               else "; the CPU-wait estimate agrees within 1.6×"))


def _cores(x: float) -> str:
    """A loader's cores with the digits that tell a light one's rates apart (0.004, not 0.00)."""
    return f"{x:.3f}" if x < 0.1 else f"{x:.2f}"


def _ago(s: float) -> str:
    """A stored reference's age, in the unit that reads best (90 s, 42 min, 5.2 h, 3.1 days)."""
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h" if s < 172800 else f"{s / 86400:.1f} days"
