"""The live slowdown from a job's own pace, against the job's own iteration rate.

    python benchmarks/own_pace.py [--only mnist] [--alone-s 40] [--together-s 45] [--wait-policy passive]
    python benchmarks/own_pace.py --after [--only mnist]   # the last copy alone after the others
    python benchmarks/own_pace.py --stored [--only dcgan]   # each alone in an earlier monitor run
    python benchmarks/own_pace.py --cuda [--stored]   # a real GPU: copies of gpu_plain.py on GPU 0

Ground truth: tests/external/mt_examples.py (PyTorch's dcgan, mnist and word_language_model
examples shrunk; `torch.set_num_threads(2)`, one loader worker, a timestamp per iteration), as
a user starts them: the scenario's first copy alone, the others `--alone-s` later, by hand (no
gputop-dl in them), watched by the monitor's engine from the start (found jobs, this run's
only). The first copy ran alone, so the live judge keeps its loader's pace alone
(analyse/slowdown/pace.py) and compares its pace beside the others with it.

- truth: the first copy's own rate while alone (after its warm-up, until the others start)
  over its rate while every copy ran (after their warm-up);
- gputop-dl: the first job's live slowdown (the median over the ticks of that span once the
  pace had its readings), where it comes from ("own pace" or "estimated"), and its pace
  and the CPU-wait estimate from the verdict's evidence.
- twins: every copy runs the same command line (the others are stopped after `--together-s`),
  so a later copy of the first's example borrows the first's pace alone (`twin_pid`): its truth
  is the first copy's rate alone over its own rate while every copy ran, its live slowdown the
  median over the same span once paced.

`--after`: every copy at once, the others ending after `--together-s`, the last copy alone for
`--alone-s` more: its pace then (the `alone` verdict's `earlier_slowdown`: how much slower it
ran beside them) against its own rate alone over together.

`--stored`: two monitor runs, recording into a scratch session database, as a user who tried
each script alone one day and starts them together the next: in the first, each example of the
scenario runs alone for `--alone-s` in turn (one after another), then that monitor stops; in
the second, a new monitor, every copy is started at the same moment, none ever alone, for
`--together-s`. Each copy is paced by the stored run of its command (engine/pace_refs.py,
`stored_age_s`): its truth is its example's own rate alone in the first run over its own rate
together (after every copy's warm-up), its live slowdown the median over that span once paced.

`--cuda` (a real GPU only): the scenarios are copies of tests/external/gpu_plain.py on GPU 0
(one loader worker each, which waits 5 ms a batch and hands over a token; the step is GPU
work, so the copies slow each other by queueing for the GPU, not the host's cores).

The last column compares each paced tick with the truth over the same window (`windowed`):
the live figure follows its last readings, the span's truth is a mean over the whole span.

Run it under the box's lock (`flock /tmp/gputop-box.lock ...`). Prints a Markdown table and
the load average.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypedDict

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from verdict_threads import SCENARIOS, _lines, argv, rate, started, stamps  # noqa: E402

GPU_SCENARIOS = {"gpu pair": ("gpu", "gpu"), "gpu trio": ("gpu", "gpu", "gpu")}

from gputop_dl.collect.nvml.gpus import Nvml  # noqa: E402
from gputop_dl.runner import monitor_engine  # noqa: E402
from tests.fakes.by_hand import only_found  # noqa: E402


@contextlib.contextmanager
def watching(pids: set[int], on: Callable[[Any], None], store: str | None = None
             ) -> Iterator[None]:
    """The monitor's engine at 1 s in this process, judging only the jobs whose root PIDs are in
    `pids` (a set the caller fills as it starts them), `on(snapshot)` each tick; stopped after.
    `store`: it records there (and keeps and reads stored paces alone); else nothing."""
    eng = monitor_engine(Nvml(), interval=1.0, record=store is not None, store_path=store,
                         found=only_found(pids))
    eng.subscribe(on)
    eng.start()
    try:
        yield
    finally:
        eng.request_stop()
        eng.join(60)  # stopped (its references stored) before a next monitor reads them


class Copies:
    """mt_examples.py copies started by hand (each in its own session), their output lines as
    they come, their PIDs added to `pids`; `close()` kills those still running."""

    def __init__(self, pids: set[int]) -> None:
        self.pids = pids
        self.procs: list[subprocess.Popen] = []
        self.lines: list[list[str]] = []

    def start(self, example: str, seconds: float) -> None:
        p = subprocess.Popen(argv(example, seconds), stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True, start_new_session=True)
        ln: list[str] = []
        threading.Thread(target=_lines, args=(p, ln), daemon=True).start()
        self.procs.append(p)
        self.lines.append(ln)
        self.pids.add(p.pid)

    def close(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()

    def stamps(self) -> list[list[float]]:
        """Each copy's iteration times (after its reader had a moment to take the last lines)."""
        time.sleep(0.5)
        return [stamps("".join(ln)) for ln in self.lines]


