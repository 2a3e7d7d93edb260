"""PyTorch's own examples, unmodified, judged by gputop-dl as a user would run them.

    python benchmarks/pytorch_examples.py --examples PATH_TO_pytorch/examples [--seconds 40]

1. `mnist/main.py` three times as `command` workloads of one file (`baseline = "measure"`): the
   start-up hook times the script's DataLoader; the verdict comes from the solo baselines.
   MNIST is not downloaded: small MNIST files in the dataset's own IDX format are generated
   (random digits; the script cannot tell), so `download=True` finds them present.
2. `imagenet/main.py --dummy` (FakeData, ResNet-18 on the CPU) alone for 40 s, then started
   by hand twice and judged by `gputop-dl diagnose`; its own printed batch times ("Time
   x.xxx (avg)") are the ground truth for the step time diagnose reads with py-spy, and their
   medians together over alone for its slowdown.

3. `dcgan/main.py --dataset fake` (64x64, batch 64, torch's default intra-op threads, one
   loader worker) alone, then twice started by hand and judged by `gputop-dl diagnose
   --no-probe` (the live estimate, nothing paused); then the same with
   `OMP_WAIT_POLICY=PASSIVE` (`--only dcgan`). Its own rate: the arrival times of
   the line it prints per iteration (unbuffered).
   One copy beside a busy loop that is not a job, with torch's default intra-op threads and
   with OMP_NUM_THREADS=1 (`--only dcgan-loop`): its rate and the first fix.
4. the same two dcgan copies judged by `diagnose --seconds 120` with its probe
   (`--only dcgan-probe`): each job's slowdown, from py-spy's step times or its loader
   workers' work rate, beside its own rate alone (its probe window) over together.
5. one dcgan copy alone, a second `--dcgan-seconds` × 1.5 later, watched by the monitor's
   engine (`--only dcgan-pace`): the first job's live slowdown (its own pace) beside its own
   rate alone over together; and the second's (another `--outf`: a twin that borrows the
   first's pace alone) beside the first's rate alone over its own together.
6. the same with `word_language_model/main.py` (no loader workers: paced by its own loop
   counter, `batch` of its `train()`, read by py-spy's dumps, else its py-spy step times; a
   generated corpus in wikitext-2's layout and length), 90 s alone, 240 s together
   (`--only wlm-pace`).
7. the same with `mnist/main.py --no-accel` (on the CPU it has no loader workers either:
   its `batch_idx`; generated MNIST files), 90 s alone, 180 s together (`--only mnist-pace`).
8. the same with `imagenet/main.py --dummy -a resnet18 -b 4 -j 1` (one loader worker: paced
   by its batches, the worker's write calls), 60 s alone, 120 s together, and the second copy
   by its twin's pace (`--only imagenet-pace`).
9. one dcgan copy alone under a recording monitor, then, under a new one, two copies started
   at the same moment, paced by the stored run (`--only dcgan-stored`).
10. the same with `word_language_model/main.py` (its loop counter alone is the stored run):
   one alone 90 s under a recording monitor, then `--copies` (2 or 3) started at the same
   moment under a new one for 240 s (`--only wlm-stored`).

Prints, per job, what gputop-dl measured beside what the script itself reports.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import re
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # dcgan-pace runs the engine here
sys.path.insert(0, ROOT)


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


def kill_groups(procs: list[subprocess.Popen]) -> None:
    """Kill each started script with its process group (its loader workers), and reap it."""
    for p in procs:
        try:
            os.killpg(p.pid, 9)
        except OSError:
            pass  # gone already
        p.wait()


def _imagenet_alone(script: str, work: str, env: dict[str, str], seconds: float = 40.0
                    ) -> float | None:
    """One copy alone: the median of its own printed batch times past its first two."""
    path = os.path.join(work, "imagenet-alone.log")
    with open(path, "w") as log:
        p = subprocess.Popen(
            [sys.executable, script, "--dummy", "-a", "resnet18", "-b", "4", "-j", "1",
             "--print-freq", "5", "--epochs", "1"], cwd=work, stdout=log, stderr=log,
            env=dict(env, OMP_NUM_THREADS="1"), start_new_session=True)
        try:
            time.sleep(seconds)
        finally:
            kill_groups([p])
    with open(path) as f:
        own = [float(a) for a, _ in TIME_RE.findall(f.read())]
    return statistics.median(own[2:]) if len(own) > 3 else None


def imagenet(examples: str, work: str, env: dict[str, str], seconds: float) -> None:
    script = os.path.join(examples, "imagenet", "main.py")
    alone_s = _imagenet_alone(script, work, env)
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
        print(f"\nalone, one copy: its own batch time {alone_s} s (median of its lines)")
        print("\n| job | pid | step together (py-spy) | script's own batch time (median of "
              "its lines) | step alone (py-spy) | slowdown | from | true slowdown (own batch "
              "times together / alone) | estimate | stall | CPU cores | alone |")
        print("|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|")
        for j, _p, log in zip(sorted(doc["jobs"], key=lambda j: j["pid"]), procs, logs):
            with open(log) as f:
                own = [float(a) for a, _ in TIME_RE.findall(f.read())]
            own_med = statistics.median(own[2:]) if len(own) > 3 else None
            truth = own_med / alone_s if own_med and alone_s else None
            print(f"| {j['name']} | {j['pid']} | {j['step_time_s']} | "
                  f"{None if own_med is None else round(own_med, 3)} | {j['solo_step_time_s']} "
                  f"| {j['slowdown']} | {j.get('slowdown_from') or j.get('slowdown_source')} | "
                  f"{_n(truth)} | {j.get('estimated_slowdown')} | {j['stall_fraction']} | "
                  f"{j['cpu_cores']} | {j['solo_cpu_cores']} |")
        print()
    finally:
        kill_groups(procs)


def _arrivals(proc: subprocess.Popen, into: list[float]) -> None:
    """The time each iteration's line arrived ("[epoch/niter][i/n] Loss_D ...")."""
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("[") and "Loss_D" in line:
            into.append(time.time())


