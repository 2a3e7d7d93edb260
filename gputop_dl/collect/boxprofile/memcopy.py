"""Memory copy rate: one process copying a large buffer into another with memcpy, timed.

`copy_rate(seconds, mib)` copies a `mib` MiB bytearray into another through a memoryview slice
assignment (CPython's memcpy of the whole block) until `seconds` have passed, and returns
(bytes copied, seconds). Each byte copied is read once and written once; the rate counts it
once (as `dd` and STREAM's "Copy" count a copy). Run as a module it waits until the wall time
START, copies until END, and prints "BYTES SECONDS": the all-threads figure starts one per CPU.
Standard library only: the monitor's light install has no numpy and never imports torch.
"""

from __future__ import annotations

import sys
import time


def buffers(mib: int) -> tuple[memoryview, memoryview]:
    """Two `mib` MiB buffers, both touched once (page faults are not copies)."""
    s, d = memoryview(bytearray(b"\x5a") * (mib << 20)), memoryview(bytearray(mib << 20))
    d[:] = s
    return s, d


def copy_rate(seconds: float, mib: int = 64, until: float | None = None,
              bufs: tuple[memoryview, memoryview] | None = None) -> tuple[int, float]:
    s, d = bufs or buffers(mib)
    done, t0 = 0, time.perf_counter()
    end = t0 + seconds if until is None else None
    while True:
        d[:] = s
        done += len(s)
        now = time.perf_counter()
        if (end is not None and now >= end) or (until is not None and time.time() >= until):
            return done, now - t0


def main(argv: list[str]) -> int:
    start, end, mib = float(argv[0]), float(argv[1]), int(argv[2])
    bufs = buffers(mib)  # allocated and touched before the start line
    while time.time() < start:
        time.sleep(min(0.01, max(0.0, start - time.time())))
    done, secs = copy_rate(0, mib, until=end, bufs=bufs)
    print(done, secs)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
