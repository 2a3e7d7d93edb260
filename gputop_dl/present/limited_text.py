"""What a job's row could not show and why, as text lines under the jobs table (`limited`, collect/jobs/privilege.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from collections.abc import Iterable

from gputop_dl.text.fmt import DASH

if TYPE_CHECKING:  # imported after the first frame (statuses.py)
    from gputop_dl.snapshot import JobSample

__all__ = ["limited_lines", "limited_summary"]


def limited_lines(jobs: Iterable[JobSample]) -> list[str]:
    """One line per distinct reason: the jobs it holds for, the figures it leaves unknown
    ("train.py, eval.py: data stall, step time: – (another user's process: needs root ...)")."""
    by_why: dict[str, tuple[list[str], list[str]]] = {}
    for j in jobs:
        for what, why in j.limited:
            names, whats = by_why.setdefault(why, ([], []))
            if j.name not in names:
                names.append(j.name)
            if what not in whats:
                whats.append(what)
    return [f"{', '.join(names)}: {', '.join(whats)}: {DASH} ({why})"
            for why, (names, whats) in by_why.items()]


def limited_summary(jobs: Iterable[JobSample]) -> str | None:
    """One short line for a jobs table: how many jobs show only part of their figures, and
    why ("2 jobs: CPU and waits only (another user's process: needs root ...)"); None: none."""
    count: dict[str, int] = {}
    for j in jobs:
        if j.limited:
            why = j.limited[0][1].split("; ")[0]  # the reason, without the ways out
            count[why] = count.get(why, 0) + 1
    return "; ".join(f"{n} job{'s' if n != 1 else ''}: CPU and waits only ({why})"
                     for why, n in count.items()) or None
