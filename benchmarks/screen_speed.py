#!/usr/bin/env python3
"""The monitor's speed beside its floors, measured side by side in one run.

    .venv/bin/python benchmarks/screen_speed.py                       # about 4 minutes
    .venv/bin/python benchmarks/screen_speed.py --runs 5 --seconds 30 --only first-screen

1. First non-empty screen, in a detached 160×50 tmux pane, from starting the command to its first
   real content on screen (polled every 10 ms): `gputop-dl` (its host panel, saying that it
   reads the host or, in a checkout from before the panels said what they wait for, "of N
   CPUs": the first frame is the header and the host panel), a bare Textual app (one Static;
   "bare textual ready") and `top -d 1` ("load average"). The three alternate within each
   round. Target: gputop-dl within 100 ms of the bare app (median; printed with the ratio, the
   older target ≤ 1.3×). For gputop-dl also the time until its first reading is on screen (the
   host panel's "of N CPUs") and until its whole layout is drawn (the key bar, the last part to
   come). Beside each time, the CPU seconds its process had used by then (the work before the
   first screen: a shared box's load moves it far less than the wall time). Then gputop-dl
   again with 3 found jobs running, until their rows are on screen (`--no-found-jobs`: not).
   This checkout's bytecode is compiled first, as an install does (`--no-compile`: not).
2. CPU with N found jobs: `gputop-dl --stall-budget 0` (py-spy off), the Textual repaint floor
   (FLOOR below: gputop-dl's layout in bare Textual, changing as many lines a second as
   gputop-dl's pane does with N jobs, with no engine and no data) and `top -d 1`, the three
   running at once in their own tmux panes over the same window, each its own process's CPU
   seconds / wall: % of one core. With 3 jobs (target: gputop-dl ≤ 1.2× top) and with 12
   (target: the cost grows ≤ 1.2× from 3 to 12). The floor shows how much of the cost is
   Textual's for what is shown, and so what part gputop-dl can act on. Jobs: light plain
   PyTorch loops outside gputop-dl (a trainer and 2 loader workers each, a batch every 400 ms:
   3 processes per job).

glances (`--glances`, its own venv; skipped when missing) runs beside them in both parts: its
first screen ("MEM") and its CPU at `-t 1`. The floor's history panel repaints
all its 30 lines as often as gputop-dl's history charts are built (their subtitle's
"redrawn every N s"); the plotext build itself is gputop-dl's own part.

Ratios are taken within one run, so the load of a shared box hits both sides alike; the load
average is printed before and after. Needs tmux.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import psutil

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks.tui import PY, Tmux, find_proc, own_cpu  # noqa: E402

BARE = ("from textual.app import App\nfrom textual.widgets import Static\n"
        "class Bare(App):\n    def compose(self):\n        yield Static('bare textual ready')\n"
        "Bare().run()\n")
# The repaint floor: gputop-dl's layout in bare Textual, with no engine and no data. With N
# jobs it changes, each second, 3 lines of a host panel and N rows of a table, and N rows of a
# history panel as often as gputop-dl's history charts are built (its subtitle, "redrawn every
# 12 s" at 160 columns with two figures): as gputop-dl's pane changes (the run counts the lines
# that change each second, to check). Each line is repainted alone (`refresh(Region)`), the cheapest partial
# update Textual offers, and the one gputop-dl's panels use (present/tui/base.py). Its CPU is
# what Textual costs to show those changes; whatever gputop-dl spends above it is its own.
BUCKET = re.compile(r"redrawn every ([\d.]+) s")  # gputop-dl's history subtitle (history_panel.py)
GLANCES = "/tmp/glances-venv/bin/glances"  # its own venv: python -m venv ... && pip install glances
FLOOR = """\
import sys
from rich.segment import Segment
from textual.app import App
from textual.containers import Horizontal
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Static


class Lines(Widget):
    DEFAULT_CSS = "Lines { border: round $primary; height: auto; }"

    def __init__(self, n, changing, **kw):
        super().__init__(**kw)
        self.lines, self.changing = ["line %d" % i for i in range(n)], changing

    def get_content_height(self, container, viewport, width):
        return len(self.lines)

    def render_line(self, y):
        text = self.lines[y] if y < len(self.lines) else ""
        return Strip([Segment(text)]).adjust_cell_length(self.size.width)

    def change(self, tick, every=1):
        if tick % every:
            return
        for y in range(self.changing):
            self.lines[y] = "row %d value %d" % (y, tick)
            self.refresh(Region(0, y, self.size.width, 1))


