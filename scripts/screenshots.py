#!/usr/bin/env python3
"""Render README screenshots of the TUI with the real engine: SVG from Textual, PNG via rsvg-convert.

    .venv/bin/python scripts/screenshots.py                 # everything (about 2-3 minutes on 2 cores)
    .venv/bin/python scripts/screenshots.py --only monitor  # one of: monitor, fake-gpus, trio, compare, gpu
    .venv/bin/python scripts/screenshots.py --out DIR       # default: screenshots/

Shots (160×50):
  monitor.svg          `gputop-dl` on this machine (the monitor's engine with the real NVML wrapper),
                       with three plain PyTorch scripts started outside it, each needing ~1.8
                       cores: found, their CPU wait, the live verdict with estimated slowdowns,
                       and 45 s of history in the charts
  monitor_fake_gpus    the same engine with a fake NVML module (4 GPUs, 2 GPU processes), to show
                       the GPU panel on a machine without GPUs
  monitor_details      the first found job's details: who, command, cwd, Slurm/container where
                       there are, and its process tree (trainer, loader workers) with CPU, RSS, state
  monitor_gpu          (--only gpu, a real GPU only) two copies of tests/external/gpu_plain.py
                       started by hand on GPU 0: found, and the live verdict GPU-contended
  launch_trio          a real launch of workloads/mobilenet_trio.toml 25 s into its co-run, dark and
  launch_trio_light    light theme; launch_trio_done: the same run at its end, with its verdict
  compare              `gputop-dl compare A B` of the two latest launches in GPUTOP_DL_HOME
                       (--home to pick a data dir). The one in screenshots/: two headless
                       launches of workloads/mobilenet_trio.toml, the second with
                       transforms = "light" (did a lighter input pipeline help? barely)

Sessions go to a temporary GPUTOP_DL_HOME unless --home is given. The PNGs need `rsvg-convert`
(Debian: apt-get install librsvg2-bin); the SVGs are rewritten for it first (DejaVu Sans Mono
instead of the web font, plain spaces with xml:space="preserve": rsvg collapses runs of &#160;).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

SIZE = (160, 50)
CHARTS_S = 45.0  # the monitor shot waits for this much history in the charts
CORUN_S = 25.0  # the mid-run trio shot: this far into its co-run
DEMO_DIR = "/srv/demo/train"  # where the monitor shot's scripts run (removed after)


def to_png(svg_path: str) -> str | None:
    exe = shutil.which("rsvg-convert")
    if exe is None:
        print("  rsvg-convert not found (apt-get install librsvg2-bin): SVG only")
        return None
    with open(svg_path, encoding="utf-8") as f:
        s = f.read()
    s = s.replace("&#160;", " ").replace("<svg ", '<svg xml:space="preserve" ', 1)
    s = s.replace("font-family: Fira Code, monospace", "font-family: DejaVu Sans Mono, monospace")
    s = s.replace('font-family: "Fira Code"', 'font-family: "DejaVu Sans Mono"')
    with tempfile.NamedTemporaryFile("w", suffix=".svg", delete=False, encoding="utf-8") as tmp:
        tmp.write(s)
    png = svg_path[:-4] + ".png"
    try:
        subprocess.run([exe, "--zoom", "1", tmp.name, "-o", png], check=True)
    finally:
        os.unlink(tmp.name)
    return png


def save(app, out: str, name: str) -> None:
    path = os.path.join(out, f"{name}.svg")
    with open(path, "w", encoding="utf-8") as f:
        f.write(app.export_screenshot(title=f"gputop-dl · {name.replace('_', ' ')}"))
    png = to_png(path)
    print(f"  wrote {os.path.relpath(path)}" + (f" and {os.path.relpath(png)}" if png else ""))


async def wait_until(pilot, cond, timeout: float, step: float = 0.2) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        await pilot.pause(step)
    return cond()


def start_gpu_jobs(out: str):
    """Two copies of tests/external/gpu_plain.py on GPU 0, started by hand (a real GPU only):
    they share its SMs, so the live verdict should call them GPU-contended."""
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    os.makedirs(DEMO_DIR, exist_ok=True)
    shutil.copy(os.path.join(ROOT, "tests", "external", "gpu_plain.py"), DEMO_DIR)
    return [subprocess.Popen(["python", "gpu_plain.py", "--seconds", "120", "--data-ms", "5"],
                             cwd=DEMO_DIR, env=env,
                             stdout=open(os.path.join(out, f"gpu_job_{i}.out"), "w"))
            for i in range(2)]


def start_jobs_to_find():
    """Three plain PyTorch scripts started outside gputop-dl, as a user's own trainings from a
    terminal (`python calibrated.py ...` in tests/external, the venv's python first on PATH),
    each needing about 1.8 cores alone (two loader workers): on a 2-core box they are only
    concurrent, and the monitor's live verdict says so. One after the other, as by hand: the
    copies are told apart by their start times."""
    from tests.fakes.by_hand import HEAVY, ByHand

    scripts = ByHand()
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    os.makedirs(DEMO_DIR, exist_ok=True)  # a user's folder, not this checkout's path
    shutil.copy(os.path.join(ROOT, "tests", "external", "calibrated.py"), DEMO_DIR)
    for _ in range(3):
        scripts.start(HEAVY, 1, cwd=DEMO_DIR, env=env, program=["python", "calibrated.py"])
    return scripts


async def shot_details(app, pilot, out: str, name: str) -> None:
    """The details of the first job in the table, with its process tree."""
    app.table.move_cursor(-len(app.table.order()))
    await pilot.press("enter")
    await pilot.pause(0.3)
    save(app, out, name)
    await pilot.press("escape")


async def shot_gpu_monitor(out: str) -> None:
    from gputop_dl.collect.nvml.gpus import Nvml
    from gputop_dl.present.tui.app import GputopApp
    from gputop_dl.runner import Launcher, export_for_tui, monitor_engine

    nvml = Nvml()
    procs = start_gpu_jobs(out)
    try:
        engine = monitor_engine(nvml)
        app = GputopApp(engine, mode="monitor", launcher=Launcher(nvml), exporter=export_for_tui)
        outs = [os.path.join(out, f"gpu_job_{i}.out") for i in range(2)]

        def training() -> bool:  # each script has printed a step report
            return all(os.path.exists(f) and '"step"' in open(f).read() for f in outs)

        async with app.run_test(size=SIZE) as pilot:
            await wait_until(pilot, training, 90)
            await pilot.pause(8)  # ticks of both jobs training
            await wait_until(pilot, lambda: engine.snapshot is not None
                             and engine.snapshot.verdict is not None
                             and sum(1 for j in engine.snapshot.jobs
                                     if j.slowdown_source == "estimated") >= 2, 90)
            await pilot.pause(15)  # more ticks: the GPU history fills in
            snap = engine.snapshot
            print(f"  live verdict at {time.time():.1f}: {(snap.verdict or {}).get('kind')}; "
                  + ", ".join(f"{j.name} {j.slowdown} ({j.slowdown_source})" for j in snap.jobs))
            save(app, out, "monitor_gpu")
            await shot_details(app, pilot, out, "monitor_gpu_details")
            await app.stop_and_exit()
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait()
        shutil.rmtree(os.path.dirname(DEMO_DIR), ignore_errors=True)


async def shot_monitor(out: str, fake_gpus: bool) -> None:
    from gputop_dl.collect.nvml.gpus import Nvml
    from gputop_dl.present.tui.app import GputopApp
    from gputop_dl.runner import Launcher, export_for_tui, monitor_engine

    if fake_gpus:
        from tests.fakes.nvml import GiB, FakeProcess, FakePynvml

        fake = FakePynvml(gpus=4)
        for g, (util, mem, temp, power) in zip(fake.gpus, ((97, 71, 74, 610), (38, 22, 58, 260),
                                                            (64, 40, 66, 420), (3, 1, 41, 90))):
            g.util, g.mem_used, g.temp_c, g.power_mw = util, mem * GiB, temp, power * 1000
        fake.gpus[0].processes = [FakeProcess(pid=os.getpid(), used_memory=38 * GiB)]
        fake.gpus[2].processes = [FakeProcess(pid=os.getppid(), used_memory=21 * GiB)]
        nvml = Nvml(module=fake)
    else:
        nvml = Nvml()
    scripts = None if fake_gpus else start_jobs_to_find()
    try:
        engine = monitor_engine(nvml)
        app = GputopApp(engine, mode="monitor", launcher=Launcher(nvml), exporter=export_for_tui)
        async with app.run_test(size=SIZE) as pilot:
            await wait_until(pilot, lambda: app.renders >= 4, 10)
            if scripts:  # until the live verdict gives each found job its estimated slowdown
                await wait_until(pilot, lambda: engine.snapshot is not None
                                 and engine.snapshot.verdict is not None
                                 and sum(1 for j in engine.snapshot.jobs
                                         if j.slowdown_source == "estimated") >= 3, 60)
                await pilot.pause(12)  # more ticks: the rows' sparklines fill in
            # and the history charts: a point per closed bucket, built again every 15 s
            from gputop_dl.present.tui.history_panel import HistoryPanel

            hist = app.query_one(HistoryPanel)
            await wait_until(pilot, lambda: hist.builds >= 2
                             and hist.now - hist.started >= CHARTS_S, CHARTS_S + 40)
            await pilot.pause(0.3)
            save(app, out, "monitor_fake_gpus" if fake_gpus else "monitor")
            if scripts:
                await shot_details(app, pilot, out, "monitor_details")
            await app.stop_and_exit()
    finally:
        if scripts:
            scripts.stop()
            shutil.rmtree(os.path.dirname(DEMO_DIR), ignore_errors=True)


async def shot_trio(out: str, at_s: float) -> None:
    from gputop_dl.collect.nvml.gpus import Nvml
    from gputop_dl.present.tui.app import GputopApp
    from gputop_dl.runner import launch_engine, open_spec

    nvml = Nvml()
    path = os.path.join("workloads", "mobilenet_trio.toml")
    spec = open_spec(path, nvml)
    engine = launch_engine(spec, nvml, command=f"scripts/screenshots.py {path}")
    app = GputopApp(engine, mode="launch", spec=spec)
    t0 = time.monotonic()
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: time.monotonic() - t0 >= at_s, at_s + 5, step=0.5)
        await wait_until(pilot, lambda: engine.phase == "co-run", 300, step=0.5)
        t_corun = time.monotonic()

        def corun_progress() -> bool:  # mid-run means the co-run jobs have taken steps
            snap = engine.snapshot
            return snap is not None and snap.phase == "co-run" and all(
                j.step_time_s is not None for j in snap.jobs if j.status == "running") and any(
                j.status == "running" for j in snap.jobs)

        await wait_until(pilot, lambda: time.monotonic() - t_corun >= CORUN_S and corun_progress(),
                         CORUN_S + 40, step=0.5)
        await pilot.pause(0.3)
        print(f"  trio at {time.monotonic() - t0:.0f} s: phase {engine.phase}")
        save(app, out, "launch_trio")
        app.theme = "textual-light"
        await pilot.pause(0.3)
        save(app, out, "launch_trio_light")
        app.theme = "textual-dark"
        await wait_until(pilot, lambda: not engine.running, 400, step=0.5)
        await pilot.pause(0.5)
        print(f"  trio finished after {time.monotonic() - t0:.0f} s: state {engine.state}, "
              f"verdict {(engine.verdict or {}).get('kind')}")
        save(app, out, "launch_trio_done")
        await app.stop_and_exit()


def shot_compare(out: str) -> None:
    """`gputop-dl compare A B` of the two latest sessions, as the console prints it (SVG)."""
    from rich.console import Console

    from gputop_dl.present.report import list_sessions
    from gputop_dl.present.report.compare import compare_sessions, comparison_table

    rows = [r for r in list_sessions() if r["file"]][:2]  # the two newest launches
    if len(rows) < 2:
        print(f"  compare: {len(rows)} launch(es) recorded, two needed (launch twice into one "
              "--home; a monitor session has no jobs in common with a launch): skipped")
        return
    doc = compare_sessions(rows[1]["id"], rows[0]["id"])
    console = Console(record=True, width=SIZE[0], file=open(os.devnull, "w"))
    console.print(f"$ gputop-dl compare {rows[1]['id']} {rows[0]['id']}")
    console.print(comparison_table(doc))
    path = os.path.join(out, "compare.svg")
    with open(path, "w", encoding="utf-8") as f:
        f.write(console.export_svg(title="gputop-dl · compare"))
    png = to_png(path)
    print(f"  wrote {os.path.relpath(path)}" + (f" and {os.path.relpath(png)}" if png else ""))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(ROOT, "screenshots"))
    ap.add_argument("--only", choices=("monitor", "fake-gpus", "trio", "compare", "gpu"))
    ap.add_argument("--at", type=float, default=0.0,
                    help="at least this many seconds into the trio run for the mid-run shot (it is taken 25 s into the co-run)")
    ap.add_argument("--home", help="GPUTOP_DL_HOME for the recorded session (default: a temp dir)")
    args = ap.parse_args()
    os.chdir(ROOT)
    os.makedirs(args.out, exist_ok=True)
    home = args.home or tempfile.mkdtemp(prefix="gputop-dl-shots-")
    os.environ["GPUTOP_DL_HOME"] = home
    if args.only in (None, "monitor"):
        print("monitor (this machine)")
        asyncio.run(shot_monitor(args.out, fake_gpus=False))
    if args.only == "gpu":  # a real GPU only: not part of the default set
        print("monitor with two GPU jobs (this machine's GPU)")
        asyncio.run(shot_gpu_monitor(args.out))
    if args.only in (None, "fake-gpus"):
        print("monitor (fake NVML, 4 GPUs)")
        asyncio.run(shot_monitor(args.out, fake_gpus=True))
    if args.only in (None, "trio"):
        print(f"launch workloads/mobilenet_trio.toml (shot at {args.at:.0f} s, then at the end)")
        asyncio.run(shot_trio(args.out, args.at))
    if args.only in (None, "compare"):
        print("compare the two latest sessions")
        shot_compare(args.out)
    if not args.home:
        shutil.rmtree(home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