def windowed(ticks: list, ts: list[float], alone_rate: float | None, pid: int, lo: float,
             hi: float, n_jobs: int) -> tuple[float | None, int]:
    """The median over the paced ticks in [lo, hi] of the job's live pace over its truth in
    the same window: its own rate alone over its own rate between the reading before the
    pace's oldest one (`now_readings` of them, of its source: write calls or cores) and the
    tick. A live figure follows the last 10-60 readings; where a job's rate moves within the
    span (three different scripts on 2 cores trade the CPU), the span's mean is not what it
    measured. `ticks`: (time, {pid: job}, {name: pace evidence}); with its count of ticks."""
    out = []
    for k, (t, jobs, pace) in enumerate(ticks):
        j = jobs.get(pid)
        if j is None or not (lo <= t <= hi) or len(jobs) < n_jobs or not alone_rate:
            continue
        p = pace.get(j.name) or {}
        if p.get("slowdown") is None or not p.get("now_readings"):
            continue
        attr = "loader_writes_per_s" if p["source"] == "batches" else "cpu_cores_workers"
        read = [t2 for t2, jobs2, _ in ticks[:k + 1]
                if pid in jobs2 and getattr(jobs2[pid], attr) is not None]
        if len(read) <= p["now_readings"]:
            continue
        r = rate(ts, read[-p["now_readings"] - 1], t)
        if r:
            out.append(p["slowdown"] / (alone_rate / r))
    return (statistics.median(out) if out else None), len(out)


class Staggered(TypedDict):
    """The first copy's own rates alone and together, and gputop-dl's live figures for it."""

    truth: float | None
    alone_rate: float | None
    together_rate: float | None
    slowdown: float | None  # its live slowdown, median over the together ticks once paced
    sources: list[str]
    pace: float | None
    ticks: int
    why: str | None
    windowed: tuple[float | None, int]  # live / truth over each tick's window (`windowed`)
    cores: tuple[float | None, float | None]  # its loader's cores alone, now (the last tick)
    kinds: list[str]
    twins: list[Twin]  # the later copies of the first's example


class Twin(TypedDict):
    """A later copy of the first copy's example: its truth and its live slowdown (borrowed)."""

    truth: float | None
    together_rate: float | None
    slowdown: float | None
    sources: list[str]
    ticks: int
    twin_pid: int | None  # whose reference alone its pace used (None: none)
    why: str | None
    windowed: tuple[float | None, int]


