"""GPU energy on a real GPU: NVML's counter against nvidia-smi's power integral, a job's J/step
against the counter read around its own steps, and the counter read's cost.

    .venv/bin/python benchmarks/energy_check.py [--seconds 60] [--gpu 0]

Needs an NVIDIA GPU, nvidia-smi and torch (for the load). Three checks, each printed with its
figures and PASS or FAIL (the targets of docs/energy.md):

1. counter: `nvmlDeviceGetTotalEnergyConsumption`'s difference over the run against
   `nvidia-smi --query-gpu=power.draw -lms 100` integrated (trapezoids) over the same seconds,
   while a torch worker loads the GPU for the middle half; within 5 %.
2. J/step: the worker prints its step count with the time; gputop-dl's own figure
   (`EnergyLedger` fed by `Nvml.sample()` / `processes()` once a second, as the monitor does:
   its power over the last 10 s x the worker's step time) against the counter's joules between
   two of the worker's step lines / the steps between them; within 5 %.
3. cost: one `nvmlDeviceGetTotalEnergyConsumption` call (median of 2000) and `Nvml.sample()`
   with the counter and with it refused; the counter's share of the 1-s tick's NVML time.

Without a GPU it says why and exits 2.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from gputop_dl.analyse.energy import EnergyLedger  # noqa: E402
from gputop_dl.collect.nvml.gpus import Nvml  # noqa: E402
from gputop_dl.collect.nvml.base import F_ENERGY  # noqa: E402

WORKER = r"""
import sys, time, torch
dev = torch.device("cuda", int(sys.argv[1]))
end = time.time() + float(sys.argv[2])
a = torch.randn(4096, 4096, device=dev)
step = 0
print("ready", flush=True)
while time.time() < end:
    for _ in range(8):
        b = a @ a
    torch.cuda.synchronize(dev)
    step += 1
    print(f"step {step} {time.time():.6f}", flush=True)
"""


def _smi(gpu: int, out: list[tuple[float, float]], stop: threading.Event) -> None:
    """nvidia-smi's power.draw every 100 ms, with our own wall time of each line."""
    p = subprocess.Popen(["nvidia-smi", f"--id={gpu}", "--query-gpu=power.draw",
                          "--format=csv,noheader,nounits", "-lms", "100"],
                         stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None
        for line in p.stdout:
            try:
                out.append((time.time(), float(line.strip())))
            except ValueError:
                continue
            if stop.is_set():
                break
    finally:
        p.kill()
        p.wait()


def _integral(points: list[tuple[float, float]], t0: float, t1: float) -> float:
    pts = [(t, w) for t, w in points if t0 <= t <= t1]
    return sum((w0 + w1) / 2 * (u1 - u0) for (u0, w0), (u1, w1) in zip(pts, pts[1:]))


def _verdict(name: str, got: float, ref: float, tol: float = 0.05) -> bool:
    err = abs(got - ref) / ref if ref else float("inf")
    print(f"{name}: {got:.1f} against {ref:.1f} ({err * 100:.2f} %) "
          f"{'PASS' if err <= tol else 'FAIL'} (target {tol * 100:.0f} %)")
    return err <= tol


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--gpu", type=int, default=0)
    args = ap.parse_args()
    nv = Nvml()
    if nv.status != "ok":
        print(f"no GPU: {nv.status_detail}", file=sys.stderr)
        return 2
    m, h = nv._m, nv._devices[args.gpu].handle
    print(nv.status_detail)

    # 3. cost first, on an idle GPU
    fn = m.nvmlDeviceGetTotalEnergyConsumption
    times = []
    for _ in range(2000):
        t = time.perf_counter()
        fn(h)
        times.append(time.perf_counter() - t)
    call = statistics.median(times)
    with_ctr = statistics.median(_time(nv.sample, 500))
    for d in nv._devices:
        d.unsupported |= F_ENERGY
        d.energy.refuse_counter()
    without = statistics.median(_time(nv.sample, 500))
    nv.close()
    print(f"cost: one counter read {call * 1e6:.1f} us; sample() {with_ctr * 1e6:.0f} us with "
          f"the counter, {without * 1e6:.0f} us without ({(with_ctr - without) * 1e6:+.1f} us, "
          f"{(with_ctr - without) / with_ctr * 100:.1f} % of sample())")

    # 1 and 2: a loaded run
    nv = Nvml()
    ledger = EnergyLedger()
    smi: list[tuple[float, float]] = []
    stop = threading.Event()
    reader = threading.Thread(target=_smi, args=(args.gpu, smi, stop), daemon=True)
    reader.start()
    time.sleep(2.0)
    t0, e0 = time.time(), fn(h)
    nv.sample()
    time.sleep(args.seconds / 4)
    work = subprocess.Popen([sys.executable, "-c", WORKER, str(args.gpu), str(args.seconds / 2)],
                            stdout=subprocess.PIPE, text=True)
    steps: list[tuple[int, float]] = []
    lines = threading.Thread(target=lambda: [steps.append((int(x.split()[1]), float(x.split()[2])))
                                             for x in work.stdout or () if x.startswith("step")],
                             daemon=True)
    lines.start()
    per_step: list[float] = []
    ctr_at: dict[float, int] = {}
    while work.poll() is None:
        time.sleep(1.0)
        gpus, procs = nv.sample(), nv.processes()
        now = time.time()
        ctr_at[now] = fn(h)
        if len(steps) > 20:
            (n0, s0), (n1, s1) = steps[-20], steps[-1]
            step_s = (s1 - s0) / (n1 - n0)
            ledger.update(now, nv.status, gpus, procs, [("worker", work.pid, (work.pid,))])
            e = ledger.result("worker", work.pid, step_time_s=step_s)
            if e.per_step_j is not None and now - t0 > args.seconds / 4 + 12:
                per_step.append(e.per_step_j)
        else:
            ledger.update(now, nv.status, gpus, procs, [("worker", work.pid, (work.pid,))])
    lines.join(5)
    time.sleep(args.seconds / 4)
    t1, e1 = time.time(), fn(h)
    stop.set()
    reader.join(5)
    nv.close()
    ok = _verdict("counter J vs nvidia-smi power integral J", (e1 - e0) / 1000.0,
                  _integral(smi, t0, t1))
    # the counter around the worker's own steps (its middle half)
    mid = steps[len(steps) // 4: 3 * len(steps) // 4]
    if len(mid) > 2 and per_step:
        (na, ta), (nb, tb) = mid[0], mid[-1]
        near = sorted(ctr_at)
        ca = min(near, key=lambda t: abs(t - ta))
        cb = min(near, key=lambda t: abs(t - tb))
        span = [(t, ctr_at[t]) for t in near if ca <= t <= cb]
        if len(span) >= 2 and span[-1][0] > span[0][0]:
            # steps in the counter's own span, from the worker's step rate there
            rate = (nb - na) / (tb - ta)
            ref = (span[-1][1] - span[0][1]) / 1000.0 / (rate * (span[-1][0] - span[0][0]))
            ok = _verdict("J/step gputop-dl vs counter around the steps",
                          statistics.median(per_step), ref) and ok
    else:
        print("J/step: too few steps or figures to compare: FAIL")
        ok = False
    return 0 if ok else 1


def _time(fn, n: int) -> list[float]:
    fn()
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


if __name__ == "__main__":
    sys.exit(main())
