"""A trainer's minor page faults a batch, alone and beside a copy: do they count its steps?

    python benchmarks/trainer_faults.py KIND [--examples CHECKOUT] [--alone-s 40] [--together-s 70]
    KIND: wlm, mnist, dcgan (PyTorch's own examples, unmodified: a checkout of pytorch/examples)
          or mt-lm, mt-mnist, mt-dcgan (tests/external/mt_examples.py; WORKERS=0 in the
          environment: no loader workers)

One copy alone for `--alone-s` past its warm-up, then a second beside it for `--together-s`;
the first copy's `minflt` and CPU seconds (/proc/PID/stat, every 0.5 s) against its own
batches (the lines it prints: word_language_model's and mnist's every 5 batches, dcgan's and
mt_examples' every one). Prints, alone and together (from 25 s after the second started), its
batches a second, page faults a second and a batch, CPU a batch, and the slowdown by its
batches (the truth), by its page faults and by its CPU. Tried as a live pace for jobs without
loader workers and not kept: a batch's page faults move from run to run (docs/validation.md,
"A trainer's page faults: tried, not kept"). Run it under the box's lock.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def command(kind: str, examples: str | None, work: str
            ) -> tuple[list[str], str, int, Callable[[str], bool]]:
    """argv, cwd, batches a line, which lines count."""
    if kind.startswith("mt-"):
        import verdict_threads

        verdict_threads.WORKERS = int(os.environ.get("WORKERS", verdict_threads.WORKERS))
        return (verdict_threads.argv(kind[3:], 600), work, 1, lambda ln: ln.startswith("it "))
    if examples is None:
        raise SystemExit(f"{kind}: needs --examples (a checkout of pytorch/examples)")
    if kind == "wlm":
        from step_beats import MS, corpus

        corpus(os.path.join(work, "wlm-data"))
        return ([sys.executable, "-u", f"{examples}/word_language_model/main.py", "--data",
                 f"{work}/wlm-data", "--log-interval", "5", "--epochs", "1000", "--save",
                 f"{work}/wlm.pt"], f"{examples}/word_language_model", 5,
                lambda ln: MS.search(ln) is not None)
    if kind == "mnist":
        from pytorch_examples import fake_mnist

        fake_mnist(f"{work}/data", 60000, 1000)
        os.makedirs(f"{work}/run", exist_ok=True)
        return ([sys.executable, "-u", f"{examples}/mnist/main.py", "--no-accel", "--epochs",
                 "100", "--log-interval", "5"], f"{work}/run", 5,
                lambda ln: ln.startswith("Train Epoch"))
    if kind == "dcgan":
        os.makedirs(f"{work}/dc", exist_ok=True)
        return ([sys.executable, "-u", f"{examples}/dcgan/main.py", "--dataset", "fake",
                 "--workers", "1", "--outf", f"{work}/dc", "--niter", "100"], work, 1,
                lambda ln: ln.startswith("[") and "Loss_D" in ln)
    raise SystemExit(f"unknown KIND {kind!r}")


def stat(pid: int) -> tuple[int, float]:
    """minflt and CPU seconds of one process."""
    with open(f"/proc/{pid}/stat") as f:
        s = f.read()
    fields = s[s.rindex(")") + 2:].split()
    return int(fields[7]), (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kind")
    ap.add_argument("--examples", default=None)
    ap.add_argument("--alone-s", type=float, default=40.0)
    ap.add_argument("--together-s", type=float, default=70.0)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as work:
        argv, cwd, per, counts = command(a.kind, a.examples and os.path.abspath(a.examples), work)

        def start() -> tuple[subprocess.Popen, list[tuple[float, str]]]:
            p = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 text=True, start_new_session=True)
            lines: list[tuple[float, str]] = []
            threading.Thread(target=lambda: [lines.append((time.time(), ln))
                                             for ln in p.stdout or ()], daemon=True).start()
            return p, lines

        first, lines = start()
        procs = [first]
        readings: list[tuple[float, tuple[int, float]]] = []
        try:
            while sum(1 for _, ln in lines if counts(ln)) < 4 and first.poll() is None:
                time.sleep(0.2)
            t_alone = time.time()
            while time.time() < t_alone + a.alone_s:
                readings.append((time.time(), stat(first.pid)))
                time.sleep(0.5)
            procs.append(start()[0])
            t_second = time.time()
            while time.time() < t_second + a.together_s:
                readings.append((time.time(), stat(first.pid)))
                time.sleep(0.5)
        finally:
            for p in procs:
                os.killpg(p.pid, 9)
                p.wait()

    def window(lo: float, hi: float) -> tuple[float | None, float, float]:
        r = [x for x in readings if lo <= x[0] <= hi]
        (t0, (f0, c0)), (t1, (f1, c1)) = r[0], r[-1]
        ts = [t for t, ln in lines if counts(ln) and t0 <= t <= t1]
        rate = per * (len(ts) - 1) / (ts[-1] - ts[0]) if len(ts) > 2 else None
        return rate, (f1 - f0) / (t1 - t0), (c1 - c0) / (t1 - t0)

    alone = window(t_alone + 5, t_second)
    tog = window(t_second + 25, t_second + a.together_s)
    policy = os.environ.get("OMP_WAIT_POLICY", "default")
    print(f"{a.kind} (OMP_WAIT_POLICY {policy}, WORKERS {os.environ.get('WORKERS', '-')})")
    print("| | batches/s | page faults/s | page faults a batch | CPU a batch (s) |")
    print("|---|---:|---:|---:|---:|")
    for name, (rate, flt, cpu) in (("alone", alone), ("beside a copy", tog)):
        print(f"| {name} | {rate or 0:.3f} | {flt:.0f} | "
              f"{flt / rate if rate else float('nan'):.0f} | "
              f"{cpu / rate if rate else float('nan'):.3f} |")
    if alone[0] and tog[0]:
        truth = alone[0] / tog[0]
        print(f"\nslowdown by its batches {truth:.2f}×, by its page faults "
              f"{alone[1] / tog[1]:.2f}× ({alone[1] / tog[1] / truth:.2f} of it), by its CPU "
              f"{alone[2] / tog[2]:.2f}×")


if __name__ == "__main__":
    main()
