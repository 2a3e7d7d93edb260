"""CPU sets in the kernel's cpulist form ("0-31,64-95"), as /proc/PID/status `Cpus_allowed_list`
and sysfs `local_cpulist` write them, and NVML's CPU-affinity bitmask words turned into one."""

from __future__ import annotations

from typing import Iterable

__all__ = ["format_cpulist", "mask_words_to_cpus", "parse_cpulist"]


def parse_cpulist(text: str | None) -> frozenset[int]:
    """"0-3,8,10-11" -> {0, 1, 2, 3, 8, 10, 11}; None, "" or garbage -> empty."""
    out: set[int] = set()
    if not text:
        return frozenset()
    for part in text.strip().split(","):
        lo, sep, hi = part.strip().partition("-")
        try:
            if sep:
                a, b = int(lo), int(hi)
                if b < a or b - a > 1 << 16:
                    return frozenset()
                out.update(range(a, b + 1))
            elif lo:
                out.add(int(lo))
        except ValueError:
            return frozenset()
    return frozenset(out)


def format_cpulist(cpus: Iterable[int]) -> str:
    """{0, 1, 2, 3, 8} -> "0-3,8" (empty -> "")."""
    runs: list[str] = []
    start = prev = None
    for c in sorted(set(cpus)):
        if prev is not None and c == prev + 1:
            prev = c
            continue
        if start is not None:
            runs.append(f"{start}-{prev}" if prev != start else str(start))
        start = prev = c
    if start is not None:
        runs.append(f"{start}-{prev}" if prev != start else str(start))
    return ",".join(runs)


def mask_words_to_cpus(words: Iterable[int], bits: int = 64) -> frozenset[int]:
    """NVML's affinity (an array of `bits`-bit words, CPU 0 in bit 0 of word 0) -> CPU numbers."""
    out = set()
    for w, word in enumerate(words):
        word = int(word)
        b = 0
        while word:
            if word & 1:
                out.add(w * bits + b)
            word >>= 1
            b += 1
    return frozenset(out)