def staggered(examples: tuple[str, ...], alone_s: float, together_s: float) -> Staggered:
    """The first example alone for `alone_s`, then all of them for `together_s`."""
    pids: set[int] = set()
    ticks: list = []

    def on(snap) -> None:
        v = snap.verdict or {}
        ev = v.get("evidence") or {}
        ticks.append((time.time(), len(snap.jobs), {j.pid: j for j in snap.jobs},
                      ev.get("own_pace") or {}, v.get("kind")))

    copies = Copies(pids)
    seconds = alone_s + together_s + 60  # one command line for every copy of an example
    try:
        with watching(pids, on):
            copies.start(examples[0], seconds)
            while not started(copies.lines[0]) and copies.procs[0].poll() is None:
                time.sleep(0.2)
            time.sleep(alone_s)
            t_others = time.time()
            for e in examples[1:]:
                copies.start(e, seconds)
            time.sleep(together_s)
            t_end = time.time()
    finally:
        copies.close()
    ts = copies.stamps()
    first = ts[0]
    alone_rate = rate(first, first[3] if len(first) > 3 else t_others, t_others)
    lo = max(t[3] for t in ts[1:] if len(t) > 3)
    hi = min(min(t[-1] for t in ts[1:] if t), t_end)

    def live(pid: int) -> tuple[list[float], set[str], list[float], dict | None]:
        """A copy's live slowdowns and their sources, its paces, its last pace evidence (a
        copy never paced, e.g. without loader workers: its live slowdowns, the estimate)."""
        name = None
        got, src, paces, unpaced = [], set(), [], []
        for t, n, jobs, pace, _ in ticks:
            j = jobs.get(pid)
            if j is None or not (lo <= t <= hi) or n < len(examples):
                continue
            name = j.name
            p = pace.get(j.name) or {}
            if p.get("slowdown") is not None:
                paces.append(p["slowdown"])
                if j.slowdown is not None:
                    got.append(j.slowdown)
                    src.add(j.slowdown_source)
            elif j.slowdown is not None:
                unpaced.append((j.slowdown, j.slowdown_source))
        if not paces and unpaced:
            got, src = [x for x, _ in unpaced], {s for _, s in unpaced}
        last = next((pace.get(name) for _, _, _, pace, _ in reversed(ticks) if name in pace),
                    None)
        return got, src, paces, last

    together_rate = rate(first, lo, hi)
    got, src, paces, last = live(copies.procs[0].pid)
    view = [(t, jobs, pace) for t, _, jobs, pace, _ in ticks]
    truth = alone_rate / together_rate if alone_rate and together_rate else None
    twins: list[Twin] = []
    for i, e in enumerate(examples[1:], 1):
        if e != examples[0]:
            continue
        tr = rate(ts[i], lo, hi)
        tgot, tsrc, _, tlast = live(copies.procs[i].pid)
        twins.append({"windowed": windowed(view, ts[i], alone_rate, copies.procs[i].pid, lo, hi,
                                           len(examples)),
                      "truth": alone_rate / tr if alone_rate and tr else None,
                      "together_rate": tr, "slowdown": statistics.median(tgot) if tgot else None,
                      "sources": sorted(tsrc), "ticks": len(tgot),
                      "twin_pid": (tlast or {}).get("twin_pid"), "why": (tlast or {}).get("why")})
    return {"truth": truth, "alone_rate": alone_rate, "together_rate": together_rate,
            "windowed": windowed(view, first, alone_rate, copies.procs[0].pid, lo, hi,
                                 len(examples)),
            "slowdown": statistics.median(got) if got else None, "sources": sorted(src),
            "pace": statistics.median(paces) if paces else None, "ticks": len(got),
            "why": (last or {}).get("why"), "cores": ((last or {}).get("loader_cores_alone"),
                                                      (last or {}).get("loader_cores_now")),
            "writes": ((last or {}).get("loader_writes_alone"),
                       (last or {}).get("loader_writes_now"), (last or {}).get("source")),
            "kinds": sorted({k for t, _, _, _, k in ticks if lo <= t <= hi and k}),
            "twins": twins}


class After(TypedDict):
    """The last copy's own rates together and alone after, and its `earlier_slowdown`."""

    truth: float | None
    alone_rate: float | None
    together_rate: float | None
    earlier: float | None


def after(examples: tuple[str, ...], together_s: float, alone_s: float) -> After:
    """All copies at once; the others end after `together_s`, the last copy runs on alone for
    `alone_s`: its `earlier` pace (how much slower it ran beside them) against its own rate
    alone over together."""
    pids: set[int] = set()
    ticks: list = []

    def on(snap) -> None:
        v = snap.verdict or {}
        ticks.append((time.time(), (v.get("evidence") or {}).get("own_pace") or {},
                      {j.pid: j.name for j in snap.jobs}))

    copies = Copies(pids)
    try:
        with watching(pids, on):
            for i, e in enumerate(examples):
                copies.start(e, together_s + (alone_s + 60 if i == len(examples) - 1 else 0))
            for p in copies.procs[:-1]:
                p.wait(timeout=together_s + 300)
            t_alone = time.time()
            time.sleep(alone_s)
            t_end = time.time()
    finally:
        copies.close()
    ts = copies.stamps()
    last = ts[-1]
    lo = max(t[3] for t in ts if len(t) > 3)
    tog = rate(last, lo, min(t[-1] for t in ts[:-1] if t))
    alone = rate(last, t_alone + 2, t_end)
    pid = copies.procs[-1].pid
    earlier = None
    for _t, pace, names in reversed(ticks):
        got = pace.get(names.get(pid, "")) or {}
        if got.get("earlier_slowdown") is not None:
            earlier = got["earlier_slowdown"]
            break
    return {"truth": alone / tog if alone and tog else None, "alone_rate": alone,
            "together_rate": tog, "earlier": earlier}