def _start_dcgans(script: str, work: str, env: dict[str, str], n: int, tag: str
                  ) -> tuple[list[subprocess.Popen], list[list[float]]]:
    """`n` copies of dcgan/main.py on fake data (one loader worker), each in its own session,
    and the arrival times of their per-iteration lines as they come."""
    import threading

    procs: list[subprocess.Popen] = []
    stamps: list[list[float]] = []
    for i in range(n):
        out = os.path.join(work, f"{tag}{i}")
        os.makedirs(out, exist_ok=True)
        procs.append(subprocess.Popen(
            [sys.executable, script, "--dataset", "fake", "--workers", "1", "--outf", out,
             "--niter", "100"], cwd=work, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True, env=dict(env, PYTHONUNBUFFERED="1"), start_new_session=True))
        stamps.append([])
        threading.Thread(target=_arrivals, args=(procs[-1], stamps[-1]), daemon=True).start()
    return procs, stamps


def _watched_dcgans(script: str, work: str, env: dict[str, str], n: int, tag: str,
                    pids: set[int], procs: list[subprocess.Popen]
                    ) -> tuple[list[subprocess.Popen], list[list[float]]]:
    """`_start_dcgans`, their PIDs added to the monitor's `pids` and the copies to `procs`
    (stopped by the caller)."""
    new, stamps = _start_dcgans(script, work, env, n, tag)
    procs += new
    pids.update(p.pid for p in new)
    return new, stamps


def _warm(stamps: list[list[float]], timeout: float = 120.0) -> None:
    """Until every copy is past its warm-up (4 iterations), or `timeout`."""
    deadline = time.time() + timeout
    while any(len(s) < 4 for s in stamps) and time.time() < deadline:
        time.sleep(0.2)


def _dcgan_run(script: str, work: str, env: dict[str, str], n: int, seconds: float,
               judge: bool) -> tuple[list[float | None], dict[str, Any] | None]:
    """`n` copies for `seconds`: each one's it/s past its first 3 iterations (over the span
    when all ran) and, with `judge`, `diagnose --no-probe --json` of them from its middle."""
    procs, stamps = _start_dcgans(script, work, env, n, "dcgan")
    doc = None
    try:
        _warm(stamps)
        t0 = time.time()
        if judge:
            pids = ",".join(str(p.pid) for p in procs)
            out = gdl("diagnose", "--no-probe", "--seconds", "18", "--json", "--pid", pids,
                      env=env)
            doc = json.loads(out.stdout) if out.returncode == 0 else {"error": out.stderr[-300:]}
        time.sleep(max(0.0, t0 + seconds - time.time()))
        t1 = time.time()
    finally:
        kill_groups(procs)
    return [_rate(s[3:], t0, t1) for s in stamps], doc


def dcgan(examples: str, work: str, env: dict[str, str], seconds: float) -> None:
    script = os.path.join(examples, "dcgan", "main.py")
    print("## dcgan/main.py --dataset fake: alone, then two by hand judged by diagnose "
          "--no-probe\n")
    print("| OMP_WAIT_POLICY | job | alone it/s | together it/s | true slowdown | estimate | "
          "pool's time per slice, voluntary switches | spinning-pool fix given | verdict |")
    print("|---|---|---:|---:|---:|---:|---:|---|---|")
    for policy in ("unset", "PASSIVE"):
        penv = dict(env, OMP_WAIT_POLICY=policy) if policy != "unset" else env
        (alone,), _ = _dcgan_run(script, work, penv, 1, seconds, judge=False)
        rates, doc = _dcgan_run(script, work, penv, 2, seconds, judge=True)
        v = (doc or {}).get("verdict") or {}
        fix = any("OMP_WAIT_POLICY=PASSIVE" in r for r in v.get("recommendations") or [])
        jobs = sorted((doc or {}).get("jobs") or [], key=lambda j: j["pid"])
        lines = v.get("evidence_lines") or []
        for i, r in enumerate(rates):
            j = jobs[i] if i < len(jobs) else {}
            per = [f"{m.group(1)} ms, {m.group(2) or '–'}" for ln in lines
                   if ln.startswith(f"{j.get('name')}: ") and (m := re.search(
                       r"on a CPU ([0-9.]+) ms per time slice(?:, ([0-9]+%) of their switches)?",
                       ln))]
            j = dict(j, pool=per[0] if per else "–")
            truth = alone / r if alone and r else None
            print(f"| {policy} | dcgan {i + 1} | {alone or 0:.2f} | {r or 0:.2f} | "
                  f"{'–' if truth is None else f'{truth:.2f}'} | {j.get('slowdown', '–')} | "
                  f"{j['pool']} | {'yes' if fix else 'no'} | "
                  f"{v.get('kind', (doc or {}).get('error', '–'))} |")
    print()


def dcgan_loop(examples: str, work: str, env: dict[str, str], seconds: float) -> None:
    """One dcgan copy alone, then beside one busy loop in another session (not a job),
    judged by `diagnose --no-probe`: with torch's default intra-op threads and with
    OMP_NUM_THREADS=1 (the `pool-width` fix). Its own rate from its per-iteration lines."""
    script = os.path.join(examples, "dcgan", "main.py")
    print("## dcgan/main.py --dataset fake beside one busy loop, judged by diagnose --no-probe\n")
    print("| intra-op threads | alone it/s | beside the loop it/s | true slowdown | estimate "
          "(outside) | first fix | verdict |")
    print("|---|---:|---:|---:|---:|---|---|")
    for threads in ("default", "1"):
        tenv = env if threads == "default" else dict(env, OMP_NUM_THREADS=threads)
        (alone,), _ = _dcgan_run(script, work, tenv, 1, seconds, judge=False)
        loop = subprocess.Popen([sys.executable, "-c", "while True: pass"],
                                start_new_session=True)
        try:
            (beside,), doc = _dcgan_run(script, work, tenv, 1, seconds, judge=True)
        finally:
            loop.kill()
            loop.wait()
        v = (doc or {}).get("verdict") or {}
        row = (v.get("jobs") or [{}])[0]
        est = row.get("outside_slowdown") or row.get("slowdown")
        first = (v.get("fixes") or [{}])[0]
        named = re.search(r"OMP_NUM_THREADS=(\d+)", first.get("text", ""))
        fix = f"{first.get('kind', '–')}" + (f" ({named.group(1)} thread)" if named else "")
        truth = alone / beside if alone and beside else None
        print(f"| {threads} | {alone or 0:.2f} | {beside or 0:.2f} | "
              f"{'–' if truth is None else f'{truth:.2f}'} | "
              f"{'–' if est is None else f'{est:.2f}'} | {fix} | "
              f"{v.get('kind', (doc or {}).get('error', '–'))} |")
    print()


