#!/usr/bin/env python3
"""TUI benchmarks: first frame, monitor CPU at 1 Hz, key-press-to-redraw latency, render cost per tick.

    .venv/bin/python benchmarks/tui.py                  # all (about 1.5 minutes)
    .venv/bin/python benchmarks/tui.py --only keys      # first-frame | cpu | keys | render
    .venv/bin/python benchmarks/tui.py --cpu-seconds 30 --runs 5
    .venv/bin/python benchmarks/tui.py --only cpu --cpu-seconds 60 --cpu-runs 3

1. first frame (target ≤ 1 s): the real `gputop-dl` in a detached 160×50 tmux session; time from
   starting it to the first snapshot on screen (the host panel's "of N CPUs" line, drawn only
   from a snapshot), polling `capture-pane` every 10 ms. Median of --runs. Also in-process: from
   spawning `python` to `GputopApp.first_render_at` (wall clock), imports included, under run_test.
2. monitor CPU at 1 Hz: CPU seconds of the `gputop-dl` process (and children) over --cpu-seconds
   while it runs in tmux, after 5 s of start-up, and per thread (UI, engine, input, stall bursts);
   `top -b -d 1` measured alongside for scale.
3. key → redraw: Pilot presses (j/k, sort, pause) on an app fed 8 GPUs and 16 jobs; time from the
   key event being sent to the compositor producing the next screen update (terminal write not
   included: headless). Also snapshot → redraw: a snapshot handed over from another thread.
4. render cost: `render_snapshots()` for one tick with 8 GPUs × 600 history samples and 16 jobs.
5. UI CPU per snapshot: the whole main-thread cost of one monitor snapshot (3 found jobs whose
   CPU, RSS and stall change every tick, a changing host panel, no GPU) in a headless 160×50 app:
   panels, jobs table and Textual's compositor, minus the app's idle CPU over the same time.

Medians are printed (with min/max). Needs tmux for 1 and 2 (skipped without it).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import replace

import psutil

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
PY = sys.executable
GDL = os.path.join(os.path.dirname(PY), "gputop-dl")


def med(xs: list[float]) -> str:
    if not xs:
        return "n/a"
    return f"median {statistics.median(xs):.3f} (min {min(xs):.3f}, max {max(xs):.3f}, n={len(xs)})"


class Tmux:
    def __init__(self):
        self.socket = f"gdl-bench-{uuid.uuid4().hex[:8]}"

    def __call__(self, *args: str) -> str:
        return subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True).stdout

    def kill(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True)
        sock = os.path.join(os.environ.get("TMUX_TMPDIR", "/tmp"), f"tmux-{os.getuid()}", self.socket)
        if os.path.exists(sock):
            os.unlink(sock)


def gdl_command(home: str) -> str:
    exe = GDL if os.path.exists(GDL) else f"{PY} -m gputop_dl"
    return f"cd {ROOT} && exec env -u COLUMNS -u LINES GPUTOP_DL_HOME={home} TERM=xterm-256color {exe}"


def first_frame_tmux(runs: int) -> list[float]:
    out = []
    home = tempfile.mkdtemp(prefix="gdl-bench-")
    for _ in range(runs):
        tmux = Tmux()
        try:
            t0 = time.perf_counter()
            tmux("new-session", "-d", "-s", "b", "-x", "160", "-y", "50", gdl_command(home))
            while time.perf_counter() - t0 < 15:
                screen = tmux("capture-pane", "-p", "-t", "b")
                if re.search(r"of \d+ CPUs? ", screen):  # host panel: drawn from a snapshot only
                    out.append(time.perf_counter() - t0)
                    break
                time.sleep(0.01)
            tmux("send-keys", "-t", "b", "q")
            time.sleep(0.5)
        finally:
            tmux.kill()
        time.sleep(0.3)
    shutil.rmtree(home, ignore_errors=True)
    return out


FIRST_FRAME_CHILD = r"""
import asyncio, time
from gputop_dl.collect.nvml.gpus import Nvml
from gputop_dl.runner import monitor_engine
from gputop_dl.present.tui.app import GputopApp
async def main():
    nvml = Nvml()
    app = GputopApp(monitor_engine(nvml), mode="monitor")
    async with app.run_test(size=(160, 50)) as pilot:
        while app.first_render_at is None:
            await asyncio.sleep(0.002)
        wall = time.time() - (time.perf_counter() - app.first_render_at)
        print(f"{wall:.6f}")
        await app.stop_and_exit()