class Floor(App):
    CSS = "#bottom { height: 1fr; } #bottom Lines { height: 1fr; width: 1fr; } #charts { width: 3fr; }"

    def __init__(self, jobs, history_every):
        super().__init__()
        self.jobs, self.every, self.tick = jobs, history_every, 0

    def compose(self):
        n = self.jobs
        # host, jobs, and the history charts: all their lines once per bucket
        self.panels = [Lines(6, 3), Lines(n, n), Lines(30, 30)]
        yield Static("floor ready\\nbanner\\nreason\\nnote")
        yield self.panels[0]
        yield self.panels[1]
        with Horizontal(id="bottom"):
            self.panels[2].id = "charts"
            yield self.panels[2]
            yield Lines(30, 0)  # the log: unchanged
        yield Static(" Quit  Help")

    def on_mount(self):
        self.set_interval(1.0, self.step)

    def step(self):
        self.tick += 1
        host, table, history = self.panels
        host.change(self.tick)
        table.change(self.tick)
        history.change(self.tick, self.every)


Floor(int(sys.argv[1]), int(sys.argv[2])).run()
"""
SCRIPT = os.path.join(ROOT, "tests", "external", "stall_script.py")
WHOLE = r"\bQuit\b"  # gputop-dl's key bar: the last part of its layout to be drawn (app.py)
# gputop-dl's first screen: the host panel, waiting (app.py's WAITING) or with its first reading
# (a checkout older than the waiting words shows only that)
FIRST = r"reading the host…|of \d+ CPUs? "
READING = r"of \d+ CPUs? "  # the host panel's first reading (runner/deferred.py's preview)


def commands(home: str, glances: str = GLANCES) -> dict[str, tuple[str, str]]:
    """name -> (shell command in the pane, regex of its first real content); glances only where
    its venv is."""
    bare = os.path.join(home, "bare_textual.py")
    with open(bare, "w") as f:
        f.write(BARE)
    gdl = (f"cd {ROOT} && exec env -u COLUMNS -u LINES PYTHONPATH={ROOT} GPUTOP_DL_HOME={home} "
           f"TERM=xterm-256color {PY} -m gputop_dl --stall-budget 0")  # this checkout's code
    return {"gputop-dl": (gdl, FIRST),
            "bare textual": (f"cd {ROOT} && exec env TERM=xterm-256color {PY} {bare}",
                             r"bare textual ready"),
            "top": ("exec env TERM=xterm-256color HOME=" + home + " top -d 1", r"load average"),
            **({"glances": (f"exec env TERM=xterm-256color HOME={home} {glances} -t 1", r"\bMEM\b")}
               if os.path.exists(glances) else {})}


def first_screen(cmd: str, pattern: str, timeout: float = 20.0, then: str | None = None,
                 cpu: list[float] | None = None) -> float | None | tuple[float | None, float | None]:
    """Seconds from starting `cmd` until `pattern` is on screen (None: not within `timeout`);
    with `then`, also until that second pattern is (a pair). `cpu`: see `screen_times`."""
    times = screen_times(cmd, (pattern,) if then is None else (pattern, then), timeout, cpu)
    return times[0] if then is None else (times[0], times[1])


def cpu_seconds(proc: psutil.Process) -> float:
    """CPU seconds of all of a process's threads: their schedstat run times (nanoseconds), else
    its clock-tick times (10 ms steps: too coarse for a first screen's ~0.2 s)."""
    try:
        total = 0
        for task in os.listdir(f"/proc/{proc.pid}/task"):
            with open(f"/proc/{proc.pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
        return total / 1e9
    except (OSError, ValueError, IndexError):
        c = proc.cpu_times()
        return c.user + c.system


def screen_times(cmd: str, patterns: tuple[str, ...], timeout: float = 20.0,
                 cpu: list[float] | None = None) -> list[float | None]:
    """Seconds from starting `cmd` until each of `patterns` is first on screen (None: not within
    `timeout`). With `cpu`, the CPU seconds the command's process (the pane's, `exec`ed) had used
    when the first pattern was seen are appended to it: the work before the first screen, which
    the box's other load moves far less than the wall time."""
    tmux = Tmux()
    try:
        t0 = time.perf_counter()
        tmux("new-session", "-d", "-s", "b", "-x", "160", "-y", "50", cmd)
        pane = psutil.Process(int(tmux("list-panes", "-t", "b", "-F", "#{pane_pid}").split()[0]))
        seen: list[float | None] = [None] * len(patterns)
        while time.perf_counter() - t0 < timeout and None in seen:
            screen = tmux("capture-pane", "-p", "-t", "b")
            now = time.perf_counter() - t0
            if seen[0] is None and cpu is not None and re.search(patterns[0], screen):
                cpu.append(cpu_seconds(pane))
            seen = [t if t is not None or not re.search(p, screen) else now
                    for t, p in zip(seen, patterns)]
            time.sleep(0.01)
        return seen
    finally:
        tmux("send-keys", "-t", "b", "q")
        time.sleep(0.3)
        tmux.kill()


def start_jobs(n: int, seconds: float) -> list[subprocess.Popen]:
    return [subprocess.Popen([PY, SCRIPT, "--seconds", str(seconds), "--data-ms", "400",
                              "--compute-ms", "5", "--num-workers", "2"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for _ in range(n)]


def wait_jobs_ready(jobs: list[subprocess.Popen], timeout: float = 120.0) -> None:
    """Until every job has its loader workers (torch imported, first epoch started)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        try:
            if all(len(psutil.Process(j.pid).children()) >= 2 for j in jobs):
                return
        except psutil.Error:
            return
        time.sleep(0.5)


def cpu_side_by_side(n_jobs: int, seconds: float, home: str, glances: str = GLANCES) -> dict:
    """% of one core of gputop-dl, the repaint floor and top, measured over the same window, and
    how many lines of gputop-dl's pane change per second (median of the window's seconds)."""
    cmds = commands(home, glances)
    floor = os.path.join(home, "floor_textual.py")
    with open(floor, "w") as f:
        f.write(FLOOR)
    jobs = start_jobs(n_jobs, seconds + 180)
    panes: dict[str, Tmux] = {}
    try:
        wait_jobs_ready(jobs)
        procs = {}
        tmux = panes["gputop-dl"] = Tmux()
        tmux("new-session", "-d", "-s", "b", "-x", "160", "-y", "50", cmds["gputop-dl"][0])
        # the floor's history moves as gputop-dl's does: its bucket, once steady for 3 s (it
        # narrows when the CPU wait's first reading adds a chart)
        every, seen, t0 = None, [], time.monotonic()
        while time.monotonic() - t0 < 40:
            m = BUCKET.search(tmux("capture-pane", "-p", "-t", "b"))
            seen.append(float(m.group(1)) if m else None)
            if time.monotonic() - t0 > 5 and seen[-1] and seen[-6:] == [seen[-1]] * 6:
                every = seen[-1]
                break
            time.sleep(0.5)
        if every is None:
            return {"error": "gputop-dl's history panel showed no steady bucket within 40 s"}
        cmds["textual floor"] = (f"cd {ROOT} && exec env TERM=xterm-256color {PY} {floor} "
                                 f"{n_jobs} {max(1, round(every))}", r"floor ready")
        for name in [n for n in ("textual floor", "top", "glances") if n in cmds]:
            tmux = panes[name] = Tmux()
            tmux("new-session", "-d", "-s", "b", "-x", "160", "-y", "50", cmds[name][0])
        time.sleep(1.0)
        for name, tmux in panes.items():
            pane_pid = int(tmux("list-panes", "-t", "b", "-F", "#{pane_pid}").split()[0])
            procs[name] = find_proc(pane_pid, {
                "gputop-dl": lambda part: part == "gputop_dl",
                "textual floor": lambda part: part == floor,
                "top": lambda part: os.path.basename(part) == "top",
                "glances": lambda part: os.path.basename(part) == "glances"}[name])
        if any(p is None for p in procs.values()):
            return {"error": f"not found: {[k for k, p in procs.items() if p is None]}"}
        time.sleep(6.0)  # past start-up and the first full /proc pass
        c0 = {k: own_cpu(p) for k, p in procs.items()}
        w0 = time.monotonic()
        changed, last = [], None
        while time.monotonic() - w0 < seconds:
            screen = panes["gputop-dl"]("capture-pane", "-p", "-t", "b").splitlines()
            if last is not None:
                changed.append(sum(a != b for a, b in zip(screen, last)))
            last = screen
            time.sleep(1.0)
        wall = time.monotonic() - w0
        out: dict = {k: 100 * (own_cpu(p) - c0[k]) / wall for k, p in procs.items()}
        out["lines_changed"] = statistics.median(changed) if changed else None
        out["history_every"] = every
        screen = panes["gputop-dl"]("capture-pane", "-p", "-t", "b")
        out["jobs_on_screen"] = screen.count("stall_script.py")
        return out
    finally:
        stop_all(panes, jobs)


def stop_all(panes: dict[str, Tmux], jobs: list[subprocess.Popen]) -> None:
    """Quit every pane's program (`q`), close the panes, end the jobs and reap them."""
    for tmux in panes.values():
        tmux("send-keys", "-t", "b", "q")
    time.sleep(0.5)
    for tmux in panes.values():
        tmux.kill()
    for j in jobs:
        j.terminate()
    for j in jobs:
        j.wait()


def med(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", choices=("first-screen", "cpu"))
    ap.add_argument("--runs", type=int, default=5, help="first-screen rounds (default 5)")
    ap.add_argument("--seconds", type=float, default=30.0, help="CPU window (default 30)")
    ap.add_argument("--jobs", default="3,12", help="found jobs for the CPU cases (default 3,12)")
    ap.add_argument("--glances", default=GLANCES, help="glances in its own venv (missing: skipped)")
    ap.add_argument("--no-found-jobs", dest="found_jobs", action="store_false",
                    help="first screen: skip the rounds with 3 found jobs running")
    ap.add_argument("--no-compile", dest="compile", action="store_false",
                    help="do not compile this checkout's bytecode first (measures a start that "
                         "compiles every module, as with PYTHONDONTWRITEBYTECODE=1)")
    args = ap.parse_args()
    if shutil.which("tmux") is None:
        print("tmux not installed: nothing measured")
        return 0
    home = tempfile.mkdtemp(prefix="gdl-speed-")
    print(f"machine: {psutil.cpu_count()} CPUs; load average before: {load()}")
    if args.compile:
        # as a pip or pipx install does (and an editable one on its first run, unless
        # PYTHONDONTWRITEBYTECODE is set): without it every start compiles the sources again
        subprocess.run([PY, "-m", "compileall", "-q", os.path.join(ROOT, "gputop_dl")], check=True)
    print(f"bytecode of this checkout: {'compiled first' if args.compile else 'as found'}; "
          f"PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '(unset)')}")
    try:
        if args.only in (None, "first-screen"):
            cmds = commands(home, args.glances)
            times: dict[str, list[float]] = {k: [] for k in cmds}
            cpu: dict[str, list[float]] = {k: [] for k in cmds}  # CPU until the first screen
            whole: list[float] = []  # gputop-dl: until the whole layout is drawn (its key bar)
            reading: list[float] = []  # gputop-dl: until its first reading is on screen
            names = list(cmds)
            for r in range(args.runs):
                k = r % len(names)
                for name in names[k:] + names[:k]:  # rotate the order per round
                    if name == "gputop-dl":
                        t, t_reading, t_whole = screen_times(cmds[name][0], (FIRST, READING, WHOLE),
                                                             cpu=cpu[name])
                        if t_whole is not None:
                            whole.append(t_whole)
                        if t_reading is not None:
                            reading.append(t_reading)
                    else:
                        t = first_screen(*cmds[name], cpu=cpu[name])
                    if t is not None:
                        times[name].append(t)
            print("\n1. first non-empty screen (s), median (min–max) of "
                  f"{args.runs} rounds, alternating")
            for name, xs in times.items():
                if xs:
                    print(f"   {name:<13} {med(xs):.3f}  ({min(xs):.3f}–{max(xs):.3f})")
            g, b = med(times["gputop-dl"]), med(times["bare textual"])
            if g and b:
                print(f"   gputop-dl − bare textual: {1000 * (g - b):+.0f} ms  (target ≤ +100 ms); "
                      f"gputop-dl / bare textual: {g / b:.2f}×  (older target ≤ 1.3×)")
            print("   CPU seconds of the process until its first screen, median (min–max): " + "; ".join(
                f"{name} {med(xs):.3f} ({min(xs):.3f}–{max(xs):.3f})" for name, xs in cpu.items() if xs))
            gc, bc = med(cpu["gputop-dl"]), med(cpu["bare textual"])
            if gc and bc:
                print(f"   CPU until the first screen, gputop-dl − bare textual: {1000 * (gc - bc):+.0f} ms")
            gl = med(times.get("glances", []))
            if g and gl:
                print(f"   gputop-dl / glances: {g / gl:.2f}×  (target ≤ 1.0×)")
            if reading:
                print(f"   gputop-dl, until its first reading (the host's CPUs) is on screen: "
                      f"{med(reading):.3f}  ({min(reading):.3f}–{max(reading):.3f})")
            if whole:
                print(f"   gputop-dl, until the whole layout (the key bar) is drawn: "
                      f"{med(whole):.3f}  ({min(whole):.3f}–{max(whole):.3f})")
            print(f"   load average now: {load()}")
            # the same start with 3 found jobs running, until their rows are on screen (the
            # first frame waits for the first tick, which reads every process once)
            with_jobs: list[float] = []
            jobs = start_jobs(3, 600) if args.found_jobs else []
            try:
                wait_jobs_ready(jobs)
                with_jobs = [t for t in (first_screen(cmds["gputop-dl"][0], r"stall_script\.py")
                                         for _ in range(args.runs if jobs else 0)) if t is not None]
            finally:
                for j in jobs:
                    j.kill()
                    j.wait()
            if with_jobs:
                print(f"   gputop-dl, 3 found jobs running, until their rows show: "
                      f"{med(with_jobs):.3f}  ({min(with_jobs):.3f}–{max(with_jobs):.3f})")
        if args.only in (None, "cpu"):
            print(f"\n2. CPU, % of one core over {args.seconds:.0f} s, all at once "
                  "(gputop-dl --stall-budget 0; the textual repaint floor; top -d 1; glances -t 1)")
            res = {}
            for n in [int(x) for x in args.jobs.split(",")]:
                r = res[n] = cpu_side_by_side(n, args.seconds, home, args.glances)
                if "error" in r:
                    print(f"   {n} jobs: {r['error']}")
                    continue
                fl = r["textual floor"]
                print(f"   {n:>2} found jobs ({r['jobs_on_screen']} mentions on screen; "
                      f"{r['lines_changed']:g} of gputop-dl's lines change a second, the floor "
                      f"changes {n + 3}, and its 30 chart lines every {r['history_every']:g} s):\n"
                      f"      gputop-dl {r['gputop-dl']:.2f} %, textual floor {fl:.2f} %, "
                      f"top {r['top']:.2f} %" + (f", glances {r['glances']:.2f} %" if "glances" in r else ""))
                if r["top"] and fl:
                    print(f"      gputop-dl / top {r['gputop-dl'] / r['top']:.2f}× (target ≤ 1.2×); "
                          f"floor / top {fl / r['top']:.2f}×; gputop-dl / floor "
                          f"{r['gputop-dl'] / fl:.2f}× (its own part: "
                          f"{r['gputop-dl'] - fl:.2f} % of a core)")
            ns = sorted(n for n in res if "error" not in res[n])
            if len(ns) >= 2 and res[ns[0]]["gputop-dl"]:
                lo, hi = res[ns[0]], res[ns[-1]]
                for n in ns:
                    print(f"   {n} jobs: gputop-dl / floor {res[n]['gputop-dl'] / res[n]['textual floor']:.2f}× "
                          "(target ≤ 1.2×)")
                print(f"   growth {ns[0]} → {ns[-1]} jobs: gputop-dl ×{hi['gputop-dl'] / lo['gputop-dl']:.2f} "
                      f"(target ≤ 1.2×), textual floor ×{hi['textual floor'] / lo['textual floor']:.2f}, "
                      f"top ×{hi['top'] / lo['top']:.2f}")
    finally:
        shutil.rmtree(home, ignore_errors=True)
    print(f"\nload average after: {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
