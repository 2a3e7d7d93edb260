"""A job's pace in words: the live verdict's evidence lines about it.

Its pace alone and now, by the meter that paced it, with whose readings alone it is divided by
(its own, a twin's, a stored run's); the bound ("at least N×") where there is no value; and,
alone again, how much slower it ran beside the others. The figures are `Pace`'s
(analyse/slowdown/pace.py); only the sentences are made here. They stay beside the live judge
(analyse/live/passive.py), not in present/: they are part of the verdict's JSON
(`evidence_lines`), which analyse/ makes and engine/ records.
"""

from __future__ import annotations

from gputop_dl.analyse.slowdown.pace import Pace


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
    if p.counter is not None:
        ct = p.counter
        assert ct.alone is not None
        return (f"{name}: its own loop counter ({ct.name}) did not move in "
                f"{ct.now_s:.0f} s beside the others, where it counted "
                f"{ct.alone:.2f} a second alone: at least {p.at_least:.0f}× slower by "
                "its own count (a bound: its slowdown is not measured)")
    assert p.steps is not None
    alone = p.steps.alone_s
    return (f"{name}: its steps beside the others are too long for py-spy to count (over "
            f"{p.at_least * alone:.1f} s) against {alone * 1000:.0f} ms while "
            f"it ran alone: at least {p.at_least:.0f}× slower by its own steps (a bound: its "
            "slowdown is not measured)")


def pace_line(name: str, p: Pace, used: bool) -> str:
    """An evidence line: a job's pace alone and now (its loader's, its loop counter's or its
    step time's), and whether its slowdown is it."""
    assert p.slowdown is not None
    ln = p.lender
    but = f" but for {', '.join(ln.args)}" if ln is not None and ln.args else ""
    twin = "" if ln is None or ln.pid is None else f" its twin's (PID {ln.pid}, the same command{but})"
    if ln is not None and ln.stored_age_s is not None:
        twin = (f" a stored run's (the same command{but} in the same directory, files "
                f"unchanged, {_ago(ln.stored_age_s)} ago)")
    own = " its own" if twin else ""
    if p.counter is not None:
        ct = p.counter
        assert ct.alone is not None and ct.now is not None
        head = (f"{name}:{twin or ' its'} own loop counter ({ct.name}, read by py-spy) moved "
                f"{ct.alone:.2f} a second while it ran alone ({ct.alone_s:.0f} s) "
                f"and{own} {ct.now:.2f} beside the others (its last {ct.now_s:.0f} s)")
    elif p.steps is not None:
        st = p.steps
        assert st.now_s is not None
        ago = f", read {st.now_age_s:.0f} s ago" if st.now_age_s else ""
        head = (f"{name}:{twin or ' its'} step time (py-spy) was {st.alone_s * 1000:.0f} ms "
                f"while it ran alone ({st.alone_readings} readings) and"
                f"{own} {st.now_s * 1000:.0f} ms beside the others{ago}")
    elif p.source == "batches":
        assert p.loader is not None
        ld = p.loader
        assert ld.writes_alone is not None and ld.writes_now is not None
        head = (f"{name}:{twin or ' its'} loader workers handed over batches at "
                f"{ld.writes_alone:.2f} write calls a second while it ran alone ({ld.alone_ticks} "
                f"readings) and{own} at {ld.writes_now:.2f} beside the "
                "others (a batch is a fixed number of them)")
    else:
        assert p.loader is not None
        ld = p.loader
        assert ld.cores_alone is not None and ld.cores_now is not None
        head = (f"{name}:{twin or ' its'} loader workers used {_cores(ld.cores_alone)} cores "
                f"while it ran alone ({ld.alone_ticks} readings) and{own} "
                f"{_cores(ld.cores_now)} beside the others")
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
