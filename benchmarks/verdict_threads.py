"""Estimated slowdown of multi-threaded jobs (torch's intra-op pool) against their own rates.

    python benchmarks/verdict_threads.py [--only dcgan] [--alone-s 15] [--together-s 25]
                                         [--raw FILE.json] [--native]
                                         [--wait-policy passive]

Ground truth: tests/external/mt_examples.py, PyTorch's dcgan, mnist and word_language_model
examples shrunk, each with `torch.set_num_threads(2)` (an OpenMP intra-op pool of two) and one
loader worker, printing a timestamp per iteration. Per scenario, on this box:

1. each script alone, for its own iteration rate (it/s after its warm-up);
2. the scenario's copies started at once by hand (no gputop-dl in them), watched by the
   monitor's engine as `gputop-dl` runs (found jobs, this run's scripts only): each job's
   estimated slowdown is the median of its estimates over the ticks when every copy ran and a
   verdict was judged;
3. truth = alone it/s / together it/s, the together rate from each script's own timestamps
   within the span when every copy was past its warm-up and still running.

Run it under the box's lock (`flock /tmp/gputop-box.lock ...`): anything else running moves both
figures. Prints a Markdown table (script, threads, alone it/s, together it/s, true ratio, the
mean-thread model's estimate from the same ticks (the model before intra-op pools), gputop-dl's
estimate, estimate / truth, within 25 %) and the load average. `--raw`: also write
each tick's per-thread schedstat deltas of the jobs (model work, not needed for the table).

`--native`: also the spin-share model (analyse/live/pool_progress.py, not used live): one py-spy
`--native` burst per job, `NATIVE["at"]` s after every copy is past its warm-up (alone: the
script alone), all at once; its columns are the main thread's share of samples inside the
OpenMP runtime, the model's `1 / u` and model / truth, and a second table has each script
alone: its share, its model (1 when right) and its rate during the burst (py-spy pauses the
process to read native stacks). The rates and the live estimates leave the burst's span out.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from gputop_dl.analyse.live.cpu_wait_model import cpu_speedup  # noqa: E402
from gputop_dl.analyse.live.pool_progress import progress_slowdown, spin_share  # noqa: E402
from gputop_dl.collect.pyspy.gomp_spin import record_spin  # noqa: E402
from gputop_dl.collect.nvml.gpus import Nvml  # noqa: E402
from gputop_dl.runner import monitor_engine  # noqa: E402
from tests.fakes.by_hand import never_left_stopped, only_found  # noqa: E402

SCRIPT = os.path.join(os.path.dirname(HERE), "tests", "external", "mt_examples.py")
THREADS, WORKERS = 2, 1
EXAMPLES = {  # name: the script's arguments (sized for a few iterations a second alone)
    "dcgan": ["dcgan", "--width", "32", "--batch", "64"],
    "mnist": ["mnist", "--batch", "64"],
    "lm": ["lm", "--width", "128", "--batch", "20"],
}
GPU_SCRIPT = os.path.join(os.path.dirname(HERE), "tests", "external", "gpu_plain.py")
GPU_EXAMPLES = {  # name: gpu_plain.py's arguments (a real GPU only: own_pace.py --cuda)
    "gpu": ["--batch", "8192", "--data-ms", "5", "--stamps", "--report-every", "0"],
}
SCENARIOS = {  # name: the examples started together
    "dcgan pair": ("dcgan", "dcgan"),
    "mnist pair": ("mnist", "mnist"),
    "lm pair": ("lm", "lm"),
    "dcgan + mnist + lm": ("dcgan", "mnist", "lm"),
}


def argv(example: str, seconds: float) -> list[str]:
    if example in GPU_EXAMPLES:
        return [sys.executable, GPU_SCRIPT, *GPU_EXAMPLES[example], "--workers", str(WORKERS),
                "--seconds", str(seconds)]
    return [sys.executable, SCRIPT, *EXAMPLES[example], "--threads", str(THREADS),
            "--workers", str(WORKERS), "--seconds", str(seconds)]


def stamps(text: str) -> list[float]:
    return [float(ln.split()[2]) for ln in text.splitlines() if ln.startswith("it ")]


def rate(ts: list[float], lo: float, hi: float, skip: tuple[float, float] | None = None
         ) -> float | None:
    """Iterations a second between `lo` and `hi`; `skip`: a span (a native burst) left out,
    its iterations and its time."""
    inside = [t for t in ts if lo <= t <= hi]
    if len(inside) <= 2:
        return None
    span, its = inside[-1] - inside[0], len(inside) - 1
    if skip is not None:
        a, b = max(skip[0], inside[0]), min(skip[1], inside[-1])
        if b > a:
            its -= sum(1 for t in inside if a < t <= b)
            span -= b - a
    return its / span if span > 0 and its > 0 else None


NATIVE = {"at": 6.0, "seconds": 6.0, "rate": 10}  # one native burst per job, `at` s into the span


def native_bursts(pids: list[int], ready, out: dict) -> None:
    """Once `ready()`, one py-spy `--native` burst on every job at once (collect/pyspy/gomp_spin.py):
    out[pid] = (SpinSample or error, burst start, burst end) in time.time()."""
    import threading

    while not ready():
        time.sleep(0.2)
    time.sleep(NATIVE["at"])

    def one(pid: int) -> None:
        t0 = time.time()
        got, err = record_spin(pid, NATIVE["seconds"], int(NATIVE["rate"]))
        out[pid] = (got if err is None else err, t0, time.time())

    ths = [threading.Thread(target=one, args=(p,), daemon=True) for p in pids]
    for t in ths:
        t.start()
    for t in ths:
        t.join(NATIVE["seconds"] + 60)


def _lines(proc: subprocess.Popen, into: list[str]) -> None:
    for ln in proc.stdout or ():
        into.append(ln)


def started(lines: list[str], n: int = 4) -> bool:
    return sum(1 for ln in lines if ln.startswith("it ")) > n


def alone(example: str, seconds: float, native: bool = False) -> dict:
    """The script alone: its rate (outside the native burst, with `native`), and the burst's
    spin share, spin-share estimate and the rate during it (what py-spy's pauses cost)."""
    import threading

    p = subprocess.Popen(argv(example, seconds), stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True)
    lines: list[str] = []
    rd = threading.Thread(target=_lines, args=(p, lines), daemon=True)
    rd.start()
    got: dict = {}
    if native:
        native_bursts([p.pid], lambda: started(lines) or p.poll() is not None, got)
    p.wait(timeout=600)
    rd.join(10)
    ts = stamps("".join(lines))
    row: dict = {"rate": None}
    if len(ts) <= 5:
        return row
    b = got.get(p.pid)
    row["rate"] = rate(ts, ts[3], ts[-1], (b[1], b[2]) if b else None)
    if b and not isinstance(b[0], str):
        row.update(spin=spin_share(b[0]), est=progress_slowdown(b[0]),
                   during=rate(ts, b[1], b[2]))
    elif b:
        row["error"] = b[0]
    return row


def thread_stats(pids) -> dict:
    """Each job's threads (its processes'): tid -> [pid, comm, ran ns, waited ns, time slices,
    voluntary and involuntary context switches]."""
    out: dict = {}
    for root in pids:
        tree = [root]
        try:
            with open(f"/proc/{root}/task/{root}/children") as f:
                tree += [int(c) for c in f.read().split()]
        except OSError:
            continue
        threads = {}
        for pid in tree:
            try:
                tids = os.listdir(f"/proc/{pid}/task")
            except OSError:
                continue
            for tid in tids:
                try:
                    with open(f"/proc/{pid}/task/{tid}/comm") as f:
                        comm = f.read().strip()
                    with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                        ran, waited, slices = map(int, f.read().split())
                    with open(f"/proc/{pid}/task/{tid}/status") as f:
                        sw = {k: int(v) for k, v in (ln.split(":") for ln in f
                              if ln.endswith("ctxt_switches:") or "ctxt_switches:" in ln)}
                except (OSError, ValueError):
                    continue
                threads[tid] = [pid, comm, ran, waited, slices,
                                sw.get("voluntary_ctxt_switches"),
                                sw.get("nonvoluntary_ctxt_switches")]
        out[root] = threads
    return out


def together(examples: tuple[str, ...], seconds: float, raw: list | None,
             native: bool = False) -> dict:
    import threading

    procs = [subprocess.Popen(argv(e, seconds), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              text=True, start_new_session=True) for e in examples]
    pids = {p.pid for p in procs}
    lines: list[list[str]] = [[] for _ in procs]
    readers = [threading.Thread(target=_lines, args=(p, ln), daemon=True)
               for p, ln in zip(procs, lines)]
    for rd in readers:
        rd.start()
    got: dict = {}
    spy = threading.Thread(target=native_bursts, daemon=True, args=(
        [p.pid for p in procs], lambda: all(started(ln) for ln in lines)
        or any(p.poll() is not None for p in procs), got)) if native else None
    if spy is not None:
        spy.start()
    ticks: list = []
    stopped: list = []

    def on(snap):
        if len(snap.jobs) == len(procs):
            ticks.append((snap.time, snap.verdict, {j.pid: j for j in snap.jobs}))
            stopped.append(not never_left_stopped(pids))
            if raw is not None:
                raw.append({"t": time.time(), "threads": thread_stats(pids),
                            "jobs": {j.pid: {"slowdown": j.slowdown,
                                             "cpu_wait": j.cpu_wait_fraction,
                                             "cores": j.cpu_cores, "pool": j.cpu_pool}
                                     for j in snap.jobs}})

    eng = monitor_engine(Nvml(), interval=1.0, record=False, found=only_found(pids))
    eng.subscribe(on)
    eng.start()
    try:
        for p in procs:
            p.wait(timeout=seconds + 300)
        for rd in readers:
            rd.join(10)
        if spy is not None:
            spy.join(60)
        outs = ["".join(ln) for ln in lines]
    finally:
        eng.request_stop()
        eng.join(10)
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    ts = [stamps(o) for o in outs]
    lo = max(t[3] for t in ts if len(t) > 3)
    hi = min(t[-1] for t in ts if t)
    spans = [(b[1] - 1.0, b[2] + 1.0) for b in got.values()]
    burst = (min(a for a, _ in spans), max(b for _, b in spans)) if spans else None
    judged = [t for t in ticks if t[1] and t[1]["kind"] != "insufficient-data"
              and not (burst and burst[0] <= t[0] <= burst[1])]  # py-spy's pauses move waits
    rows = []
    for p, t in zip(procs, ts):
        ests = [jobs[p.pid].slowdown for _, _, jobs in judged
                if p.pid in jobs and jobs[p.pid].slowdown is not None]
        # the model before intra-op pools (the mean thread, all waits the other jobs')
        means = [cpu_speedup(j.cpu_wait_fraction, j.cpu_cores, os.cpu_count() or 1)
                 for _, _, jobs in judged if (j := jobs.get(p.pid)) is not None
                 and j.cpu_wait_fraction is not None]
        evidence = next((jobs[p.pid] for _, _, jobs in reversed(judged) if p.pid in jobs), None)
        b = got.get(p.pid)
        spun = b[0] if b and not isinstance(b[0], str) else None
        rows.append({"pid": p.pid, "rate": rate(t, lo, hi, burst),
                     "native": progress_slowdown(spun) if spun else None,
                     "spin": spin_share(spun) if spun else None,
                     "native_error": b[0] if b and spun is None else None,
                     "estimate": statistics.median(ests) if ests else None,
                     "mean_thread": statistics.median(means) if means else None,
                     "ticks": len(ests), "job": evidence})
    kinds = sorted({v["kind"] for _, v, _ in judged})
    return {"rows": rows, "kinds": kinds, "stopped": any(stopped), "span": hi - lo}


def _f(x, f: str) -> str:
    return "–" if x is None else format(x, f)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=None, help="scenarios whose name contains this")
    ap.add_argument("--alone-s", type=float, default=15.0)
    ap.add_argument("--together-s", type=float, default=25.0)
    ap.add_argument("--raw", default=None)
    ap.add_argument("--wait-policy", choices=("default", "passive"), default="default",
                    help="passive: the scripts run with OMP_WAIT_POLICY=PASSIVE (their pool's "
                         "threads sleep, not spin, while they wait for each other)")
    ap.add_argument("--native", action="store_true",
                    help="also one py-spy --native burst per job: the spin-share model")
    a = ap.parse_args()
    scen = {k: v for k, v in SCENARIOS.items() if not a.only or a.only in k}
    if a.wait_policy == "passive":
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"  # the scripts inherit it
    raw: dict = {}
    lines = []
    with tempfile.TemporaryDirectory() as work:
        os.environ["GPUTOP_DL_HOME"] = os.path.join(work, "home")
        solo = {e: alone(e, a.alone_s, a.native)
                for e in sorted({e for v in scen.values() for e in v})}
        for name, examples in scen.items():
            raw[name] = []
            r = together(examples, a.together_s, raw[name] if a.raw else None, a.native)
            for e, row in zip(examples, r["rows"]):
                base = solo[e]["rate"]
                truth = base / row["rate"] if base and row["rate"] else None
                est = row["estimate"]
                ratio = est / truth if est and truth else None
                raw.setdefault("_truth", []).append({"scenario": name, "example": e,
                                                     "pid": row["pid"], "truth": truth})
                cells = [name, e, str(THREADS), _f(base, ".2f"), _f(row["rate"], ".2f"),
                         _f(truth, ".2f"), _f(row["mean_thread"], ".2f"), _f(est, ".2f"),
                         _f(ratio, ".2f"), "yes" if ratio and abs(ratio - 1) <= 0.25 else "no"]
                if a.native:
                    nat = row["native"]
                    cells += [_f(row["spin"], ".0%"), _f(nat, ".2f"),
                              _f(nat / truth if nat and truth else None, ".2f")]
                lines.append("| " + " | ".join(cells) + " |")
            lines.append(f"| {name}: verdict {', '.join(r['kinds']) or '–'}, span "
                         f"{r['span']:.0f} s, a job paused: {'YES' if r['stopped'] else 'never'} "
                         + "| " * (12 if a.native else 9) + "|")
    print(f"load1 at the end: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; torch threads "
          f"{THREADS}, loader workers {WORKERS} per job, OMP_WAIT_POLICY "
          f"{os.environ.get('OMP_WAIT_POLICY', 'unset')}")
    head = ["scenario", "script", "threads", "alone it/s", "together it/s", "true slowdown",
            "mean-thread model", "gputop-dl estimate", "estimate / truth", "within 25 %"]
    if a.native:
        head += ["main thread in libgomp", "spin-share model", "model / truth"]
    print("| " + " | ".join(head) + " |")
    print("|---|---|" + "---:|" * 7 + "---|" + ("---:|" * 3 if a.native else ""))
    for ln in lines:
        print(ln)
    if a.native:
        print("\n| script | alone it/s | main thread in libgomp alone | spin-share model alone "
              "| it/s during the native burst |\n|---|---:|---:|---:|---:|")
        for e, row in solo.items():
            print(f"| {e} | {_f(row['rate'], '.2f')} | {_f(row.get('spin'), '.0%')} | "
                  f"{_f(row.get('est'), '.2f')} | {_f(row.get('during'), '.2f')} |"
                  + (f" {row['error']}" if row.get("error") else ""))
    if a.raw:
        with open(a.raw, "w") as f:
            json.dump(raw, f)


if __name__ == "__main__":
    main()
