"""How looks on a fixed grid alias with a job whose steps lock to it (memory pair).

The pair of tests/test_memory_verdict_real.py (two copies of tests/external/disk_reader.py
whose files fit in the page cache one at a time, in one cgroup v1 memory group, reads
throttled by cgroup v1 blkio) is started as that test starts it; once the group re-reads a
file's worth of evicted pages, each job's process state is read every millisecond for 10 s.
Printed per job: its own step-time ratio (together / alone), its share of the dense samples in
`D`, and the share that looks every 100 ms would have read (the monitor's old schedule) over 20
grid starts 5 ms apart, against looks at a random moment of each 100 ms slot
(collect/diskio.look_times), 20 draws. Needs root and the v1 memory and blkio controllers. Run
it under the box's lock.

Usage: python benchmarks/look_aliasing.py
"""

import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tests.test_memory_verdict_real import BLKIO, MEMORY, SCRIPT, SIZE, refaults, start  # noqa: E402

SECONDS, SLOT = 10.0, 0.1


def state_at(samples: list[tuple[float, str]], times: list[float]) -> float:
    """The share of `times` at which the last dense sample before it found the job in D."""
    hits, i = 0, 0
    for t in times:
        while i + 1 < len(samples) and samples[i + 1][0] <= t:
            i += 1
        hits += samples[i][1] == "D"
    return hits / len(times)


def dense(pids: list[int]) -> dict[int, list[tuple[float, str]]]:
    out: dict[int, list[tuple[float, str]]] = {pid: [] for pid in pids}
    m0 = time.monotonic()
    while time.monotonic() - m0 < SECONDS:
        now = time.monotonic() - m0
        for pid in pids:
            try:
                with open(f"/proc/{pid}/stat", "rb") as fh:
                    data = fh.read()
                out[pid].append((now, data[data.rfind(b")") + 2:][:1].decode()))
            except OSError:
                pass
        time.sleep(0.001)
    return out


def main() -> None:
    d = tempfile.mkdtemp()
    files = [os.path.join(d, f"{n}.bin") for n in "ab"]
    for f in files:
        subprocess.run([sys.executable, SCRIPT, "--file", f, "--make", str(SIZE)], check=True)
    cgs = [os.path.join(MEMORY, f"alias-{os.getpid()}"), os.path.join(BLKIO, f"alias-{os.getpid()}")]
    for cg in cgs:
        os.makedirs(cg, exist_ok=True)
    jobs = []
    try:
        jobs, t_solo = start(files[:1], cgs, 6)
        solo = statistics.median(r["recent_step_s"] for r in jobs[0].finish() if r["t"] > t_solo + 1)
        jobs, _ = start(files, cgs, 25)
        base, deadline = refaults(cgs[0]), time.monotonic() + 60
        while refaults(cgs[0]) - base < (SIZE << 20) // 4096 and time.monotonic() < deadline:
            time.sleep(0.2)
        t0 = time.time()
        samples = dense([j.pid for j in jobs])
        t1 = time.time()
        own = [j.finish() for j in jobs]
    finally:
        for j in jobs:
            j.kill()
        for cg in cgs:
            for _ in range(50):
                try:
                    os.rmdir(cg)
                    break
                except OSError:
                    time.sleep(0.1)
    rng = random.Random(1)
    n = int(SECONDS / SLOT)
    for j, rep in zip(jobs, own):
        step = statistics.median(r["recent_step_s"] for r in rep if t0 <= r["t"] <= t1 + 0.3)
        s = samples[j.pid]
        grid = [state_at(s, [off / 1000 + k * SLOT for k in range(n)]) for off in range(0, 100, 5)]
        jit = [state_at(s, [(k + rng.random()) * SLOT for k in range(n)]) for _ in range(20)]
        print(f"pid {j.pid}: solo {solo * 1000:.1f} ms, together {step * 1000:.1f} ms "
              f"(ratio {step / solo:.2f}); dense D share {state_at(s, [t for t, _ in s]):.2f} "
              f"of {len(s)} samples; 100 ms grid: {min(grid):.2f}-{max(grid):.2f} "
              f"(sd {statistics.pstdev(grid):.3f}); random in each slot: {min(jit):.2f}-"
              f"{max(jit):.2f} (sd {statistics.pstdev(jit):.3f})")


if __name__ == "__main__":
    main()