def dcgan_probe(examples: str, work: str, env: dict[str, str], seconds: float) -> None:
    """Two dcgan copies by hand (torch's default, spinning pools) judged by `diagnose` with its
    probe: each job's slowdown (from py-spy's step times or its loader's work rate) beside
    its own rate alone (its probe window: when the other copy was stopped) over together
    (before the first window), both from the arrival of its per-iteration lines."""
    from diagnose_loader import StopWatch, alone_span

    script = os.path.join(examples, "dcgan", "main.py")
    procs, stamps = _start_dcgans(script, work, env, 2, "dcgan-probe")
    stopped = StopWatch([p.pid for p in procs])  # the probe windows, exactly
    try:
        _warm(stamps)
        t0 = time.time()
        out = gdl("diagnose", "--seconds", str(seconds), "--json", "--pid",
                  ",".join(str(p.pid) for p in procs), env=env, timeout=seconds + 300)
        time.sleep(8)  # a copy's next line after the last window shows where that window ended
    finally:
        stopped.stop()
        kill_groups(procs)
    print(f"## dcgan/main.py x2 by hand (spinning pools), judged by diagnose --seconds {seconds:g}"
          " with its probe\n")
    if out.returncode != 0:
        print(f"diagnose exit {out.returncode}: {out.stderr[-500:]}")
        return
    doc = json.loads(out.stdout)
    v = doc["verdict"] or {}
    windows = [stopped.alone(p.pid) for p in procs]
    bounds = [alone_span(i, stamps, t0) for i in range(2)]  # the others' output gaps, as before
    first = min((w[0] - 0.3 for w in windows if w), default=None)
    print(f"verdict: {v.get('kind')} (confidence {v.get('confidence')})\n")
    print("| job | together it/s | alone it/s (its window) | true slowdown | diagnose | from | "
          "loader | estimate | true slowdown by the output gaps (before 2026-11-28) |")
    print("|---|---:|---:|---:|---:|---|---:|---:|---:|")
    jobs = {j["pid"]: j for j in doc["jobs"]}
    for i, p in enumerate(procs):
        j = jobs.get(p.pid, {})
        tog = _rate(stamps[i], t0 + 2, first - 0.3) if first else None
        alone = _rate(stamps[i], *windows[i]) if windows[i] else None
        truth = alone / tog if alone and tog else None
        b = bounds[i]
        by_gaps = _rate(stamps[i], *b) if b else None
        print(f"| dcgan {i + 1} | {_n(tog)} | {_n(alone)} | {_n(truth)} | {_n(j.get('slowdown'))} "
              f"| {j.get('slowdown_from') or 'estimate'} | "
              f"{_n(j.get('loader_slowdown')) if j.get('loader_slowdown') else j.get('loader_why')} "
              f"| {_n(j.get('estimated_slowdown'))} | "
              f"{_n(by_gaps / tog if by_gaps and tog else None)} |")
    for line in v.get("evidence_lines") or []:
        if "loader" in line:
            print(f"\n- {line}")
    print()


def dcgan_pace(examples: str, work: str, env: dict[str, str], seconds: float) -> None:
    """dcgan/main.py as a user starts two: one, then a second `seconds` later, watched by the
    monitor's engine from the start (found jobs, these two only). The first ran alone, so the
    live judge paces it against itself (analyse/slowdown/pace.py): its live slowdown over the
    together span (median of the ticks once its pace is read) beside its own rate alone over
    together, from the arrival of its per-iteration lines."""
    from own_pace import watching

    script = os.path.join(examples, "dcgan", "main.py")
    pids: set[int] = set()
    ticks: list[tuple[float, dict[int, Any]]] = []
    procs: list[subprocess.Popen] = []
    try:
        with watching(pids, lambda snap: ticks.append((time.time(),
                                                       {j.pid: j for j in snap.jobs}))):
            first, s1 = _watched_dcgans(script, work, env, 1, "dcgan-pace-a", pids, procs)
            _warm(s1)
            t_alone = time.time()
            time.sleep(seconds)
            second, s2 = _watched_dcgans(script, work, env, 1, "dcgan-pace-b", pids, procs)
            t_second = time.time()
            _warm(s2)
            t_tog = time.time()
            time.sleep(seconds)
            t_end = time.time()
    finally:
        kill_groups(procs)
    alone, tog = _rate(s1[0], t_alone, t_second), _rate(s1[0], t_tog, t_end)
    truth = alone / tog if alone and tog else None
    got = [(j.slowdown, j.slowdown_source) for t, jobs in ticks
           if t_tog <= t <= t_end and (j := jobs.get(first[0].pid)) is not None
           and len(jobs) == 2 and j.slowdown is not None]
    paced = [s for s, src in got if src == "own pace"]
    live = statistics.median(s for s, _ in got) if got else None
    print(f"## dcgan/main.py: one alone for {seconds:g} s, then a second beside it; the first "
          "job's live slowdown\n")
    print("| job | alone it/s | together it/s | true slowdown | live (median) | ticks by its own "
          "pace | live / truth |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    print(f"| dcgan 1 (alone first) | {_n(alone)} | {_n(tog)} | {_n(truth)} | {_n(live)} | "
          f"{len(paced)} of {len(got)} | {_n(live / truth if live and truth else None)} |")
    # the second copy (another --outf: a twin, analyse/slowdown/twins.py) never ran alone: it borrows the
    # first's pace alone once it has its own readings beside it; its truth is the first's rate
    # alone over its own together
    tog2 = _rate(s2[0], t_tog, t_end)
    truth2 = alone / tog2 if alone and tog2 else None
    got2 = [(j.slowdown, j.slowdown_source) for t, jobs in ticks
            if t_tog <= t <= t_end and (j := jobs.get(second[0].pid)) is not None
            and len(jobs) == 2 and j.slowdown is not None]
    paced2 = [s for s, src in got2 if src == "own pace"]
    live2 = statistics.median(paced2) if paced2 else None
    print(f"| dcgan 2 (its twin, beside it) | {_n(alone)} (dcgan 1) | {_n(tog2)} | {_n(truth2)} | "
          f"{_n(live2)} (paced ticks) | {len(paced2)} of {len(got2)} | "
          f"{_n(live2 / truth2 if live2 and truth2 else None)} |\n")
    # its step time as shown (py-spy's bursts; two optimizers and three backward passes a step)
    _print_shown(ticks, first[0].pid, t_second,
                 lambda lo, hi: None if (r := _rate(s1[0], lo, hi)) is None else 1 / r)