asyncio.run(main())
"""


def first_frame_inprocess(runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t0 = time.time()
        r = subprocess.run([PY, "-c", FIRST_FRAME_CHILD], capture_output=True, text=True, cwd=ROOT, timeout=60)
        try:
            out.append(float(r.stdout.strip().splitlines()[-1]) - t0)
        except (IndexError, ValueError):
            print("  child failed:", r.stderr[-500:])
    return out


def proc_tree_cpu(p: psutil.Process) -> float:
    """CPU seconds of p, its live descendants and the children it has reaped (py-spy bursts)."""
    t = p.cpu_times()
    total = t.children_user + t.children_system
    for q in [p] + p.children(recursive=True):
        try:
            t = q.cpu_times()
            total += t.user + t.system
        except psutil.NoSuchProcess:
            pass
    return total


def find_proc(pane_pid: int, match) -> psutil.Process | None:
    """The process in a tmux pane (the pane's shell or a descendant) with a command-line part
    for which `match(part)` is true."""
    try:
        root = psutil.Process(pane_pid)
    except psutil.NoSuchProcess:
        return None
    for q in [root] + root.children(recursive=True):
        try:
            if any(match(part) for part in q.cmdline()):
                return q
        except psutil.NoSuchProcess:
            pass
    return None


def find_gdl(pane_pid: int) -> psutil.Process | None:
    return find_proc(pane_pid, lambda part: "gputop" in part)


def start_jobs(n: int, seconds: float) -> list[subprocess.Popen]:
    """n plain PyTorch loops outside gputop-dl, each a trainer + 4 loader workers (5 processes),
    light (a batch every 50 ms, 10 ms of compute: about 0.2 of a core each) so that they do not
    starve the monitor being measured."""
    script = os.path.join(ROOT, "tests", "external", "stall_script.py")
    return [subprocess.Popen([PY, script, "--seconds", str(seconds), "--data-ms", "200",
                              "--compute-ms", "10", "--num-workers", "4"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for _ in range(n)]


def own_cpu(p: psutil.Process) -> float:
    t = p.cpu_times()
    return t.user + t.system


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds of a process's live threads by their OS name (gputop-dl names its own:
    gdl-engine, gdl-input, gdl-stall, gdl-spy; the main thread is the UI)."""
    out: dict[str, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                s = f.read()
        except OSError:
            continue
        name = "main (UI)" if int(tid) == pid else s[s.index("(") + 1:s.rindex(")")]
        fields = s[s.rindex(")") + 2:].split()
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return out


def monitor_cpu(seconds: float, n_jobs: int = 0) -> dict:
    home = tempfile.mkdtemp(prefix="gdl-bench-")
    tmux = Tmux()
    top = None
    jobs = start_jobs(n_jobs, seconds + 40) if n_jobs else []
    try:
        if jobs:
            time.sleep(8.0)  # torch imported, workers forked
        tmux("new-session", "-d", "-s", "b", "-x", "160", "-y", "50", gdl_command(home))
        time.sleep(1.0)
        pane_pid = int(tmux("list-panes", "-t", "b", "-F", "#{pane_pid}").split()[0])
        gdl = find_gdl(pane_pid)
        if gdl is None:
            return {"error": "gputop-dl process not found"}
        top = subprocess.Popen(["top", "-b", "-d", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        top_p = psutil.Process(top.pid)
        time.sleep(4.0)  # past start-up
        th0 = thread_cpu(gdl.pid)
        g0, o0, t0, w0 = proc_tree_cpu(gdl), own_cpu(gdl), proc_tree_cpu(top_p), time.monotonic()
        time.sleep(seconds)
        g1, o1, t1, w1 = proc_tree_cpu(gdl), own_cpu(gdl), proc_tree_cpu(top_p), time.monotonic()
        th1 = thread_cpu(gdl.pid)
        wall = w1 - w0
        threads = {k: 100 * (v - th0.get(k, 0.0)) / wall for k, v in th1.items()}
        threads["threads that ended"] = max(0.0, 100 * (o1 - o0) / wall - sum(threads.values()))
        rss = gdl.memory_info().rss
        screen = tmux("capture-pane", "-p", "-t", "b")
        tmux("send-keys", "-t", "b", "q")
        return {"wall_s": wall, "gputop_dl_cpu_s": g1 - g0, "gputop_dl_pct": 100 * (g1 - g0) / wall,
                "own_pct": 100 * (o1 - o0) / wall, "threads_pct": threads,
                "jobs_seen": screen.count("stall_script.py"),
                "top_cpu_s": t1 - t0, "top_pct": 100 * (t1 - t0) / wall, "gputop_dl_rss": rss}
    finally:
        for j in jobs:
            j.terminate()
        for j in jobs:
            j.wait()
        if top is not None:
            top.terminate()
            top.wait()
        time.sleep(0.5)
        tmux.kill()
        shutil.rmtree(home, ignore_errors=True)


def big_snapshot(t: int):
    from tests.fakes.source import jobs, make_snapshot

    base = jobs(t)
    many = tuple(replace(base[i % 3], name=f"job{i:02d}", pid=10_000 + i, pids=(10_000 + i,)) for i in range(16))
    return make_snapshot(t, n_gpus=8, jobs=many)


async def key_latency(repeats: int) -> dict[str, list[float]]:
    from gputop_dl.present.tui.app import GputopApp
    from tests.fakes.source import SPEC, FakeSource

    src = FakeSource(live=["job00"], spec=SPEC)
    app = GputopApp(src, mode="launch")
    stamps: list[float] = []
    orig = app._display

    def display(screen, renderable):
        orig(screen, renderable)
        if renderable is not None:
            stamps.append(time.perf_counter())

    app._display = display  # type: ignore[method-assign]
    results: dict[str, list[float]] = {}
    async with app.run_test(size=(160, 50)) as pilot:
        for t in range(5):
            src.emit(big_snapshot(t))
            await pilot.pause()
        await pilot.pause(0.2)

        async def one(key: str) -> float | None:
            await pilot.pause(0.05)
            n = len(stamps)
            t_send = time.perf_counter()
            await pilot.press(key)
            end = time.perf_counter() + 1.0
            while len(stamps) == n and time.perf_counter() < end:
                await asyncio.sleep(0.001)
            return stamps[n] - t_send if len(stamps) > n else None

        for label, keys in (("j/k (move selection)", ["j", "k"]), ("c/n (sort)", ["c", "n"]),
                            ("p (pause/resume)", ["p", "p"])):
            vals = []
            for i in range(repeats):
                v = await one(keys[i % 2])
                if v is not None:
                    vals.append(v * 1000)
            results[label] = vals
        await pilot.press("o")

        vals = []
        for i in range(repeats):
            await pilot.pause(0.05)
            n = len(stamps)
            snap = big_snapshot(10 + i)
            t_send = time.perf_counter()
            th = threading.Thread(target=src.emit, args=(snap,))
            th.start()
            end = time.perf_counter() + 1.0
            while len(stamps) == n and time.perf_counter() < end:
                await asyncio.sleep(0.001)
            th.join()
            if len(stamps) > n:
                vals.append((stamps[n] - t_send) * 1000)
        results["snapshot → redraw (from another thread)"] = vals

        # render cost of one tick with full histories
        from gputop_dl.present.tui.gpu_panel import GpuPanel
        panel = app.query_one(GpuPanel)
        for h in panel.histories.values():
            for k in range(600):
                h.push((k % 100) / 100)
        costs = []
        for i in range(repeats):
            snap = big_snapshot(100 + i)
            app.latest[0] = snap
            t0 = time.perf_counter()
            app.render_snapshots({0})
            costs.append((time.perf_counter() - t0) * 1000)
        results["render_snapshots() per tick, 8 GPUs × 600 samples, 16 jobs"] = costs
        await app.stop_and_exit()
    return results


def monitor_jobs(t: int):
    from tests.fakes.source import jobs

    return tuple(replace(j, name=f"stall_script.py ({700 + i})", launched=False, device=None, batch_size=None,
                         epoch=None, step=None, eta_s=None, slowdown=None, gpu_mem=None, status="running",
                         failure=None, cpu_cores=0.5 + ((t * 7 + i * 3) % 20) / 100,
                         stall_fraction=((t * 13 + i * 5) % 40) / 100, rss=int(1.8 * 2**30) + t * 4096 * (i + 1))
                 for i, j in enumerate(jobs(t)))


async def ui_cpu_per_snapshot(n: int, gap: float) -> dict[str, float]:
    from gputop_dl.present.tui.app import GputopApp
    from tests.fakes.source import FakeSource, monitor_snapshot

    src = FakeSource(session_id=None)
    app = GputopApp(src, mode="monitor")
    async with app.run_test(size=(160, 50)) as pilot:
        for t in range(3):
            src.emit(monitor_snapshot(t, jobs=monitor_jobs(t), time=time.time()))
            await pilot.pause(0.2)
        c0, w0 = time.process_time(), time.perf_counter()
        await asyncio.sleep(n * gap)
        idle_rate = (time.process_time() - c0) / (time.perf_counter() - w0)
        c0, w0 = time.process_time(), time.perf_counter()
        for t in range(3, 3 + n):  # stamped now: an old time would add a changing "no new sample" title
            src.emit(monitor_snapshot(t, jobs=monitor_jobs(t), time=time.time()))
            await asyncio.sleep(gap)
        busy, wall = time.process_time() - c0, time.perf_counter() - w0
        await app.stop_and_exit()
    return {"per_snapshot_ms": 1000 * (busy - idle_rate * wall) / n, "idle_pct": 100 * idle_rate}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", choices=("first-frame", "cpu", "keys", "render", "ui-cpu"))
    ap.add_argument("--runs", type=int, default=5, help="first-frame runs (default 5)")
    ap.add_argument("--cpu-seconds", type=float, default=30.0)
    ap.add_argument("--cpu-runs", type=int, default=1, help="monitor CPU: runs per case (median printed)")
    ap.add_argument("--jobs", type=int, default=3, help="monitor CPU: also measure with this many "
                    "found PyTorch jobs (started outside gputop-dl) of 5 processes each running (default 3; 0: idle only)")
    ap.add_argument("--repeats", type=int, default=30, help="key presses per kind (default 30)")
    args = ap.parse_args()
    have_tmux = shutil.which("tmux") is not None
    print(f"machine: {psutil.cpu_count()} CPUs, python {sys.version.split()[0]}")

    if args.only in (None, "first-frame"):
        print("\n1. first frame of `gputop-dl` (target ≤ 1 s)")
        if have_tmux:
            print(f"   tmux, process start → first snapshot on screen: {med(first_frame_tmux(args.runs))} s")
        else:
            print("   tmux not installed: skipped")
        print(f"   python spawn → first_render_at (run_test):       {med(first_frame_inprocess(args.runs))} s")

    if args.only in (None, "cpu"):
        print(f"\n2. monitor CPU at 1 Hz over {args.cpu_seconds:.0f} s")
        if have_tmux:
            for n in sorted({0, args.jobs}):
                what = "no jobs" if n == 0 else f"{n} found jobs x 5 processes"
                runs = []
                for _ in range(args.cpu_runs):
                    r = monitor_cpu(args.cpu_seconds, n)
                    if "error" in r:
                        print("   " + r["error"])
                        continue
                    runs.append(r)
                    per_thread = ", ".join(f"{k} {v:.2f}" for k, v in sorted(r["threads_pct"].items()))
                    print(f"   {what} ({r['jobs_seen']} on screen): gputop-dl {r['own_pct']:.2f}% of one core "
                          f"itself [{per_thread}], {r['gputop_dl_pct']:.2f}% with its py-spy bursts "
                          f"(RSS {r['gputop_dl_rss'] / 2**20:.0f} MiB); top -b -d 1: {r['top_pct']:.2f}%")
                if len(runs) > 1:
                    print(f"   {what}, {len(runs)} runs: itself {med([r['own_pct'] for r in runs])} %; "
                          f"with py-spy {med([r['gputop_dl_pct'] for r in runs])} %; "
                          f"top {med([r['top_pct'] for r in runs])} %")
            print("   (htop/glances: not installed here; top is the side-by-side reference)")
        else:
            print("   tmux not installed: skipped")

    if args.only in (None, "keys", "render"):
        print("\n3. key → redraw latency (Pilot, 8 GPUs, 16 jobs) and 4. render cost, in ms")
        res = asyncio.run(key_latency(args.repeats))
        for label, vals in res.items():
            print(f"   {label}: {med(vals)}")
    if args.only in (None, "ui-cpu"):
        print("\n5. UI CPU per monitor snapshot (3 changing jobs, headless 160×50), in ms")
        runs = [asyncio.run(ui_cpu_per_snapshot(20, 0.25)) for _ in range(args.runs)]
        print(f"   per snapshot, idle subtracted: {med([r['per_snapshot_ms'] for r in runs])}")
        print(f"   headless app idle: {med([r['idle_pct'] for r in runs])} % of one core")
    return 0


if __name__ == "__main__":
    sys.exit(main())