class Stored(TypedDict):
    """One copy started with the others, paced by its command's stored run alone."""

    example: str
    alone_rate: float | None  # its example's own rate alone, in the first monitor run
    together_rate: float | None
    truth: float | None
    slowdown: float | None
    sources: list[str]
    ticks: int
    stored_age_s: float | None
    why: str | None
    windowed: tuple[float | None, int]


def stored(examples: tuple[str, ...], alone_s: float, together_s: float) -> list[Stored]:
    """Each example alone in turn under a recording monitor; then, under a new one, every copy
    started at once (see the module docstring)."""
    import tempfile

    alone_rates: dict[str, float | None] = {}
    with tempfile.TemporaryDirectory(prefix="gputop-stored-") as tmp:
        db = os.path.join(tmp, "sessions.db")
        pids: set[int] = set()
        for e in dict.fromkeys(examples):  # each distinct example alone, one after another
            copies = Copies(pids)
            try:
                with watching(pids, lambda _snap: None, store=db):
                    copies.start(e, alone_s + 60)
                    while not started(copies.lines[0]) and copies.procs[0].poll() is None:
                        time.sleep(0.2)
                    time.sleep(alone_s)
                    t_end = time.time()
            finally:
                copies.close()
            ts = copies.stamps()[0]
            alone_rates[e] = rate(ts, ts[3] if len(ts) > 3 else t_end, t_end)
        ticks: list = []

        def on(snap) -> None:
            v = snap.verdict or {}
            ticks.append((time.time(), len(snap.jobs), {j.pid: j for j in snap.jobs},
                          (v.get("evidence") or {}).get("own_pace") or {}))

        pids = set()
        copies = Copies(pids)
        try:
            with watching(pids, on, store=db):
                for e in examples:
                    copies.start(e, together_s + 60)
                time.sleep(together_s)
                t_end = time.time()
        finally:
            copies.close()
    ts = copies.stamps()
    lo = max(t[3] for t in ts if len(t) > 3)
    hi = min(min(t[-1] for t in ts if t), t_end)
    out: list[Stored] = []
    view = [(t, jobs, pace) for t, _, jobs, pace in ticks]
    for i, e in enumerate(examples):
        pid = copies.procs[i].pid
        got, src, last = [], set(), None
        for t, n, jobs, pace in ticks:
            j = jobs.get(pid)
            if j is None or not (lo <= t <= hi) or n < len(examples):
                continue
            last = pace.get(j.name) or last
            p = pace.get(j.name) or {}
            if p.get("slowdown") is not None and j.slowdown is not None:
                got.append(j.slowdown)
                src.add(j.slowdown_source)
        tr, ar = rate(ts[i], lo, hi), alone_rates.get(e)
        out.append({"example": e, "alone_rate": ar, "together_rate": tr,
                    "truth": ar / tr if ar and tr else None,
                    "slowdown": statistics.median(got) if got else None,
                    "sources": sorted(src), "ticks": len(got),
                    "stored_age_s": (last or {}).get("stored_age_s"),
                    "windowed": windowed(view, ts[i], ar, pid, lo, hi, len(examples)),
                    "why": (last or {}).get("why")})
    return out


def _f(x, f: str = ".2f") -> str:
    return "–" if x is None else format(x, f)


def _w(w: tuple[float | None, int]) -> str:
    return f"{_f(w[0])} ({w[1]} ticks)"