def dcgan_stored(examples: str, work: str, env: dict[str, str], seconds: float) -> None:
    """dcgan/main.py as a user who tried it alone under gputop-dl one day and starts two copies
    at the same moment the next: a recording monitor (its own scratch database) watches one copy
    alone for `seconds` past its warm-up, then stops; a new one watches two copies started
    together (other `--outf`s), none ever alone. Each copy's live slowdown, paced by the stored
    run (engine/pace_refs.py), beside the first run's rate alone over its own rate together."""
    from own_pace import watching

    script = os.path.join(examples, "dcgan", "main.py")
    db = os.path.join(work, "stored.db")
    pids: set[int] = set()
    procs: list[subprocess.Popen] = []
    try:
        with watching(pids, lambda _snap: None, store=db):
            _, s1 = _watched_dcgans(script, work, env, 1, "dcgan-stored-a", pids, procs)
            _warm(s1)
            t_alone = time.time()
            time.sleep(seconds)
            t_end = time.time()
    finally:
        kill_groups(procs)
    alone = _rate(s1[0], t_alone, t_end)
    ticks: list[tuple[float, dict[int, Any], dict[str, Any]]] = []
    procs = []
    pids = set()

    def on(snap) -> None:
        ev = ((snap.verdict or {}).get("evidence") or {}).get("own_pace") or {}
        ticks.append((time.time(), {j.pid: j for j in snap.jobs}, ev))

    try:
        with watching(pids, on, store=db):
            both, s2 = _watched_dcgans(script, work, env, 2, "dcgan-stored-b", pids, procs)
            _warm(s2)
            t_tog = time.time()
            time.sleep(seconds * 1.5)
            t_end = time.time()
    finally:
        kill_groups(procs)
    print(f"## dcgan/main.py: one alone under a monitor for {seconds:g} s; under a new one, two "
          "started at the same moment\n")
    print("| job | alone it/s (earlier run) | together it/s | true slowdown | live (median of "
          "paced ticks) | paced ticks | stored run's age | live / truth |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for i, p in enumerate(both):
        tog = _rate(s2[i], t_tog, t_end)
        truth = alone / tog if alone and tog else None
        got = [(j.slowdown, ev.get(j.name) or {}) for t, jobs, ev in ticks
               if t_tog <= t <= t_end and (j := jobs.get(p.pid)) is not None
               and len(jobs) == 2 and j.slowdown is not None]
        paced = [x for x, e in got if e.get("stored_age_s") is not None and e.get("slowdown")]
        age = next((e["stored_age_s"] for _, e in reversed(got) if e.get("stored_age_s")), None)
        live = statistics.median(paced) if paced else None
        print(f"| dcgan {i + 1} | {_n(alone)} | {_n(tog)} | {_n(truth)} | {_n(live)} | "
              f"{len(paced)} of {len(got)} | {'–' if age is None else f'{age:.0f} s'} | "
              f"{_n(live / truth if live and truth else None)} |")
    print()


def _start(argv: list[str], cwd: str, env: dict[str, str], pids: set[int],
           procs: list[subprocess.Popen], lines: list[list[tuple[float, str]]]
           ) -> subprocess.Popen:
    """Start `argv` in its own session; its PID to `pids`, its output lines (time, line) to a
    new list of `lines` as they come."""
    import threading

    p = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, env=env, start_new_session=True)
    out: list[tuple[float, str]] = []
    threading.Thread(target=lambda: [out.append((time.time(), ln)) for ln in p.stdout or ()],
                     daemon=True).start()
    procs.append(p)
    lines.append(out)
    pids.add(p.pid)
    return p


def _alone_then_pair(argv: list[str], cwd: str, env: dict[str, str], alone_s: float,
                     together_s: float) -> dict[str, Any]:
    """`argv` as a user starts two: one, then a second `alone_s` later, watched by the
    monitor's engine from the start (found jobs, these two only, py-spy at its default budget)
    for `together_s` more. Returns the first job's PID, when the second started and the run
    ended, each tick's jobs and own-pace evidence, and both copies' output lines as they came
    (time, line)."""
    from own_pace import watching

    pids: set[int] = set()
    ticks: list[tuple[float, dict[int, Any]]] = []
    why: list[Any] = []
    procs: list[subprocess.Popen] = []
    lines: list[list[tuple[float, str]]] = []

    def start() -> subprocess.Popen:
        return _start(argv, cwd, env, pids, procs, lines)

    def on(snap) -> None:
        ticks.append((time.time(), {j.pid: j for j in snap.jobs}))
        why.append(((snap.verdict or {}).get("evidence") or {}).get("own_pace"))

    try:
        with watching(pids, on):
            first = start()
            time.sleep(alone_s)
            t_second = time.time()
            start()
            time.sleep(together_s)
            t_end = time.time()
    finally:
        kill_groups(procs)
    return {"pid": first.pid, "t_second": t_second, "t_end": t_end, "ticks": ticks, "why": why,
            "lines": lines}


