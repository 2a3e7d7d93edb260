"""`diagnose`'s slowdown from the loader workers against the scripts' own iteration rates.

    python benchmarks/diagnose_loader.py [--only "dcgan pair"] [--seconds 40] [--wait-policy passive]

Ground truth: tests/external/mt_examples.py (PyTorch's dcgan, mnist and word_language_model
examples shrunk, 2 intra-op threads, one loader worker each), printing a timestamp per
iteration. Per scenario the copies are started by hand (no gputop-dl in them), past their
warm-up `gputop-dl diagnose --seconds S --json --pid ...` judges them (with its probe), and
each job's figures are set beside its own rates:

- together: its iterations a second over diagnose's observe phase and py-spy burst (from
  diagnose's start + 2 s to the first probe window), as the loader is read;
- alone: over its own probe window, the span when every other copy was stopped (state T,
  looked at every 20 ms), less its first 0.3 s (before 2026-11-28 the span when every other
  copy printed nothing: a copy beside the others prints every 1-3 s, so that span reached up
  to that long into together time at both ends and read the truth low; its figure is in the
  last column);
- truth = alone / together, beside `slowdown` (`slowdown_from`: which measure gave it),
  `loader_slowdown` or `loader_why`, and the live estimate.

Run it under the box's lock (`flock /tmp/gputop-box.lock ...`). Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
from typing import TypedDict

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import verdict_threads as vt  # noqa: E402

SCENARIOS = {
    "dcgan pair": ("dcgan", "dcgan"),
    "mnist pair": ("mnist", "mnist"),
    "lm pair": ("lm", "lm"),
    "mnist trio": ("mnist", "mnist", "mnist"),
}
GAP_S = 1.5  # a copy that printed nothing this long was paused


def paused_spans(ts: list[float], after: float) -> list[tuple[float, float]]:
    """The gaps of at least GAP_S between a copy's stamps after `after`: when it was paused."""
    ts = [t for t in ts if t >= after]
    return [(a, b) for a, b in zip(ts, ts[1:]) if b - a >= GAP_S]


class StopWatch:
    """Each copy's stopped spans (state T in /proc/PID/stat, diagnose's SIGSTOP), looked at
    every 20 ms: the probe windows exactly, where the others' stamps only bound them (a copy
    beside the others prints every 1-3 s, so the gap in its stamps starts up to that long
    before its pause and ends that long after it)."""

    def __init__(self, pids: list[int]):
        self.pids, self.looks = pids, []  # type: ignore[var-annotated]
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._done.wait(0.02):
            states = {}
            for pid in self.pids:
                try:
                    with open(f"/proc/{pid}/stat", "rb") as f:
                        data = f.read()
                    states[pid] = data[data.rfind(b")") + 2:][:1] == b"T"
                except OSError:
                    states[pid] = False
            self.looks.append((time.time(), states))

    def stop(self) -> None:
        self._done.set()
        self._thread.join()

    def alone(self, pid: int) -> tuple[float, float] | None:
        """The longest span when every other copy was stopped, less its first 0.3 s."""
        best, start = None, None
        for t, st in self.looks:
            others = all(v for p, v in st.items() if p != pid) and not st.get(pid)
            if others and start is None:
                start = t
            elif not others and start is not None:
                if best is None or t - start > best[1] - best[0]:
                    best = (start, t)
                start = None
        return None if best is None or best[1] - best[0] < 1.3 else (best[0] + 0.3, best[1])


def alone_span(i: int, stamps: list[list[float]], after: float) -> tuple[float, float] | None:
    """Copy i's probe window: the longest span when every other copy was in a pause at once,
    less its first 0.3 s (diagnose lets the pipeline settle)."""
    spans: list[tuple[float, float]] = [(after, float("inf"))]
    for j, ts in enumerate(stamps):
        if j != i:
            spans = [(max(a, c), min(b, d)) for a, b in spans for c, d in paused_spans(ts, after)
                     if min(b, d) - max(a, c) > 1.0]
    if not spans:
        return None
    lo, hi = max(spans, key=lambda s: s[1] - s[0])
    return lo + 0.3, hi


# one job of a scenario: its own rates (it/s; None where a window did not show), the truth
# from them, and what diagnose said (`from`: `slowdown_from`, `why`: `loader_why`, `ratios`:
# the loader's CPU and switch ratios as its line gives them); "from" is a keyword, hence the
# functional form
Row = TypedDict("Row", {
    "scenario": str, "example": str, "together": "float | None", "alone": "float | None",
    "truth": "float | None", "slowdown": "float | None", "from": "str | None",
    "loader": "float | None", "why": "str | None", "estimate": "float | None", "ratios": str,
    "verdict": "str | None", "truth_stamps": "float | None"})


