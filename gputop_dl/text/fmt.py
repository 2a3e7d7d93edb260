"""Number formatting shared by every presenter: unknown values print as an en dash."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

DASH = "–"


def pct(x: float | None, digits: int = 0) -> str:
    return DASH if x is None else f"{x * 100:.{digits}f}%"


def num(x: float | None, fmt: str = ".2f", unit: str = "") -> str:
    return DASH if x is None else f"{x:{fmt}}{unit}"


def size(n: int | float | None) -> str:
    """Bytes as MiB/GiB, the unit the lab notebooks' tables use."""
    if n is None:
        return DASH
    if n >= 1024**3:
        return f"{n / 1024**3:.1f} GiB"
    return f"{n / 1024**2:.0f} MiB"


GiB = 1024**3


def rate(bps: int | float | None) -> str:
    """Bytes per second as MB/s (disk and link rates are quoted in decimal units)."""
    if bps is None:
        return DASH
    return f"{bps / 1e6:.1f} MB/s" if bps >= 1e5 or bps == 0 else f"{bps / 1e3:.0f} kB/s"


def gib(n: int | float | None, digits: int = 1) -> str:
    """Bytes as GiB with `digits` decimals ("1.5 GiB"), for a figure that stays in GiB."""
    return DASH if n is None else f"{n / GiB:.{digits}f} GiB"


def joules(x: float | None, estimate: bool | None = False) -> str:
    """Energy as J, kJ or MJ; "~" in front of an estimate (a shared GPU split by time share)."""
    if x is None:
        return DASH
    mark = "~" if estimate else ""
    scale, unit = next(((s, u) for s, u in ((1e6, "MJ"), (1e3, "kJ")) if x >= s * 0.9995),
                       (1.0, "J"))
    v = x / scale
    return f"{mark}{v:.{2 if v < 9.995 else 1 if v < 99.95 else 0}f} {unit}"


def secs(x: float | None) -> str:
    if x is None:
        return DASH
    if x < 1:
        return f"{x * 1000:.0f} ms"
    if x < 120:
        return f"{x:.1f} s"
    m, s = divmod(int(x), 60)
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def progress(epoch: int | None, epochs: int | None, step: int | None, spe: int | None) -> str:
    """"2/5 · 9/40": epoch of epochs, step of the epoch's steps; a total nobody knows (no plan,
    an IterableDataset with no length) is "–", never 0."""
    if epoch is None:
        return DASH
    return f"{epoch}/{epochs or DASH} · {step or 0}/{spe or DASH}"


def epochs_done(done: int, planned: int | None = None, steps: int | None = None) -> str:
    """A job's epochs ended: "3", "3/5"; "no epochs" for one that ran steps but ended no
    epoch (step-based training, an endless loader, a loop that breaks out), never "0"."""
    if not done and steps:
        return "no epochs"
    return f"{done}/{planned}" if planned else str(done)


def dash(v: object) -> str:
    """A value as text, unknown (None) as "–"."""
    return DASH if v is None else str(v)


def rank_list(ranks: Iterable[Mapping[str, object]]) -> str:
    """A job's ranks on this node, each a mapping with rank, local_rank and pid:
    `2 (local 0, pid 901), 3 (local 1, pid 902)`; unknown parts as "–"."""
    return ", ".join(f"{dash(r.get('rank'))} (local {dash(r.get('local_rank'))}, "
                     f"pid {dash(r.get('pid'))})" for r in ranks) or DASH


def duration(x: float | None) -> str:
    """Elapsed time, top-like: "42s", "12:05" (min:s), "3h04m", "2d05h"; None -> "–"."""
    if x is None:
        return DASH
    s = int(x)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}:{s % 60:02d}"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def shorten(text: str, width: int) -> str:
    """`text` cut to `width` cells with … in the middle (keeps a command's start and end)."""
    if len(text) <= width:
        return text
    if width < 5:
        return text[:width]
    head = (width - 1) * 2 // 3
    return text[:head] + "…" + text[len(text) - (width - 1 - head):]
