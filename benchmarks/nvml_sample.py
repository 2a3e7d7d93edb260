"""Cost of one `Nvml.sample()` tick: fake pynvml with 8 GPUs, and the real NVML when it works.

    .venv/bin/python benchmarks/nvml_sample.py [--calls 1000]

Prints the median (and p90) wall time per call. The fake measures the wrapper's own overhead;
the real number includes NVML itself (PCIe throughput is read at most every 5 s per GPU, so
the median excludes it; the max shows the PCIe ticks). A second line ticks the fake on a
simulated 1 Hz clock, so the reads made every few seconds (PCIe, clock-event and PCIe counters,
link state) land on the ticks they would land on in the monitor: its mean is the amortised cost
of one 1-second tick.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from gputop_dl.collect.nvml.gpus import Nvml  # noqa: E402
from tests.fakes.nvml import FakeProcess, FakePynvml  # noqa: E402


def _time(fn, calls: int) -> list[float]:
    fn()  # warm-up (first tick reads PCIe on every GPU)
    out = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def _report(label: str, times: list[float]) -> None:
    times = sorted(times)
    med = statistics.median(times)
    p90 = times[int(len(times) * 0.9)]
    print(f"{label}: median {med * 1e6:8.1f} us  p90 {p90 * 1e6:8.1f} us  "
          f"max {times[-1] * 1e6:8.1f} us  ({len(times)} calls)")


class _Tick1Hz:
    """A clock that moves one second each time it is read (one read per `sample()`)."""

    def __init__(self) -> None:
        self.t = 1_700_000_000.0

    def __call__(self) -> float:
        self.t += 1.0
        return self.t


def _fake(gpus: int = 8) -> FakePynvml:
    fake = FakePynvml(gpus=gpus)
    for i, g in enumerate(fake.gpus):
        g.processes = [FakeProcess(pid=1000 + i), FakeProcess(pid=2000 + i)]
        g.clock_reasons = 0x4 if i % 2 else 0x1
    return fake


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=1000)
    args = ap.parse_args()

    nv = Nvml(module=_fake())
    assert nv.status == "ok", nv.status
    _report("fake 8 GPUs  sample()   ", _time(nv.sample, args.calls))
    _report("fake 8 GPUs  processes()", _time(nv.processes, args.calls))
    nv.close()
    clock = _Tick1Hz()
    nv = Nvml(module=_fake(), clock=clock)
    times = _time(nv.sample, args.calls)
    _report("fake 8 GPUs  sample() at 1 Hz", times)
    kept = sorted(times)[: max(1, len(times) * 99 // 100)]  # the top 1 %: this box's scheduling
    print(f"fake 8 GPUs  sample() at 1 Hz: mean {statistics.fmean(kept) * 1e6:8.1f} us "
          "(amortised over the ticks, the slowest 1 % dropped)")
    nv.close()

    real = Nvml()
    if real.status == "ok":
        print(f"real NVML: {real.status_detail}")
        _report(f"real {real.device_count()} GPU(s) sample()   ", _time(real.sample, args.calls))
        _report(f"real {real.device_count()} GPU(s) processes()", _time(real.processes, args.calls))
    else:
        print(f"real NVML: status {real.status!r} - {real.status_detail}")
    real.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
