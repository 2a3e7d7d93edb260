"""The jobs table's columns ranked by what a user needs to act; a narrow terminal drops from the end.

First the job, then what says whether it is slowed and why (slowdown, what it waits on, its
CPU wait and data wait, its CPU), then the rest. The TUI's jobs table (present/tui/jobs_table.py)
and the console's (present/headless.py, `--once`) show their columns in this order and, where
the width is short, leave out the last ones first (at 80 columns the two figures the
verdict rests on were the ones dropped).
"""

from __future__ import annotations

RANK: tuple[str, ...] = (
    "job", "slowdown", "waitson", "cpuwait", "stall", "cpu",
    "step", "status", "sps", "progress", "eta", "device", "batch", "gpumem", "energy", "disk", "rss",
    "user", "elapsed", "slurm", "command",
)


def ranked(keys: "list[str] | tuple[str, ...]") -> list[str]:
    """`keys` in RANK order (a key RANK lacks goes last, in its own order)."""
    return sorted(keys, key=lambda k: RANK.index(k) if k in RANK else len(RANK))


def fit(widths: "list[tuple[str, int]]", width: int) -> list[str]:
    """The longest prefix of these (key, cells) columns, in RANK order, that fits `width`
    cells; the first column always."""
    out: list[str] = []
    used = 0
    for k in ranked([k for k, _ in widths]):
        w = dict(widths)[k]
        if out and used + w > width:
            break
        out.append(k)
        used += w
    return out