def _stored_copies(argv: list[str], cwd: str, env: dict[str, str], alone_s: float,
                   together_s: float, n: int, db: str) -> dict[str, Any]:
    """`argv` as a user who ran it alone under gputop-dl one day and starts `n` copies at the
    same moment the next: one copy under a recording monitor (database `db`) for `alone_s`,
    stopped; then `n` under a new monitor for `together_s`, none ever alone. Returns the
    copies' output lines (time, line) of each run, their PIDs, the second run's span and its
    ticks (jobs by PID, own-pace evidence)."""
    from own_pace import watching

    def copies(k: int, seconds: float, on: Callable[[Any], None]
               ) -> tuple[list[list[tuple[float, str]]], list[subprocess.Popen], float, float]:
        """`k` copies under a recording monitor for `seconds`: their lines, processes, span."""
        lines: list[list[tuple[float, str]]] = []
        procs: list[subprocess.Popen] = []
        pids: set[int] = set()
        try:
            with watching(pids, on, store=db):
                for _ in range(k):
                    _start(argv, cwd, env, pids, procs, lines)
                t0 = time.time()
                time.sleep(seconds)
                t1 = time.time()
        finally:
            kill_groups(procs)
        return lines, procs, t0, t1

    alone_lines, _, t0, t_alone_end = copies(1, alone_s, lambda _snap: None)
    with contextlib.closing(sqlite3.connect(db)) as con:  # what the second monitor can lend
        refs = [json.loads(d) for (d,) in con.execute("SELECT data FROM pace_refs")]
    print(f"stored references after the run alone: {len(refs)}; their loop counters' pairs: "
          + (", ".join(f"{sum(r['loop']['seconds']):.0f} s" for r in refs if 'loop' in r)
             or "none"), flush=True)
    ticks: list[tuple[float, dict[int, Any], dict[str, Any]]] = []

    def on(snap) -> None:
        ev = ((snap.verdict or {}).get("evidence") or {}).get("own_pace") or {}
        ticks.append((time.time(), {j.pid: j for j in snap.jobs}, ev))

    lines, procs, t_tog, t_end = copies(n, together_s, on)
    return {"alone": alone_lines[0], "alone_span": (t0, t_alone_end), "lines": lines,
            "pids": [p.pid for p in procs], "span": (t_tog, t_end), "ticks": ticks}


