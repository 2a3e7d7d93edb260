"""py-spy's output files read into stacks: raw (folded counts), speedscope and chrometrace.

`parse_raw` gives folded stacks with their counts (order lost); `parse_speedscope` each
thread's stacks in sample order (no times); `parse_chrometrace` each thread's stack changes,
each with the time of the sample that saw it (collect/pyspy/run.py reads a found job's step from
these). Stacks are folded root first, `func (file:line)` per frame.
"""

from __future__ import annotations

import json
from collections import Counter


def parse_raw(text: str) -> Counter[str]:
    """py-spy `--format raw` (folded stacks: 'f1;f2;f3 COUNT') -> Counter of stacks."""
    stacks: Counter[str] = Counter()
    for line in text.splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            stacks[stack] += int(count)
    return stacks


def parse_speedscope(text: str) -> dict[str, list[str]]:
    """py-spy `--format speedscope` -> {profile name: time-ordered folded stacks (root first)}."""
    doc = json.loads(text)
    frames = doc.get("shared", {}).get("frames", [])
    names = []
    for fr in frames:
        name, path, line = fr.get("name", "?"), fr.get("file") or "", fr.get("line")
        names.append(f"{name} ({path}:{line})" if path else name)
    out: dict[str, list[str]] = {}
    for prof in doc.get("profiles", []):
        seq = []
        for sample in prof.get("samples", []):
            seq.append(";".join(names[i] for i in sample if 0 <= i < len(names)))
        out[str(prof.get("name", ""))] = seq
    return out


def parse_chrometrace(text: str) -> dict[str, list[tuple[float, str]]]:
    """py-spy `--format chrometrace` -> {thread: [(seconds, folded stack root first), ...]}.

    The trace has a begin and an end event per frame as the stack changes, each stamped with
    the time of the sample that saw it (µs): each entry is one change, its stack held until the
    next; the last entry (an empty stack) marks the end of the thread's last sample."""
    doc = json.loads(text)
    events = doc.get("traceEvents", []) if isinstance(doc, dict) else doc
    stacks: dict[int, list[str]] = {}
    names: dict[int, str] = {}
    out: dict[int, list[tuple[float, str]]] = {}
    last: dict[int, float] = {}

    def flush(tid: int) -> None:
        st = stacks.get(tid, [])
        seq = out.setdefault(tid, [])
        entry = (last[tid], ";".join(st))
        if seq and seq[-1][0] == entry[0]:
            seq[-1] = entry
        else:
            seq.append(entry)

    for ev in events:
        if not isinstance(ev, dict) or ev.get("ph") not in ("B", "E"):
            continue
        tid, ts = ev.get("tid"), ev.get("ts")
        if not isinstance(tid, int) or not isinstance(ts, (int, float)):
            continue
        t = ts / 1e6
        if tid in last and last[tid] != t:
            flush(tid)
        last[tid] = t
        args = ev.get("args") or {}
        name, path, line = str(ev.get("name", "?")), args.get("filename") or "", args.get("line")
        frame = f"{name} ({path}:{line})" if path else name
        st = stacks.setdefault(tid, [])
        if ev["ph"] == "B":
            if not st:
                names.setdefault(tid, name)
            st.append(frame)
        elif st:
            st.pop()
    for tid in last:
        flush(tid)
    return {names.get(tid, str(tid)): seq for tid, seq in out.items()}
