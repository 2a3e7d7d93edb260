"""Many writers in one data directory at once, run for real: is every session whole?

    python scripts/store_soak.py [RUNS] [--tui]     # default 50 runs

With --tui the monitor's TUI (`gputop-dl` in a tmux session) runs beside them too, and quits
with `q` at the end.

Each run, in a new GPUTOP_DL_HOME: `serve --record` (the monitor's engine, recording), two
`launch --headless` of two tiny built-in trainers started 0–1.5 s apart, and readers beside
them (`sessions --json`, `export`) until the launches end. Then the database must pass
`PRAGMA integrity_check`, both launch sessions must be "finished" with every job "done" and
all its steps recorded, and the monitor's session "finished". Prints one line per run and a
summary; exit 1 if any run failed. About 12 s a run on 2 cores.
"""

from __future__ import annotations

import os
import random
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time

PY = sys.executable
STEPS = 20

JOB = """
[[workload]]
name = "{name}"
model = "synthetic"
input_size = 8
num_classes = 10
batch_size = 4
num_workers = 0
sample_cpu_ms = 1.0
step_device_ms = 20.0
epochs = 1
steps_per_epoch = {steps}
warmup_steps = 1
"""


def workload_file(d: str) -> str:
    path = os.path.join(d, "two.toml")
    with open(path, "w", encoding="utf-8") as f:
        f.write('[session]\nname = "soak"\ninterval = 0.3\nbaseline = "none"\n')
        f.write("".join(JOB.format(name=n, steps=STEPS) for n in ("a", "b")))
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def problems(db_path: str, monitors: int = 1) -> list[str]:
    """What is wrong with the database after a run: [] when it is whole and every session
    complete."""
    try:
        db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
        check = [r[0] for r in db.execute("PRAGMA integrity_check")]
        if check != ["ok"]:
            return [f"integrity_check: {check[:3]}"]
        out = []
        sessions = db.execute("SELECT id, kind, state FROM sessions").fetchall()
        kinds = sorted(k for _, k, _ in sessions)
        if kinds != ["launch", "launch"] + ["monitor"] * monitors:
            out.append(f"sessions {kinds}")
        for sid, kind, state in sessions:
            if state != "finished":
                out.append(f"{kind} session {state}")
            if kind != "launch":
                continue
            for jk, name, status in db.execute(
                    "SELECT jk, name, status FROM jobs WHERE session_id=? AND launched=1", (sid,)):
                steps = db.execute("SELECT COUNT(*) FROM steps WHERE jk=?", (jk,)).fetchone()[0]
                if status != "done" or steps < STEPS:
                    out.append(f"job {name}: {status}, {steps} of {STEPS} steps")
        db.close()
        return out
    except sqlite3.Error as exc:
        return [f"unreadable: {exc}"]


def one_run(d: str, seed: int | None = None, tui: bool = False) -> list[str]:
    """One run in a new data directory under `d`; returns its problems ([] = whole)."""
    rng = random.Random(seed)
    home = tempfile.mkdtemp(dir=d)
    env = dict(os.environ, GPUTOP_DL_HOME=home)
    toml = workload_file(home)
    tmux = f"soak-{os.getpid()}"
    if tui:
        subprocess.run(["tmux", "new-session", "-d", "-x", "160", "-y", "50", "-s", tmux,
                        f"GPUTOP_DL_HOME={home} {PY} -m gputop_dl; echo $? > {home}/tui.rc"],
                       check=True)
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.PIPE, "env": env, "text": True}
    serve = subprocess.Popen([PY, "-m", "gputop_dl", "serve", "--listen",
                              f"127.0.0.1:{free_port()}", "--record", "--interval", "0.5"], **quiet)
    launches = []
    try:
        time.sleep(rng.uniform(0.0, 1.0))
        for _ in range(2):
            launches.append(subprocess.Popen(
                [PY, "-m", "gputop_dl", "launch", toml, "--headless"], **quiet))
            time.sleep(rng.uniform(0.0, 1.5))
        readers = 0
        while any(p.poll() is None for p in launches):  # readers beside the writers
            subprocess.run([PY, "-m", "gputop_dl", "sessions", "--json"], capture_output=True,
                           env=env, timeout=60)
            subprocess.run([PY, "-m", "gputop_dl", "export", os.path.join(home, "r.json")],
                           capture_output=True, env=env, timeout=60)
            readers += 1
        out = [f"launch exit {p.returncode}: {p.stderr.read()[-300:] if p.stderr else ''}"
               for p in launches if p.wait(timeout=120) != 0]
    finally:
        for p in launches:
            if p.poll() is None:
                p.kill()
        serve.send_signal(signal.SIGTERM)
        try:
            serve.wait(timeout=30)
        except subprocess.TimeoutExpired:
            serve.kill()
    if serve.returncode not in (0, -signal.SIGTERM, 128 + signal.SIGTERM):
        out.append(f"serve exit {serve.returncode}")
    if tui:
        subprocess.run(["tmux", "send-keys", "-t", tmux, "q"], capture_output=True)
        rc = os.path.join(home, "tui.rc")
        deadline = time.monotonic() + 30
        while not os.path.exists(rc) and time.monotonic() < deadline:
            time.sleep(0.1)
        subprocess.run(["tmux", "kill-session", "-t", tmux], capture_output=True)
        if not os.path.exists(rc):
            out.append("the TUI did not quit on q")
    return out + problems(os.path.join(home, "sessions.db"), monitors=2 if tui else 1)


def main() -> int:
    args = [a for a in sys.argv[1:] if a != "--tui"]
    tui = "--tui" in sys.argv[1:]
    runs = int(args[0]) if args else 50
    failed = 0
    with tempfile.TemporaryDirectory() as d:
        for i in range(runs):
            t0 = time.monotonic()
            bad = one_run(d, seed=i, tui=tui)
            failed += bool(bad)
            print(f"run {i + 1}: {'ok' if not bad else '; '.join(bad)} ({time.monotonic() - t0:.1f} s)",
                  flush=True)
    print(f"{runs - failed} of {runs} runs whole")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