def wlm_stored(examples: str, work: str, env: dict[str, str], alone_s: float,
               together_s: float, n: int) -> None:
    """word_language_model/main.py, one alone under a recording monitor, then `n` started at
    the same moment under a new one (`_stored_copies`): each copy paced by its loop counter
    against the stored run's counter alone. Truth: each copy's own `ms/batch` lines (each the
    wall time of its last 5 batches), their mean together (past its first 40 s: batches over
    seconds, what its counter measures) over the first run's mean alone (past 40 s); their
    medians' ratio beside it (a skewed spread of batch times moves the two apart)."""
    from step_beats import MS, corpus

    wlm = os.path.join(examples, "word_language_model")
    corpus(os.path.join(work, "wlm-data"), train=2_088_628)
    run = _stored_copies([sys.executable, "-u", os.path.join(wlm, "main.py"), "--data",
                          os.path.join(work, "wlm-data"), "--log-interval", "5", "--epochs",
                          "1000", "--save", os.path.join(work, "wlm.pt")],
                         wlm, env, alone_s, together_s, n, os.path.join(work, "stored-wlm.db"))

    def ms(lines: list[tuple[float, str]], lo: float, hi: float, mid=statistics.fmean
           ) -> float | None:
        got = [float(m.group(1)) for t, ln in lines if lo < t <= hi and (m := MS.search(ln))]
        return mid(got) if got else None

    def first_batch(lines: list[tuple[float, str]]) -> float | None:
        return next((t for t, ln in lines if BATCH_RE.search(ln)), None)

    a0, a1 = run["alone_span"]
    t_tog, t_end = run["span"]
    # past each run's start-up: its corpus read (about a minute) and first batches; together,
    # from WARM_S after the last copy's first batch (its own slowdown settles there: _windows)
    a_warm = (first_batch(run["alone"]) or a0) + WARM_S
    firsts = [f for ln in run["lines"] if (f := first_batch(ln)) is not None]
    warm = max(firsts) + WARM_S if len(firsts) == n else t_end
    alone, alone_mid = ms(run["alone"], a_warm, a1), ms(run["alone"], a_warm, a1, statistics.median)
    print(f"## word_language_model/main.py: one alone under a monitor for {alone_s:g} s; under "
          f"a new one, {n} started at the same moment for {together_s:g} s\n")
    print(f"its own step alone (earlier run, {WARM_S:g} s past its first batch): mean "
          f"{_n(alone)} ms, median {_n(alone_mid)} ms. Together: from {warm - t_tog:.0f} s "
          f"({WARM_S:g} s past the last copy's first batch) to {t_end - t_tog:.0f} s\n")
    print("| copy | its own step together, mean (median) ms | true slowdown (by medians) | live "
          "by the stored run's counter (median over the span) | paced ticks in the span | "
          "first paced (s after start) | stored run's age | live / truth |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for i, pid in enumerate(run["pids"]):
        tog = ms(run["lines"][i], warm, t_end)
        tog_mid = ms(run["lines"][i], warm, t_end, statistics.median)
        truth = tog / alone if tog and alone else None
        truth_mid = tog_mid / alone_mid if tog_mid and alone_mid else None
        got = [(t - t_tog, j.slowdown, (ev.get(j.name) or {}))
               for t, jobs, ev in run["ticks"] if (j := jobs.get(pid)) is not None
               and len(jobs) == n and j.slowdown is not None]
        paced = [(t, x) for t, x, e in got if e.get("used") and e.get("source") == "counter"]
        span = [x for t, x in paced if t >= warm - t_tog]
        age = next((e["stored_age_s"] for _, _, e in reversed(got) if e.get("stored_age_s")),
                   None)
        live = statistics.median(span) if span else None
        print(f"| {i + 1} | {_n(tog)} ({_n(tog_mid)}) | {_n(truth)} ({_n(truth_mid)}) | "
              f"{_n(live)} | {len(span)} of {sum(1 for t, _, _ in got if t >= warm - t_tog)} | "
              f"{round(paced[0][0]) if paced else '–'} | "
              f"{'–' if age is None else f'{age:.0f} s'} | "
              f"{_n(live / truth if live and truth else None)} |")
    print()
    _pairs_vs_own(run, alone, n)
    _windows(run, alone, n)
    for i, pid in enumerate(run["pids"]):
        last = next((ev.get(j.name) for _, jobs, ev in reversed(run["ticks"])
                     if (j := jobs.get(pid)) is not None and ev.get(j.name)), None)
        print(f"copy {i + 1}'s own pace at the end: {json.dumps(last)}\n")


BATCH_RE = re.compile(r"\|\s*(\d+)/\s*\d+ batches")
WARM_S = 30.0  # a copy's start-up: this long past its first batch


def _batches(lines: list[tuple[float, str]], when: float) -> float | None:
    """A copy's batches done by `when`, between the log lines around it (each line says its
    batch count, every 5 batches): linear in time between them; None before its first."""
    got = [(t, int(m.group(1))) for t, ln in lines if (m := BATCH_RE.search(ln))]
    before = [g for g in got if g[0] <= when]
    after = [g for g in got if g[0] > when]
    if not before:
        return None
    (t0, b0) = before[-1]
    if not after or after[0][1] < b0:  # its last line, or a new epoch next
        return float(b0)
    t1, b1 = after[0]
    return b0 + (b1 - b0) * (when - t0) / (t1 - t0)


def _pairs_vs_own(run: dict[str, Any], alone_ms: float | None, n: int) -> None:
    """Each live reading of a copy's counter pace beside the copy's own slowdown over the same
    seconds: the pairs it was read from end at its confirmed reading (`loop_read_t`, wall
    time: the dump before the newest, which confirms it) and span `loop_now_s` back; the
    copy's own batches in that span from its log lines."""
    if not alone_ms:
        return
    t_tog = run["span"][0]
    print("each new live reading by the counter (s after start), beside the copy's own "
          "slowdown over the same span of dumps:\n")
    print("| copy | read at s | its pairs' span (s after start) | live | its own (log lines) "
          "| live / own |\n|---|---:|---|---:|---:|---:|")
    ratios: list[float] = []
    for i, pid in enumerate(run["pids"]):
        prev = None
        for t, jobs, ev in run["ticks"]:
            j = jobs.get(pid)
            if j is None:
                continue
            e = ev.get(j.name) or {}
            cur = (e.get("slowdown"), e.get("loop_now_s"))
            if (not e.get("used") or e.get("source") != "counter" or cur == prev
                    or j.loop_read_t is None):
                continue
            prev = cur
            end = j.loop_read_t
            lo = end - e["loop_now_s"]
            b0, b1 = _batches(run["lines"][i], lo), _batches(run["lines"][i], end)
            own = ((end - lo) / (b1 - b0) * 1000 / alone_ms if b0 is not None and b1 is not None
                   and b1 > b0 else None)
            live = e["slowdown"]
            if own:
                ratios.append(live / own)
            print(f"| {i + 1} | {t - t_tog:.0f} | {lo - t_tog:.0f}–{end - t_tog:.0f} | "
                  f"{_n(live)} | {_n(own)} | {_n(live / own if own else None)} |")
    if ratios:
        inside = sum(1 for r in ratios if 0.75 <= r <= 1.25)
        print(f"\n{inside} of {len(ratios)} readings within 25 % of the copy's own slowdown over "
              f"their span; live / own median {statistics.median(ratios):.2f}, range "
              f"{min(ratios):.2f}–{max(ratios):.2f}\n")


def _batch_at(lines: list[tuple[float, str]], when: float) -> int:
    """A copy's batch count by its last log line at `when` (whole lines: 5 batches each)."""
    return max([int(m.group(1)) for tt, ln in lines if tt <= when and (m := BATCH_RE.search(ln))],
               default=0)


def _windows(run: dict[str, Any], alone_ms: float | None, n: int, width: float = 30.0) -> None:
    """Each copy's own slowdown in windows of `width` s (its batches over seconds from its log
    lines, against `alone_ms`) beside its live slowdown at each window's end: whether the live
    figure follows the copy's pace as it changes."""
    t_tog, t_end = run["span"]
    if not alone_ms:
        return
    print(f"each copy's own slowdown over {width:g} s windows (its batches counted in its log "
          "lines) and its live slowdown at the window's end (source):\n")
    print("| s | " + " | ".join(f"copy {i + 1}: own / live" for i in range(n)) + " |")
    print("|---:|" + "---|" * n)
    t = t_tog + width
    while t <= t_end:
        cells = []
        for i, pid in enumerate(run["pids"]):
            d = _batch_at(run["lines"][i], t) - _batch_at(run["lines"][i], t - width)
            own = f"{width / d * 1000 / alone_ms:.2f}" if d > 0 else \
                f"≥ {width / 5 * 1000 / alone_ms:.0f}"
            live = next(((j.slowdown, (ev.get(j.name) or {}).get("source") if (ev.get(j.name)
                          or {}).get("used") else "est")
                         for tt, jobs, ev in reversed(run["ticks"])
                         if tt <= t and (j := jobs.get(pid)) is not None), (None, None))
            cells.append(f"{own} / {_n(live[0])} ({live[1] or '–'})")
        print(f"| {t - t_tog:.0f} | " + " | ".join(cells) + " |")
        t += width
    print()


def _pace_report(title: str, run: dict[str, Any], alone: float | None, tog: float | None,
                 unit: str, own_at: Callable[[float, float], float | None]) -> None:
    """The first job's live slowdown beside its own step `alone` and `tog` (in `unit`), and
    its step time as the monitor showed it, each change, beside its own over the 16 s before
    (`own_at(lo, hi)`, seconds)."""
    t_second, first = run["t_second"], run["pid"]
    truth = tog / alone if alone and tog else None
    got = [(t - t_second, j.slowdown, j.slowdown_source, j.step_time_s)
           for t, jobs in run["ticks"]
           if t > t_second and (j := jobs.get(first)) is not None and len(jobs) == 2]
    paced = [s for _, s, src, _ in got if src == "own pace" and s is not None]
    est = [s for _, s, src, _ in got if src == "estimated" and s is not None]
    first_paced = next((round(t) for t, _, src, _ in got if src == "own pace"), None)
    print(f"## {title}\n")
    print(f"| its own step alone ({unit}) | together | true slowdown | live by its own pace "
          "(median) | ticks paced | first paced (s after the second started) | estimate before "
          "| pace / truth |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    live = statistics.median(paced) if paced else None
    print(f"| {_n(alone)} | {_n(tog)} | {_n(truth)} | {_n(live)} | {len(paced)} of {len(got)} | "
          f"{first_paced if first_paced is not None else '–'} | "
          f"{_n(statistics.median(est)) if est else '–'} | "
          f"{_n(live / truth if live and truth else None)} |\n")
    last = next((w for w in reversed(run["why"]) if w), None)
    print(f"its own pace at the end: {json.dumps(last)}\n")
    _print_shown(run["ticks"], first, t_second, own_at)
    _print_counter(run, first, t_second)


def _print_counter(run: dict[str, Any], pid: int, t_second: float) -> None:
    """The job's loop counter as the monitor read it (each new reading) and its own pace then:
    what paced it, or why nothing did."""
    rows, prev = [], None
    for (t, jobs), why in zip(run["ticks"], run["why"]):
        j = jobs.get(pid)
        if j is None or j.loop_read_t is None or j.loop_read_t == prev:
            continue
        prev = j.loop_read_t
        p = (why or {}).get(j.name) or {}
        rows.append(f"| {t - t_second:+.0f} | {j.loop_counter or '–'} | {j.loop_steps} | "
                    f"{j.loop_span_s} | {p.get('source', '–')} | {p.get('slowdown')} | "
                    f"{p.get('loop_alone_s')} / {p.get('loop_now_s')} | {p.get('why') or ''} |")
    if rows:
        print("its loop counter, each new reading (s after the second started), and its pace:\n")
        print("| s | counter | steps | seconds | paced by | slowdown | counter s alone / now "
              "| why not |\n|---:|---|---:|---:|---|---:|---|---|")
        print("\n".join(rows) + "\n")


def _print_shown(ticks: list[tuple[float, dict[int, Any]]], pid: int, t_second: float,
                 own_at: Callable[[float, float], float | None]) -> None:
    """The job's step time as the monitor showed it, each change, beside its own step (s)
    over the 16 s before (`own_at(lo, hi)`)."""
    shown, prev = [], None
    for t, jobs in ticks:
        j = jobs.get(pid)
        cur = (j.step_time_s, j.step_time_note) if j is not None else None
        if cur is not None and cur != prev:
            own = own_at(t - 16, t)
            shown.append(f"{t - t_second:+.0f} s: {cur[0] if cur[0] is not None else '–'}"
                         + (f" ({cur[1]})" if cur[1] else "")
                         + f"; its own {'–' if own is None else f'{own:.3f}'} s"
                         + (f" ({cur[0] / own:.2f} of it)" if cur[0] and own else ""))
        prev = cur
    print("its step time as the monitor showed it, each change (s after the second started; "
          "its own over the 16 s before):\n")
    print("\n".join(f"- {x}" for x in shown) + "\n")


def wlm_pace(examples: str, work: str, env: dict[str, str], alone_s: float,
             together_s: float) -> None:
    """word_language_model/main.py, one alone then a second (`_alone_then_pair`). It has no
    loader workers: the live judge paces the first by its py-spy step times alone and beside
    the second (analyse/slowdown/pace.py). Truth: its own `ms/batch` lines (every 5 batches), their
    median in each span."""
    from step_beats import MS, corpus

    wlm = os.path.join(examples, "word_language_model")
    # epochs of wikitext-2's length (3,000 batches): the 60,000 words of step_beats.py make
    # 86 (4 s alone), which its own loop counter (10 s between py-spy's dumps) cannot pair
    corpus(os.path.join(work, "wlm-data"), train=2_088_628)
    run = _alone_then_pair([sys.executable, "-u", os.path.join(wlm, "main.py"), "--data",
                            os.path.join(work, "wlm-data"), "--log-interval", "5", "--epochs",
                            "1000", "--save", os.path.join(work, "wlm.pt")],
                           wlm, env, alone_s, together_s)

    def ms(lo: float, hi: float) -> float | None:
        got = [float(m.group(1)) for t, ln in run["lines"][0]
               if lo < t <= hi and (m := MS.search(ln))]
        return statistics.median(got) if got else None

    t_second = run["t_second"]
    _pace_report(f"word_language_model/main.py: one alone for {alone_s:g} s, then a second "
                 f"beside it for {together_s:g} s; the first job's live slowdown", run,
                 ms(t_second - alone_s / 2, t_second), ms(t_second + 5, run["t_end"]), "ms",
                 lambda lo, hi: None if (x := ms(lo, hi)) is None else x / 1000)


def imagenet_pace(examples: str, work: str, env: dict[str, str], alone_s: float,
                  together_s: float) -> None:
    """imagenet/main.py --dummy (ResNet-18, batch 4, one loader worker, torch's default
    intra-op threads), one alone then a second (`_alone_then_pair`): the live judge paces both
    by the loader's batches (its write calls), the second by its twin's pace alone. Truth: each
    copy's own batch times (its "Time" lines, one a batch), their median in each span."""
    run = _alone_then_pair([sys.executable, "-u", os.path.join(examples, "imagenet", "main.py"),
                            "--dummy", "-a", "resnet18", "-b", "4", "-j", "1", "--print-freq",
                            "1", "--epochs", "1"], work, env, alone_s, together_s)

    def batch(k: int, lo: float, hi: float) -> float | None:
        got = [float(m.group(1)) for t, ln in run["lines"][k]
               if lo < t <= hi and (m := TIME_RE.search(ln))]
        return statistics.median(got[1:]) if len(got) > 3 else None

    t_second, t_end = run["t_second"], run["t_end"]
    alone = batch(0, t_second - alone_s / 2, t_second)
    _pace_report(f"imagenet/main.py --dummy: one alone for {alone_s:g} s, then a second beside "
                 f"it for {together_s:g} s; the first job's live slowdown", run,
                 None if alone is None else alone * 1000,
                 None if (tog := batch(0, t_second + 20, t_end)) is None else tog * 1000, "ms",
                 lambda lo, hi: batch(0, lo, hi))
    second = next((pid for _, jobs in run["ticks"] for pid in jobs if pid != run["pid"]), None)
    tog2 = batch(1, t_second + 20, t_end)
    truth2 = tog2 / alone if tog2 and alone else None
    paced = [j.slowdown for t, jobs in run["ticks"] if t > t_second + 20
             and (j := jobs.get(second)) is not None and j.slowdown_source == "own pace"
             and j.slowdown is not None]
    live2 = statistics.median(paced) if paced else None
    print(f"its twin (the second copy, PID {second}): its own batch together {_n(tog2 and tog2 * 1000)} "
          f"ms, true slowdown {_n(truth2)} (over the first's alone), live by the twin's pace "
          f"{_n(live2)} ({len(paced)} ticks), pace / truth "
          f"{_n(live2 / truth2 if live2 and truth2 else None)}\n")


MNIST_LOG = 10  # batches between its "Train Epoch" lines


def mnist_pace(examples: str, work: str, env: dict[str, str], alone_s: float,
               together_s: float) -> None:
    """mnist/main.py on the CPU (`--no-accel`: no loader workers, torch's default intra-op
    threads), one alone then a second (`_alone_then_pair`), paced by its py-spy step times.
    Truth: the arrival of its "Train Epoch" lines (one every MNIST_LOG batches), the mean gap
    in each span over MNIST_LOG (gaps over 3x the median, its test pass, left out)."""
    data = os.path.join(work, "data")
    fake_mnist(data, 60000, 1000)
    run_dir = os.path.join(work, "run")  # the script reads ../data
    os.makedirs(run_dir, exist_ok=True)
    run = _alone_then_pair([sys.executable, "-u", os.path.join(examples, "mnist", "main.py"),
                            "--no-accel", "--epochs", "100", "--log-interval", str(MNIST_LOG)],
                           run_dir, env, alone_s, together_s)

    def step(lo: float, hi: float) -> float | None:
        """Its mean step (s), the gaps across an epoch's end (its test pass) left out."""
        ts = [t for t, ln in run["lines"][0] if lo < t <= hi and ln.startswith("Train Epoch")]
        gaps = [b - a for a, b in zip(ts, ts[1:])]
        if not gaps:
            return None
        cut = 3 * statistics.median(gaps)
        return statistics.fmean(g for g in gaps if g <= cut) / MNIST_LOG

    t_second = run["t_second"]
    alone, tog = step(t_second - alone_s / 2, t_second), step(t_second + 5, run["t_end"])
    _pace_report(f"mnist/main.py --no-accel: one alone for {alone_s:g} s, then a second beside "
                 f"it for {together_s:g} s; the first job's live slowdown", run,
                 None if alone is None else alone * 1000, None if tog is None else tog * 1000,
                 "ms", step)


def _rate(ts: list[float], lo: float, hi: float) -> float | None:
    inside = [t for t in ts if lo <= t <= hi]
    return (len(inside) - 1) / (inside[-1] - inside[0]) if len(inside) > 2 else None


def _n(x: float | None) -> str:
    return "–" if x is None else f"{x:.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", required=True, help="a checkout of pytorch/examples")
    ap.add_argument("--seconds", type=float, default=40.0, help="diagnose --seconds")
    ap.add_argument("--only", choices=("mnist", "imagenet", "dcgan", "dcgan-loop", "dcgan-probe",
                                        "dcgan-pace",
                                        "wlm-pace", "mnist-pace", "imagenet-pace",
                                        "dcgan-stored", "wlm-stored"))
    ap.add_argument("--dcgan-seconds", type=float, default=40.0,
                    help="each dcgan phase's span past warm-up")
    ap.add_argument("--probe-seconds", type=float, default=120.0,
                    help="dcgan-probe: diagnose --seconds (its windows are a tenth of it)")
    ap.add_argument("--copies", type=int, choices=(2, 3), default=2,
                    help="wlm-stored: copies started at the same moment")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as work:
        env = dict(os.environ, GPUTOP_DL_HOME=os.path.join(work, "home"))
        if a.only in (None, "mnist"):
            mnist(os.path.abspath(a.examples), work, env)
        if a.only in (None, "imagenet"):
            imagenet(os.path.abspath(a.examples), work, env, a.seconds)
        if a.only in (None, "dcgan"):
            dcgan(os.path.abspath(a.examples), work, env, a.dcgan_seconds)
        if a.only in (None, "dcgan-loop"):
            dcgan_loop(os.path.abspath(a.examples), work, env, a.dcgan_seconds)
        if a.only in (None, "dcgan-probe"):
            dcgan_probe(os.path.abspath(a.examples), work, env, a.probe_seconds)
        if a.only in (None, "dcgan-pace"):
            dcgan_pace(os.path.abspath(a.examples), work, env, a.dcgan_seconds * 1.5)
        if a.only in (None, "wlm-pace"):
            wlm_pace(os.path.abspath(a.examples), work, env, 90.0, 240.0)
        if a.only in (None, "mnist-pace"):
            mnist_pace(os.path.abspath(a.examples), work, env, 90.0, 180.0)
        if a.only in (None, "imagenet-pace"):
            imagenet_pace(os.path.abspath(a.examples), work, env, 60.0, 120.0)
        if a.only in (None, "dcgan-stored"):
            dcgan_stored(os.path.abspath(a.examples), work, env, a.dcgan_seconds * 1.5)
        if a.only in (None, "wlm-stored"):
            wlm_stored(os.path.abspath(a.examples), work, env, 90.0, 240.0, a.copies)


if __name__ == "__main__":
    main()
