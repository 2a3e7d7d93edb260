"""A found job's py-spy step time where the sampling rate beats with its steps.

    python benchmarks/step_beats.py --examples PATH_TO_pytorch/examples [--rounds 3]

PyTorch's own `word_language_model/main.py`, unmodified (its LSTM defaults, on a generated
corpus of wikitext-2's layout, `--log-interval 20`), runs alone, started by hand; per round
and rate (25, 31, 50 Hz), one 2 s py-spy burst read as the monitor reads it before the check
(the main burst alone) and one as it reads it now (with the concurrent check burst at four
times the rate), beside the script's own `ms/batch` over the same seconds (the median of its
lines printed in the burst's window). Also each burst's py-spy CPU seconds. Run it under the
box lock: its figures are timings.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from gputop_dl.collect.pyspy import run as pyspy  # noqa: E402

MS = re.compile(r"ms/batch\s+([\d.]+)")


def corpus(root: str, train: int = 60000) -> None:
    """train/valid/test.txt of random words (the script reads any such files); `train` words
    in the training split (wikitext-2's has 2,088,628)."""
    rnd = random.Random(0)
    words = [f"w{i}" for i in range(3000)]
    os.makedirs(root, exist_ok=True)
    for name, n in (("train", train), ("valid", 4000), ("test", 4000)):
        with open(os.path.join(root, f"{name}.txt"), "w", encoding="utf-8") as f:
            for _ in range(n // 12):
                f.write(" " + " ".join(rnd.choice(words) for _ in range(12)) + " \n")


def own_ms(lines: list[tuple[float, str]], t0: float, t1: float) -> float | None:
    got = [float(m.group(1)) for t, ln in lines if t0 < t <= t1 + 1.0 and (m := MS.search(ln))]
    return statistics.median(got) if got else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", required=True, help="a checkout of pytorch/examples")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    wlm = os.path.join(os.path.abspath(a.examples), "word_language_model")
    with tempfile.TemporaryDirectory() as work:
        corpus(os.path.join(work, "data"))
        p = subprocess.Popen([sys.executable, "-u", os.path.join(wlm, "main.py"), "--data",
                              os.path.join(work, "data"), "--log-interval", "20", "--epochs",
                              "1000", "--save", os.path.join(work, "model.pt")],
                             cwd=wlm, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        lines: list[tuple[float, str]] = []
        threading.Thread(target=lambda: [lines.append((time.time(), ln)) for ln in p.stdout or ()],
                         daemon=True).start()
        try:
            while not any(MS.search(ln) for _, ln in lines):
                if p.poll() is not None:
                    sys.exit("word_language_model ended: " + "".join(ln for _, ln in lines)[-400:])
                time.sleep(0.2)
            print("| round | rate | its own ms/batch | main burst alone (ms) | checked (ms) | "
                  "checked / own | py-spy CPU, alone / checked |")
            print("|---|---:|---:|---:|---:|---:|---:|")
            for r in range(a.rounds):
                for rate in (25, 31, 50):
                    t0 = time.time()
                    raw, err = pyspy._stall_burst(p.pid, 2.0, rate, None)
                    own_raw = own_ms(lines, t0, time.time())
                    t1 = time.time()
                    chk, err2 = pyspy.record_stall(p.pid, 2.0, rate)
                    own = own_ms(lines, t1, time.time())
                    if raw is None or chk is None:
                        print(f"| {r + 1} | {rate} | {err or err2} | | | | |")
                        continue

                    def ms(e):
                        return f"{e.step_time_s * 1000:.0f}" if e.step_time_s else f"– ({e.why})"

                    ratio = (f"{chk.step_time_s * 1000 / own:.2f}" if chk.step_time_s and own
                             else "–")
                    print(f"| {r + 1} | {rate} Hz | {own_raw or 0:.0f}, {own or 0:.0f} | {ms(raw)} | "
                          f"{ms(chk)} | {ratio} | {raw.cpu_s or 0:.3f} / {chk.cpu_s or 0:.3f} s |")
        finally:
            p.kill()
            p.wait()


if __name__ == "__main__":
    main()
