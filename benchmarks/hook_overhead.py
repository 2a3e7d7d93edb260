"""Samples/s of a plain training script with and without gputop-dl's start-up hook.

Usage: python benchmarks/hook_overhead.py [--runs 5] [--seconds 3] [--batch 16]
Each run is a fresh `python` process training a tiny CNN on random tensors (DataLoader,
num_workers=0) for about `--seconds`; runs alternate plain / hooked (A/B/A/B...). The hooked
runs get exactly what a `command` workload gets: the hook's folder first on PYTHONPATH and
GPUTOP_DL_EVENTS. Prints the medians and their ratio (target: overhead <= 1 %), then the
start-up cost of the hook for a script that never imports torch (`python -c pass`).

`--phases`: the step-phase timing, in-process: a 40-module MLP trained from a
DataLoader, passes alternating plain / hooked (the DataLoader patch and the phase patches on
Module.__call__, Tensor.to, backward and the optimizer hooks), thread CPU time per step. Twice:
with the batch sized for a ~10 ms step (the ratio; on a loaded box its noise is several %), and
with width-8 tensors (the same calls, so the same absolute cost, on a step short enough that
the difference is resolved): that cost over the 10 ms step is the overhead (target <= 1 %).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)

from gputop_dl.injob.hook import SITE_DIR  # noqa: E402


def child(seconds: float, batch: int) -> None:
    """The user's script: no gputop_dl in it."""
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(0)
    torch.set_num_threads(1)
    data = TensorDataset(torch.randn(batch * 64, 3, 16, 16), torch.randint(0, 10, (batch * 64,)))
    loader = DataLoader(data, batch_size=batch, shuffle=True, num_workers=0, drop_last=True)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                          nn.Flatten(), nn.Linear(16, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()

    def step(x, y):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        loss.item()

    for x, y in loader:  # warm-up: one epoch
        step(x, y)
    n, t0, c0 = 0, time.perf_counter(), time.process_time()
    while time.perf_counter() - t0 < seconds:
        for x, y in loader:
            step(x, y)
            n += len(x)
    print(json.dumps({"samples_per_s": n / (time.perf_counter() - t0),
                      "samples_per_cpu_s": n / (time.process_time() - c0)}))


def run(hooked: bool, seconds: float, batch: int, events: str) -> dict:
    env = dict(os.environ)
    env.pop("GPUTOP_DL_EVENTS", None)
    if hooked:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (SITE_DIR, env.get("PYTHONPATH")) if p)
        env["GPUTOP_DL_EVENTS"] = events
    out = subprocess.run([sys.executable, __file__, "--child", "--seconds", str(seconds),
                          "--batch", str(batch)], env=env, capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def per_step_us(events: str) -> float:
    """What the hook adds to one `next(loader)`: min over passes, patched vs not, in-process."""
    import torch
    import torch.utils.data.dataloader as dl

    from gputop_dl.injob.hook import dlhook as hook

    loader = dl.DataLoader(torch.utils.data.TensorDataset(torch.randn(16 * 2000, 4)), batch_size=16)

    def one_pass() -> float:
        t0 = time.perf_counter()
        for _ in loader:
            pass
        return (time.perf_counter() - t0) / len(loader)

    orig = dl.DataLoader.__iter__, dl._BaseDataLoaderIter.__next__
    rep = hook.Reporter(events + ".inproc", True)
    hook.patch_dataloader(dl, hook.Tracker(rep), rep)
    patched = dl.DataLoader.__iter__, dl._BaseDataLoaderIter.__next__
    base, hooked = [], []
    for _ in range(9):
        for pair, out in ((orig, base), (patched, hooked)):
            dl.DataLoader.__iter__, dl._BaseDataLoaderIter.__next__ = pair
            out.append(one_pass())
    dl.DataLoader.__iter__, dl._BaseDataLoaderIter.__next__ = orig
    rep.close()
    return (min(hooked) - min(base)) * 1e6


def phases_overhead(step_ms: float = 10.0, passes: int = 9, steps: int = 30,
                    width: int = 256, batch: int | None = None) -> dict:
    """Plain vs hooked step time of the same loop in this process (see the module doc)."""
    import torch
    import torch.utils.data.dataloader as dl
    from torch import nn

    from gputop_dl.injob.hook import stepclock

    torch.manual_seed(0)
    torch.set_num_threads(1)
    layers = []
    for _ in range(20):
        layers += [nn.Linear(width, width), nn.ReLU()]
    model = nn.Sequential(*layers)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    loss_fn = nn.MSELoss()

    def make_loader(batch: int):
        data = torch.utils.data.TensorDataset(torch.randn(batch * steps, width),
                                              torch.randn(batch * steps, width))
        return dl.DataLoader(data, batch_size=batch)

    def one_pass(loader, clock=time.thread_time) -> float:
        """Seconds per step of this thread's CPU (1 torch thread): other processes on a
        loaded box stretch the wall time, not this."""
        t0 = clock()
        for x, y in loader:
            x, y = x.to("cpu"), y.to("cpu")
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            opt.step()
        return (clock() - t0) / len(loader)

    if batch is None:
        batch = 32
        for _ in range(3):  # calibrate the batch to a step of about step_ms
            t = one_pass(make_loader(batch))
            batch = max(1, int(batch * step_ms / 1000 / t))
    loader = make_loader(batch)
    from gputop_dl.injob.hook import dlhook as hook
    orig = dl.DataLoader.__iter__, dl._BaseDataLoaderIter.__next__
    rep = hook.Reporter(tempfile.mktemp(suffix=".jsonl"), True)
    tracker = hook.Tracker(rep)
    hook.patch_dataloader(dl, tracker, rep)
    patched = dl.DataLoader.__iter__, dl._BaseDataLoaderIter.__next__
    sc = stepclock.StepClock()
    base, hooked = [], []
    for _ in range(passes):
        dl.DataLoader.__iter__, dl._BaseDataLoaderIter.__next__ = orig
        base.append(one_pass(loader))
        dl.DataLoader.__iter__, dl._BaseDataLoaderIter.__next__ = patched
        undo = stepclock.patch_torch(torch, sc)
        tracker.clock = sc
        hooked.append(one_pass(loader))
        for u in undo:
            u()
    dl.DataLoader.__iter__, dl._BaseDataLoaderIter.__next__ = orig
    rep.close()
    b, h = min(base), min(hooked)
    return {"batch": batch, "plain_ms": b * 1000, "hooked_ms": h * 1000,
            "per_step_us": (h - b) * 1e6, "overhead": h / b - 1,
            "pair_us": statistics.median(y - x for x, y in zip(base, hooked)) * 1e6,
            "median_ratio": statistics.median(hooked) / statistics.median(base)}


def per_call_us(reps: int = 7, n: int = 20000) -> dict:
    """What the phase patches add to one call (min of `reps` timeit runs, µs): a nested
    Module.__call__ (inside another phase: one attribute test) and an outermost one (the
    clock's enter/leave too), on a ReLU of 4 numbers."""
    import timeit

    import torch

    from gputop_dl.injob.hook import stepclock

    m, x = torch.nn.ReLU(), torch.randn(4)
    sc = stepclock.StepClock()

    def t(f):
        return min(timeit.repeat(f, number=n, repeat=reps)) / n * 1e6

    plain = t(lambda: m(x))
    undo = stepclock.patch_torch(torch, sc)
    try:
        outer = t(lambda: (m(x), sc.take()))
        sc.active = "forward"
        nested = t(lambda: m(x))
        sc.active = None
        take = t(sc.take)
    finally:
        for u in undo:
            u()
    return {"nested": nested - plain, "outer": outer - take - plain}


def startup_ms(hooked: bool, events: str, n: int = 21) -> float:
    """Median wall time of `python -c pass` (a script that never imports torch).

    With bytecode caching on, as in a normal install: under PYTHONDONTWRITEBYTECODE the hook's
    two files are compiled at every start (about 10 ms more)."""
    env = dict(os.environ)
    env.pop("GPUTOP_DL_EVENTS", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if hooked:
        env.update(PYTHONPATH=SITE_DIR, GPUTOP_DL_EVENTS=events)
    subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)  # writes the .pyc
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--phases", action="store_true", help="only the step-phase overhead")
    ap.add_argument("--step-ms", type=float, default=10.0)
    a = ap.parse_args()
    if a.child:
        child(a.seconds, a.batch)
        return
    if a.phases:
        r = phases_overhead(a.step_ms)
        print("step phases, 40-module MLP (20 Linear + ReLU), 1 thread, thread CPU time per "
              "step, min of 9 passes per side, alternating")
        print(f"width 256, batch {r['batch']}: plain {r['plain_ms']:.3f} ms/step, hooked "
              f"{r['hooked_ms']:.3f} ms/step ({100 * r['overhead']:+.2f} %, ratio of medians "
              f"{r['median_ratio']:.4f})")
        t = phases_overhead(width=8, batch=2, passes=31, steps=200)
        print(f"width 8, batch 2 (same calls): plain {1000 * t['plain_ms']:.1f} µs/step, hooked "
              f"{1000 * t['hooked_ms']:.1f} µs/step (min of 31): +{t['per_step_us']:.1f} µs per step "
              f"(median of pair differences {t['pair_us']:.1f} µs) = "
              f"{100 * t['per_step_us'] / (1000 * r['plain_ms']):.2f} % of the "
              f"{r['plain_ms']:.1f} ms step (target <= 1 %)")
        c = per_call_us()
        est = 5 * c["outer"] + 40 * c["nested"]
        print(f"per call: nested Module.__call__ +{c['nested']:.2f} µs, an outermost phase "
              f"+{c['outer']:.2f} µs; this loop's step (5 outermost phases, 40 nested module "
              f"calls): about {est:.0f} µs = {100 * est / (1000 * r['plain_ms']):.2f} % of "
              f"{r['plain_ms']:.1f} ms, plus the DataLoader hook's step event")
        return
    events = os.path.join(tempfile.mkdtemp(), "events.jsonl")
    plain, hooked = [], []
    for _ in range(a.runs):
        plain.append(run(False, a.seconds, a.batch, events))
        hooked.append(run(True, a.seconds, a.batch, events))
    with open(events, encoding="utf-8") as f:
        steps = sum(1 for line in f if '"ev":"step"' in line)
    print(f"tiny CNN, 16 px, batch {a.batch}, 1 thread, {a.runs} x {a.seconds:.0f} s per side, "
          f"{steps} hooked steps recorded")
    for key, unit in (("samples_per_s", "samples/s"), ("samples_per_cpu_s", "samples/CPU-s")):
        xa, xb = [r[key] for r in plain], [r[key] for r in hooked]
        pa, pb = statistics.median(xa), statistics.median(xb)
        ratios = [b / p for p, b in zip(xa, xb)]
        print(f"plain:  median {pa:.1f} {unit}  ({', '.join(f'{x:.1f}' for x in xa)})")
        print(f"hooked: median {pb:.1f} {unit}  ({', '.join(f'{x:.1f}' for x in xb)})")
        print(f"  ratio hooked/plain: of medians {pb / pa:.4f}, median of per-pair ratios "
              f"{statistics.median(ratios):.4f}  (target >= 0.99)")
    print(f"hook cost per step, in-process (min of 9 passes): {per_step_us(events):.1f} µs")
    s0, s1 = startup_ms(False, events), startup_ms(True, events)
    print(f"start-up of `python -c pass`: {s0:.1f} ms plain, {s1:.1f} ms hooked "
          f"(+{s1 - s0:.1f} ms, torch not imported)")


if __name__ == "__main__":
    main()
