"""The co-run window of a recorded session and the host's means over it (for the session report).

The report's window is wider than the verdict's overlap window (analyse/recorded/evidence.py): it runs
from the first co-run "started" event to the last job's end, so the host figures cover all of
the co-run, tail included.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def corun_window(starts: list[float], ends: list[float], n_jobs: int,
                 session_end: float) -> tuple[float | None, tuple[float, float] | None]:
    """(co-run start, (start, end)) from the jobs' co-run "started" times and end times: it
    ends when the last job ended, or at `session_end` while any job has no end; no start, no
    window."""
    if not starts:
        return None, None
    t0 = min(starts)
    t1 = max(ends) if ends and len(ends) == n_jobs else session_end
    return t0, (t0, t1)


def corun_host_means(series: Mapping[str, Any] | None, counts: list[int],
                     window: tuple[float, float] | None, t_start: float
                     ) -> dict[str, float | None]:
    """Host means over `window` from a report's bucketed series (bucket centres `series["t"]`
    in seconds since `t_start`, width `series["bucket_s"]`): CPU busy, load and PSI means
    weighted by each bucket's sample count, and the highest bucket's CPU busy. A bucket counts
    when it overlaps the window at all; unknown stays None."""
    out: dict[str, float | None] = {"cpu_busy_mean": None, "load1_mean": None, "psi_some10_mean": None,
           "cpu_busy_max": None}
    if not series or window is None:
        return out
    a, b = window[0] - t_start, window[1] - t_start
    half = series["bucket_s"] / 2
    sel = [i for i, t in enumerate(series["t"]) if t + half > a and t - half < b]
    host = series["host"]
    for key, name in (("cpu_busy", "cpu_busy_mean"), ("load1", "load1_mean"),
                      ("psi_some10", "psi_some10_mean")):
        vals = [(host[key][i], counts[i]) for i in sel if host[key][i] is not None and counts[i]]
        if vals:
            out[name] = sum(v * c for v, c in vals) / sum(c for _, c in vals)
    busy = [host["cpu_busy"][i] for i in sel if host["cpu_busy"][i] is not None]
    out["cpu_busy_max"] = max(busy) if busy else None
    return out