def scenario(name: str, seconds: float, env: dict[str, str]) -> list[Row]:
    examples = SCENARIOS[name]
    procs, lines = [], []
    for e in examples:
        p = subprocess.Popen(vt.argv(e, seconds + 90), stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True, start_new_session=True, env=env)
        got: list[str] = []
        threading.Thread(target=vt._lines, args=(p, got), daemon=True).start()
        procs.append(p)
        lines.append(got)
    try:
        while not all(vt.started(ln, 6) for ln in lines):
            time.sleep(0.2)
        time.sleep(2)
        t0 = time.time()
        stopped = StopWatch([p.pid for p in procs])
        out = subprocess.run([sys.executable, "-m", "gputop_dl", "diagnose", "--seconds",
                              str(seconds), "--json", "--pid",
                              ",".join(str(p.pid) for p in procs)],
                             capture_output=True, text=True, env=env, timeout=seconds + 120)
        time.sleep(3)  # every copy prints again: the last probe window's end shows
    finally:
        if "stopped" in locals():
            stopped.stop()
        for p in procs:
            p.kill()
    if out.returncode != 0:
        print(f"{name}: diagnose exit {out.returncode}: {out.stderr[-300:]}")
        return []
    doc = json.loads(out.stdout)
    stamps = [vt.stamps("".join(ln)) for ln in lines]
    windows = [stopped.alone(p.pid) for p in procs]  # exact (SIGSTOP seen); the stamps' bound:
    bounds = [alone_span(i, stamps, t0) for i in range(len(procs))]
    first_pause = min((w[0] - 0.3 for w in windows if w), default=None)
    rows: list[Row] = []
    by_pid = {j["pid"]: j for j in doc["jobs"]}
    lines_v = " ".join((doc.get("verdict") or {}).get("evidence_lines") or [])
    for i, (e, p) in enumerate(zip(examples, procs)):
        j = by_pid.get(p.pid, {})
        tog = vt.rate(stamps[i], t0 + 2, first_pause - 0.3) if first_pause else None
        alone = vt.rate(stamps[i], *windows[i]) if windows[i] else None
        b = bounds[i]
        a_b = vt.rate(stamps[i], *b) if b else None
        m = re.search(re.escape(j.get("name", "?")) + r" [0-9.]+× \(its workers' CPU ([0-9.]+)×, "
                      r"switches ([0-9.]+)×\)", lines_v) or re.search(
            re.escape(j.get("name", "?")) + r" [0-9.]+× \(its workers' batches ([0-9.]+)× "
            r"\(write calls\), CPU ([0-9.–]+)×?\)", lines_v)
        row: Row = {"scenario": name, "example": e, "together": tog, "alone": alone,
                    "truth": alone / tog if alone and tog else None,
                    "slowdown": j.get("slowdown"), "from": j.get("slowdown_from"),
                    "loader": j.get("loader_slowdown"), "why": j.get("loader_why"),
                    "estimate": j.get("estimated_slowdown"),
                    "ratios": f"{m.group(1)} / {m.group(2)}" if m else "–",
                    "verdict": (doc.get("verdict") or {}).get("kind"),
                    "truth_stamps": a_b / tog if a_b and tog else None}
        rows.append(row)
    return rows


def _f(x: float | None, f: str = ".2f") -> str:
    return "–" if x is None else format(x, f)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=tuple(SCENARIOS), action="append")
    ap.add_argument("--seconds", type=float, default=40.0)
    ap.add_argument("--wait-policy", choices=("passive",), default=None)
    a = ap.parse_args()
    env = dict(os.environ)
    if a.wait_policy:
        env["OMP_WAIT_POLICY"] = "PASSIVE"
    print(f"load {os.getloadavg()[0]:.1f}; OMP_WAIT_POLICY {env.get('OMP_WAIT_POLICY', 'unset')}\n")
    print("| scenario | script | together it/s | alone it/s (its probe window) | true slowdown "
          "| diagnose's slowdown | from | loader | its CPU / switch (or batch / CPU) ratios | estimate "
          "| loader / truth | verdict | true slowdown by the stamps' bounds |")
    print("|---|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---|---:|")
    for name in a.only or SCENARIOS:
        for r in scenario(name, a.seconds, env):
            ratio = r["loader"] / r["truth"] if r["loader"] and r["truth"] else None
            print(f"| {r['scenario']} | {r['example']} | {_f(r['together'])} | {_f(r['alone'])} "
                  f"| {_f(r['truth'])} | {_f(r['slowdown'])} | {r['from'] or 'estimate'} | "
                  f"{_f(r['loader']) if r['loader'] else r['why']} | {r['ratios']} | "
                  f"{_f(r['estimate'])} | "
                  f"{_f(ratio)} | {r['verdict']} | {_f(r['truth_stamps'])} |", flush=True)
    print(f"\nload {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