def _by(r: dict[str, Any]) -> str:
    """What paced it: its loader's write calls a second (batches) or its cores, alone → now."""
    w_alone, w_now, source = r["writes"]
    if source == "batches":
        return f"by batches: {_f(w_alone)} → {_f(w_now)} write calls/s"
    return f"{_f(r['cores'][0], '.3f')} → {_f(r['cores'][1], '.3f')} cores"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=None, help="scenarios whose name contains this")
    ap.add_argument("--alone-s", type=float, default=40.0)
    ap.add_argument("--together-s", type=float, default=45.0)
    ap.add_argument("--wait-policy", default=None, help="OMP_WAIT_POLICY for the scripts")
    ap.add_argument("--after", action="store_true",
                    help="all at once, the last copy alone after the others end: its earlier pace")
    ap.add_argument("--workers", type=int, default=None,
                    help="loader workers per script (default: verdict_threads.WORKERS, 1); 0: "
                         "none")
    ap.add_argument("--stored", action="store_true",
                    help="each script alone under one monitor, then all at once under another: "
                         "paced by the stored runs")
    ap.add_argument("--cuda", action="store_true",
                    help="a real GPU: copies of tests/external/gpu_plain.py on GPU 0")
    a = ap.parse_args()
    scenarios = GPU_SCENARIOS if a.cuda else SCENARIOS
    if a.workers is not None:
        import verdict_threads

        verdict_threads.WORKERS = a.workers
    if a.wait_policy:
        os.environ["OMP_WAIT_POLICY"] = a.wait_policy
    if a.stored:
        print(f"load average at the start: {os.getloadavg()[0]:.2f}")
        print("| scenario (all at once; each alone in an earlier monitor run) | copy | alone it/s "
              "(earlier run) | together it/s | true slowdown | gputop-dl live | from | stored "
              "run's age | live / truth | within 25 % | live / truth, each tick's window |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for name, examples in scenarios.items():
            if a.only and a.only not in name:
                continue
            for k, r in enumerate(stored(examples, a.alone_s, a.together_s), 1):
                ratio = r["slowdown"] / r["truth"] if r["slowdown"] and r["truth"] else None
                age = "–" if r["stored_age_s"] is None else f"{r['stored_age_s']:.0f} s"
                print(f"| {name} | {k} ({r['example']}) | {_f(r['alone_rate'])} | "
                      f"{_f(r['together_rate'])} | {_f(r['truth'])}× | {_f(r['slowdown'])}× "
                      f"({r['ticks']} ticks) | {', '.join(r['sources']) or '–'} | {age} | "
                      f"{_f(ratio)} | {'yes' if ratio and abs(ratio - 1) <= 0.25 else 'no'}"
                      f"{'' if r['stored_age_s'] is not None else ' (' + str(r['why']) + ')'} | "
                      f"{_w(r['windowed'])} |", flush=True)
        print(f"load average at the end: {os.getloadavg()[0]:.2f}")
        return
    if a.after:
        print("| scenario (last copy alone after) | together it/s | alone it/s | true slowdown | "
              "gputop-dl afterwards | / truth |")
        print("|---|---|---|---|---|---|")
        for name, examples in scenarios.items():
            if a.only and a.only not in name:
                continue
            r = after(examples, a.together_s, a.alone_s)
            ratio = r["earlier"] / r["truth"] if r["earlier"] and r["truth"] else None
            print(f"| {name} | {_f(r['together_rate'])} | {_f(r['alone_rate'])} | "
                  f"{_f(r['truth'])}× | {_f(r['earlier'])}× | {_f(ratio)} |", flush=True)
        return
    print(f"load average at the start: {os.getloadavg()[0]:.2f}")
    print("| scenario (first copy alone first) | alone it/s | together it/s | true slowdown | "
          "gputop-dl live | from | its pace | live / truth | within 25 % | verdicts | "
          "live / truth, each tick's window |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, examples in scenarios.items():
        if a.only and a.only not in name:
            continue
        r = staggered(examples, a.alone_s, a.together_s)
        ratio = r["slowdown"] / r["truth"] if r["slowdown"] and r["truth"] else None
        print(f"| {name} | {_f(r['alone_rate'])} | {_f(r['together_rate'])} | "
              f"{_f(r['truth'])}× | {_f(r['slowdown'])}× ({r['ticks']} ticks) | "
              f"{', '.join(r['sources']) or '–'} | {_f(r['pace'])}× "
              f"({_by(r)}) | {_f(ratio)} | "
              f"{'yes' if ratio and abs(ratio - 1) <= 0.25 else 'no'} | "
              f"{', '.join(r['kinds'])}{'' if r['pace'] else ' (' + str(r['why']) + ')'} | "
              f"{_w(r['windowed'])} |", flush=True)
        for k, tw in enumerate(r["twins"], 2):
            ratio = tw["slowdown"] / tw["truth"] if tw["slowdown"] and tw["truth"] else None
            print(f"| {name}, copy {k} (a twin{'' if tw['twin_pid'] else ': none lent'}) | "
                  f"{_f(r['alone_rate'])} (copy 1) | {_f(tw['together_rate'])} | "
                  f"{_f(tw['truth'])}× | {_f(tw['slowdown'])}× ({tw['ticks']} ticks) | "
                  f"{', '.join(tw['sources']) or '–'} | – | {_f(ratio)} | "
                  f"{'yes' if ratio and abs(ratio - 1) <= 0.25 else 'no'} | "
                  f"{'' if tw['twin_pid'] else str(tw['why'])} | {_w(tw['windowed'])} |",
                  flush=True)
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
