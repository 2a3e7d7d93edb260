"""PyTorch's own examples, unmodified, judged by gputop-dl as a user would run them.

    python benchmarks/pytorch_examples.py --examples PATH_TO_pytorch/examples [--seconds 40]

1. `mnist/main.py` three times as `command` workloads of one file (`baseline = "measure"`): the
   start-up hook times the script's DataLoader; the verdict comes from the solo baselines.
   MNIST is not downloaded: small MNIST files in the dataset's own IDX format are generated
   (random digits; the script cannot tell), so `download=True` finds them present.
2. `imagenet/main.py --dummy` (FakeData, ResNet-18 on the CPU) started by hand, twice, and
   judged by `gputop-dl diagnose`; its own printed batch times ("Time  x.xxx (avg)") are the
   ground truth for the step time diagnose reads with py-spy.

Prints, per job, what gputop-dl measured beside what the script itself reports.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np


def fake_mnist(root: str, n_train: int, n_test: int) -> None:
    """MNIST's raw IDX files (what torchvision checks for) with random 28x28 digits."""
    raw = os.path.join(root, "MNIST", "raw")
    os.makedirs(raw, exist_ok=True)
    rng = np.random.default_rng(0)
    for prefix, n in (("train", n_train), ("t10k", n_test)):
        imgs = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
        labels = rng.integers(0, 10, n, dtype=np.uint8)
        with open(os.path.join(raw, f"{prefix}-images-idx3-ubyte"), "wb") as f:
            f.write((2051).to_bytes(4, "big") + n.to_bytes(4, "big") + (28).to_bytes(4, "big")
                    + (28).to_bytes(4, "big") + imgs.tobytes())
        with open(os.path.join(raw, f"{prefix}-labels-idx1-ubyte"), "wb") as f:
            f.write((2049).to_bytes(4, "big") + n.to_bytes(4, "big") + labels.tobytes())
        for name in (f"{prefix}-images-idx3-ubyte", f"{prefix}-labels-idx1-ubyte"):
            with open(os.path.join(raw, name), "rb") as src, \
                    gzip.open(os.path.join(raw, name + ".gz"), "wb") as dst:
                dst.write(src.read())


def gdl(*args: str, env=None, timeout=900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gputop_dl", *args], capture_output=True,
                          text=True, env=env, timeout=timeout)


def mnist(examples: str, work: str, env: dict) -> None:
    data = os.path.join(work, "data")
    fake_mnist(data, 6400, 1000)
    run_dir = os.path.join(work, "run")  # the script reads ../data
    os.makedirs(run_dir, exist_ok=True)
    script = os.path.join(examples, "mnist", "main.py")
    argv = [sys.executable, script, "--epochs", "2", "--no-accel", "--log-interval", "25"]
    toml = os.path.join(work, "mnist.toml")
    with open(toml, "w") as f:
        f.write('[session]\nname = "pytorch mnist trio"\nbaseline = "measure"\nbaseline_steps = 10\n'
                f'[defaults]\nwarmup_steps = 3\ncwd = {json.dumps(run_dir)}\n'
                f'command = {json.dumps(argv)}\nenv = {{ OMP_NUM_THREADS = "1" }}\n'
                '[[workload]]\nname = "mnist-a"\n[[workload]]\nname = "mnist-b"\n'
                '[[workload]]\nname = "mnist-c"\n')
    t0 = time.time()
    out = gdl("launch", toml, "--headless", env=env)
    wall = time.time() - t0
    print("## mnist/main.py x3 as command workloads (baseline = measure)\n")
    print(f"gputop-dl launch exit {out.returncode}, {wall:.0f} s")
    doc_path = os.path.join(work, "mnist.json")
    gdl("export", doc_path, env=env)
    with open(doc_path) as f:
        doc = json.load(f)
    v = doc["verdict"] or {}
    print(f"verdict: {v.get('kind')} (confidence {v.get('confidence')}) — {v.get('reason')}")
    print("\n| job | steps seen (hook) | steps the script ran (2 epochs x 6400/64) | epochs | "
          "step (co-run) | solo step | slowdown | stall | CPU cores |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for j in doc["jobs"]:
        print(f"| {j['name']} | {j.get('steps')} | 200 | "
              f"{len(j.get('epochs') or [])} | {j.get('step_time_s')} | "
              f"{j.get('solo_step_time_s')} | {j.get('slowdown')} | "
              f"{j.get('stall_fraction')} | {j.get('cpu_cores')} |")
    print()


TIME_RE = re.compile(r"Time\s+([0-9.]+)\s+\(\s*([0-9.]+)\)")


def imagenet(examples: str, work: str, env: dict, seconds: float) -> None:
    script = os.path.join(examples, "imagenet", "main.py")
    procs, logs = [], []
    for i in range(2):
        log = open(os.path.join(work, f"imagenet{i}.log"), "w")
        logs.append(log.name)
        procs.append(subprocess.Popen(
            [sys.executable, script, "--dummy", "-a", "resnet18", "-b", "4", "-j", "1",
             "--print-freq", "5", "--epochs", "1"], cwd=work, stdout=log, stderr=log,
            env=dict(env, OMP_NUM_THREADS="1"), start_new_session=True))
    try:
        time.sleep(25)  # imports, model, first steps
        pids = ",".join(str(p.pid) for p in procs)
        out = gdl("diagnose", "--seconds", str(seconds), "--json", "--pid", pids, env=env)
        print("## imagenet/main.py --dummy x2 started by hand, judged by gputop-dl diagnose\n")
        if out.returncode != 0:
            print(f"diagnose exit {out.returncode}: {out.stderr[-500:]}")
            return
        doc = json.loads(out.stdout)
        v = doc["verdict"] or {}
        print(f"verdict: {v.get('kind')} (confidence {v.get('confidence')}) — {v.get('reason')}")
        print("\n| job | pid | step together (py-spy) | script's own batch time (median of "
              "its lines) | step alone (py-spy) | slowdown | stall | CPU cores | alone |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for j, _p, log in zip(sorted(doc["jobs"], key=lambda j: j["pid"]), procs, logs):
            with open(log) as f:
                own = [float(a) for a, _ in TIME_RE.findall(f.read())]
            own_med = statistics.median(own[2:]) if len(own) > 3 else None
            print(f"| {j['name']} | {j['pid']} | {j['step_time_s']} | "
                  f"{None if own_med is None else round(own_med, 3)} | {j['solo_step_time_s']} "
                  f"| {j['slowdown']} | {j['stall_fraction']} | {j['cpu_cores']} | "
                  f"{j['solo_cpu_cores']} |")
        print()
    finally:
        for p in procs:
            try:
                os.killpg(p.pid, 9)
            except OSError:
                pass
            p.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", required=True, help="a checkout of pytorch/examples")
    ap.add_argument("--seconds", type=float, default=40.0, help="diagnose --seconds")
    ap.add_argument("--only", choices=("mnist", "imagenet"))
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as work:
        env = dict(os.environ, GPUTOP_DL_HOME=os.path.join(work, "home"))
        if a.only in (None, "mnist"):
            mnist(os.path.abspath(a.examples), work, env)
        if a.only in (None, "imagenet"):
            imagenet(os.path.abspath(a.examples), work, env, a.seconds)


if __name__ == "__main__":
    main()
