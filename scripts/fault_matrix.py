"""The fault matrix, run for real: each hostile case through the CLI.

    python scripts/fault_matrix.py [WORDS...]   # only the cases whose title has a word

Every case runs `python -m gputop_dl ...` in its own temporary data dir (GPUTOP_DL_HOME) with
tiny jobs (sleep, python -c), checks what must hold (exit code, one line without a traceback,
no surviving process, the data kept) and prints a Markdown table; exit 1 if a case fails.
About 6 minutes on 2 cores (the four 3,000-job cases take most of it). As root, the
permission cases run their commands as `nobody` (setpriv; docs/faults.md says how).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time

import psutil

PY = sys.executable


def gdl(home: str, *args: str, timeout: float = 60, **kw) -> subprocess.CompletedProcess:
    env = dict(os.environ, GPUTOP_DL_HOME=home)
    return subprocess.run([PY, "-m", "gputop_dl", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, **kw)


def workload(d: str, jobs: list[tuple[str, str]], session: str = 'name = "faults"',
             extra: str = "", baseline: str = "none") -> str:
    body = f'[session]\n{session}\ninterval = 0.2\nbaseline = "{baseline}"\n{extra}\n'
    for name, rest in jobs:
        body += f'[[workload]]\nname = {json.dumps(name)}\n{rest}\n'
    path = os.path.join(d, "w.toml")
    with open(path, "w") as f:
        f.write(body)
    return path


def one_line(p: subprocess.CompletedProcess) -> bool:
    err = p.stderr.strip()
    return p.returncode == 2 and "Traceback" not in err and len(err.splitlines()) == 1


def survivors(marker: str) -> list[int]:
    out = []
    for p in psutil.process_iter(["cmdline"]):
        if marker in " ".join(p.info["cmdline"] or []):
            out.append(p.pid)
    return out


def wait_gone(marker: str, timeout: float = 5.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if not survivors(marker):
            return True
        time.sleep(0.1)
    return False


def case_kill9(d: str, home: str) -> tuple[bool, str]:
    mark = "293.123"
    path = workload(d, [("shell", f'command = "sleep {mark}; true"\nshell = true'),
                        ("bg", f'command = "sleep {mark}1 & echo started"\nshell = true'),
                        ("child", 'command = ["%s", "-c", "import subprocess, time; '
                         'subprocess.Popen([\\"sleep\\", \\"%s2\\"]); time.sleep(300)"]'
                         % (PY, mark))])
    env = dict(os.environ, GPUTOP_DL_HOME=home)
    p = subprocess.Popen([PY, "-m", "gputop_dl", "launch", path, "--headless"], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    end = time.monotonic() + 20
    while time.monotonic() < end and len(survivors(mark)) < 4:  # 2 shells' sleeps, sh, child
        time.sleep(0.2)
    seen = len(survivors(mark))
    if seen < 4:
        p.kill()
        return False, f"only {seen} of the jobs' processes started"
    p.send_signal(signal.SIGKILL)
    p.wait()
    t0 = time.monotonic()
    ok = wait_gone(mark)
    return ok, (f"{seen} job processes, none left {time.monotonic() - t0:.2f} s after kill -9"
                if ok else f"survivors: {survivors(mark)}")


def case_sigint(d: str, home: str) -> tuple[bool, str]:
    path = workload(d, [("a", 'command = ["sleep", "77.5"]'), ("b", 'command = ["sleep", "77.5"]')])
    env = dict(os.environ, GPUTOP_DL_HOME=home)
    p = subprocess.Popen([PY, "-m", "gputop_dl", "launch", path, "--headless"], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(2.5)
    t0 = time.monotonic()
    p.send_signal(signal.SIGINT)
    code = p.wait(timeout=30)
    took = time.monotonic() - t0
    rows = gdl(home, "sessions").stdout
    ok = code == 130 and wait_gone("sleep 77.5", 2) and "interrupted" in rows
    return ok, f"exit {code} after {took:.1f} s, session kept as interrupted"


def case_sigint_baseline(d: str, home: str) -> tuple[bool, str]:
    """SIGINT while a solo baseline runs: the baseline job is stopped too, none left running."""
    path = workload(d, [("a", 'command = ["sleep", "77.6"]'), ("b", 'command = ["sleep", "77.6"]')],
                    baseline="measure", extra="baseline_timeout_s = 60")
    env = dict(os.environ, GPUTOP_DL_HOME=home)
    p = subprocess.Popen([PY, "-m", "gputop_dl", "launch", path, "--headless"], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    end = time.monotonic() + 20
    while time.monotonic() < end and not survivors("sleep 77.6"):
        time.sleep(0.1)
    time.sleep(0.5)
    t0 = time.monotonic()
    p.send_signal(signal.SIGINT)
    code = p.wait(timeout=30)
    took = time.monotonic() - t0
    gone = wait_gone("sleep 77.6", 2)
    con = sqlite3.connect(f"file:{os.path.join(home, 'sessions.db')}?mode=ro", uri=True)
    states = dict(con.execute("SELECT name, status FROM jobs").fetchall())
    con.close()
    ok = code == 130 and gone and "running" not in states.values() and \
        "interrupted" in gdl(home, "sessions").stdout
    return ok, f"exit {code} after {took:.1f} s, no job left, jobs recorded {states}"


def case_corrupt_db(d: str, home: str) -> tuple[bool, str]:
    os.makedirs(home, exist_ok=True)
    with open(os.path.join(home, "sessions.db"), "wb") as f:
        f.write(b"this is not a database" * 100)
    r = gdl(home, "sessions")
    path = workload(d, [("a", 'command = ["true"]')])
    lr = gdl(home, "launch", path, "--headless")
    kept = [n for n in os.listdir(home) if n.startswith("sessions.corrupt")]
    ok = one_line(r) and lr.returncode == 0 and kept
    return bool(ok), f"sessions: exit {r.returncode}, one line; launch: moved aside as {kept[:1]}"


def case_home_under_file(d: str, home: str) -> tuple[bool, str]:
    f = os.path.join(d, "afile")
    open(f, "w").close()
    path = workload(d, [("a", 'command = ["true"]')])
    runs = {c[0]: gdl(os.path.join(f, "home"), *c) for c in
            (["launch", path, "--headless"], ["sessions"], ["export", os.path.join(d, "r.md")])}
    ok = all(one_line(p) and "GPUTOP_DL_HOME" in p.stderr for p in runs.values())
    return ok, ", ".join(f"{c}: exit {p.returncode}" for c, p in runs.items()) + \
        f" ({runs['launch'].stderr.strip()[len('gputop-dl: error: '):][:70]}…)"


def case_markup(d: str, home: str) -> tuple[bool, str]:
    msg = "boom [/] [link=http://x]click[/link] \x1b]0;pwned\x07"
    path = workload(d, [("a", 'command = ["%s", "-c", "raise RuntimeError(%s)"]'
                         % (PY, json.dumps(msg).replace('"', '\\"')))],
                    session='name = "evil \\u001b[31mred"')
    r = gdl(home, "launch", path, "--headless")
    out = r.stdout + r.stderr
    ok = "\x1b" not in out and "Traceback" not in out and "[/]" in out
    return ok, f"exit {r.returncode}; markup printed literally, no raw ESC"


def case_bad_program(d: str, home: str) -> tuple[bool, str]:
    path = workload(d, [("good", 'command = ["sleep", "0.2"]'), ("bad", 'command = ["pythn3", "x.py"]')])
    r = gdl(home, "launch", path, "--headless")
    return one_line(r) and "command" in r.stderr, r.stderr.strip()[:100]


def case_long_name(d: str, home: str) -> tuple[bool, str]:
    path = workload(d, [("x" * 5000, 'command = ["true"]')])
    r = gdl(home, "launch", path, "--headless")
    return one_line(r), r.stderr.strip()[:100]


def case_huge_env(d: str, home: str) -> tuple[bool, str]:
    path = workload(d, [("a", 'command = ["true"]\nenv = { BIG = "%s" }' % ("x" * 4_600_000))])
    r = gdl(home, "launch", path, "--headless")
    return one_line(r), r.stderr.strip()[:100]


def case_bad_shebang(d: str, home: str) -> tuple[bool, str]:
    bad = os.path.join(d, "bad.sh")
    with open(bad, "w") as f:
        f.write("#!/no/such/interpreter\n")
    os.chmod(bad, 0o755)
    path = workload(d, [("bad", f'command = ["{bad}"]'), ("good", 'command = ["sleep", "0.3"]')])
    r = gdl(home, "launch", path, "--headless")
    out = r.stdout + r.stderr
    con = sqlite3.connect(f"file:{os.path.join(home, 'sessions.db')}?mode=ro", uri=True)
    jobs = dict(con.execute("SELECT name, status || ': ' || COALESCE(failure, '') FROM jobs"))
    con.close()
    ok = (r.returncode == 1 and "Traceback" not in out and jobs.get("good") == "done: "
          and "could not start" in jobs.get("bad", "") and "/no/such/interpreter" in jobs["bad"])
    return ok, (f"exit {r.returncode}; good done; bad failed: "
                f"{jobs.get('bad', '').split(': ', 1)[-1].replace(bad, 'bad.sh')}")


def case_secret(d: str, home: str) -> tuple[bool, str]:
    secret = "hf_" + "Zq9" * 8
    show = 'import os; print("reversed", os.environ["HF_TOKEN"][::-1])'  # the job gets it
    path = workload(d, [("a", f'command = ["{PY}", "-c", {json.dumps(show)}]\n'
                         f'env = {{ HF_TOKEN = "{secret}" }}')])
    gdl(home, "launch", path, "--headless")
    leaked, got, wide = False, False, []
    for out in ("r.json", "r.md"):
        gdl(home, "export", os.path.join(d, out))
        leaked |= secret in open(os.path.join(d, out)).read()
    for root, _, files in os.walk(home):
        if os.stat(root).st_mode & 0o777 != 0o700:
            wide.append(root)
        for n in files:
            with open(os.path.join(root, n), "rb") as f:
                data = f.read()
            leaked |= secret.encode() in data
            got |= secret[::-1].encode() in data
            if os.stat(os.path.join(root, n)).st_mode & 0o777 != 0o600:
                wide.append(n)
    ok = not leaked and got and not wide
    return ok, ("the job got it; not in the data dir or either export; folders 0700, files 0600"
                if ok else f"leaked {leaked}, job got it {got}, wider than private: {wide}")


def as_nobody(home: str, *args: str) -> subprocess.CompletedProcess:
    """gputop-dl run as another user (root only: setpriv to nobody)."""
    env = dict(os.environ, GPUTOP_DL_HOME=home)
    return subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", PY,
                           "-m", "gputop_dl", *args], capture_output=True, text=True, timeout=60,
                          env=env, stdin=subprocess.DEVNULL)


def case_readonly_dir(d: str, home: str) -> tuple[bool, str]:
    """A data dir its user cannot write: launch is one line naming it; sessions still read it.
    Root ignores permission bits, so as root the commands run as nobody on a dir nobody owns."""
    path = workload(d, [("a", 'command = ["true"]')])
    gdl(home, "launch", path, "--headless")
    root = os.getuid() == 0
    if root:
        os.chmod(d, 0o755)
        for top, dirs, files in os.walk(home):
            for n in [top] + [os.path.join(top, x) for x in dirs + files]:
                os.chown(n, 65534, 65534)
    os.chmod(home, 0o500)
    try:
        run = as_nobody if root else gdl
        launch, listing = run(home, "launch", path, "--headless"), run(home, "sessions")
    finally:
        os.chmod(home, 0o700)
    ok = one_line(launch) and "not writable" in launch.stderr and listing.returncode == 0
    who = "nobody, " if root else ""
    return ok, (f"{who}mode 0500: launch exit {launch.returncode} ('not writable', one line); "
                f"sessions exit {listing.returncode}")


def case_other_users_dir(d: str, home: str) -> tuple[bool | None, str]:
    """Another user's private data dir: one line naming it and its owner, not 'not writable'
    or 'no sessions recorded yet'."""
    if os.getuid() != 0:
        return None, "needs root to act as another user"
    path = workload(d, [("a", 'command = ["true"]')])
    gdl(home, "launch", path, "--headless")
    os.chmod(d, 0o755)
    a, b = as_nobody(home, "sessions"), as_nobody(home, "export", os.path.join(d, "r.md"))
    ok = all(one_line(p) and "cannot be read (it is root's, mode 0700" in p.stderr for p in (a, b))
    return ok, f"nobody: sessions exit {a.returncode}, export exit {b.returncode}, one line naming the owner"


def case_readonly_reader(d: str, home: str) -> tuple[bool, str]:
    path = workload(d, [("a", 'command = ["true"]')])
    gdl(home, "launch", path, "--headless")
    db = os.path.join(home, "sessions.db")
    con = sqlite3.connect(db)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    before = open(db, "rb").read()
    a = gdl(home, "sessions")
    b = gdl(home, "export", os.path.join(d, "r.md"))
    same = open(db, "rb").read() == before
    return a.returncode == 0 and b.returncode == 0 and same, "sessions and export leave the database byte-identical"


def case_export_nothing(d: str, home: str) -> tuple[bool, str]:
    r = gdl(home, "export", os.path.join(d, "r.md"))
    path = workload(d, [("a", 'command = ["true"]')])
    gdl(home, "launch", path, "--headless")
    m = gdl(home, "export", os.path.join(d, "no", "such", "dir", "r.md"))
    os.mkdir(os.path.join(d, "taken.md"))
    t = gdl(home, "export", os.path.join(d, "taken.md"))
    return one_line(r) and one_line(m) and one_line(t), (
        f"no session: exit {r.returncode}; missing folder: exit {m.returncode}; "
        f"a folder in the way: exit {t.returncode}")


def _fill(path: str) -> None:
    """Write zeros to `path` until the file system is full."""
    with open(path, "wb", buffering=0) as f:
        for chunk in (1 << 16, 1 << 12, 1):
            try:
                while True:
                    f.write(b"\0" * chunk)
            except OSError:
                pass


def case_full_disk(d: str, home: str) -> tuple[bool | None, str]:
    """The data dir's disk fills up mid-launch, and stays full: the jobs go on to the end, the
    summary shows their final statuses, one warning, no process left; the listing says the
    session ended ("cut short" when the database took the last write, else "interrupted"); an export onto the full disk is one line (exit 1) and leaves no
    partial file. A real 2 MiB tmpfs (root only: mount)."""
    if os.getuid() != 0:
        return None, "needs root to mount a small tmpfs"
    disk = os.path.join(d, "disk")
    os.mkdir(disk)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", disk],
                      capture_output=True).returncode != 0:
        return None, "could not mount a tmpfs"
    try:
        home = os.path.join(disk, "home")
        job = "import time\nfor _ in range(30): time.sleep(0.1)\n"
        path = workload(d, [(n, f"command = [{json.dumps(PY)}, \"-c\", {json.dumps(job)}]")
                            for n in ("a", "b")])
        env = dict(os.environ, GPUTOP_DL_HOME=home)
        p = subprocess.Popen([PY, "-m", "gputop_dl", "launch", path, "--headless"], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        time.sleep(1.2)
        _fill(os.path.join(disk, "filler"))
        out, _ = p.communicate(timeout=60)
        listing = gdl(home, "sessions")
        _fill(os.path.join(disk, "filler2"))  # closing the database freed its write-ahead log
        export = gdl(home, "export", os.path.join(disk, "r.md"))
        left = [n for n in os.listdir(disk) if n not in ("home", "filler", "filler2")]
        ended = next((w for w in ("cut short", "interrupted") if w in listing.stdout), None)
        done = out.count("│ done")
        ok = (p.returncode == 1 and "recording stopped: database or disk is full" in out
              and done == 2 and ended and export.returncode == 1
              and "No space left on device" in export.stderr and len(export.stderr.splitlines()) == 1
              and not left and wait_gone(path))
        return ok, (f"launch exit {p.returncode}, one warning, {done} of 2 jobs done in the summary; "
                    f"sessions: {ended or '?'}; export onto the "
                    f"full disk: exit {export.returncode}, one line, {len(left)} partial files")
    finally:
        subprocess.run(["umount", "-l", disk], capture_output=True)


# --- hostile sizes, every signal honoured -----------------------------------------

def many_file(d: str, n: int, command: str, name: str = "many.toml") -> str:
    body = '[session]\nname = "many"\ninterval = 1.0\nbaseline = "none"\n'
    body += "".join(f'[[workload]]\nname = "j{i}"\ncommand = {command}\n' for i in range(n))
    path = os.path.join(d, name)
    with open(path, "w") as f:
        f.write(body)
    return path


def db(home: str, sql: str, args=()) -> list[tuple]:
    path = os.path.join(home, "sessions.db")
    if not os.path.exists(path):
        return []
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
        try:
            return con.execute(sql, args).fetchall()
        finally:
            con.close()
    except sqlite3.Error:
        return []


def wait_for(cond, timeout: float = 60.0, every: float = 0.05) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(every)
    return False


def term_and_time(p: subprocess.Popen, sig: int = signal.SIGTERM) -> tuple[int | None, float]:
    t0 = time.monotonic()
    p.send_signal(sig)
    try:
        code = p.wait(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        code = None
    return code, time.monotonic() - t0


def case_too_many_workloads(d: str, home: str) -> tuple[bool, str]:
    from gputop_dl.config import MAX_WORKLOADS

    path = many_file(d, MAX_WORKLOADS + 1, '["true"]')
    r = gdl(home, "launch", path, "--headless")
    return one_line(r) and f"at most {MAX_WORKLOADS}" in r.stderr, \
        f"{MAX_WORKLOADS + 1} workloads: exit {r.returncode}, one line ('at most {MAX_WORKLOADS} workloads')"


def _launch_many(d: str, home: str, n: int, command: str) -> subprocess.Popen:
    path = many_file(d, n, command)
    env = dict(os.environ, GPUTOP_DL_HOME=home)
    return subprocess.Popen([PY, "-m", "gputop_dl", "launch", path, "--headless"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def case_term_while_starting(d: str, home: str) -> tuple[bool, str]:
    """TERM once 200 of 3,000 jobs run (waiting on the processes): exit 130 within 2 s, no
    more started, none left."""
    mark = "611.5"
    p = _launch_many(d, home, 3000, f'["sleep", "{mark}"]')
    started = wait_for(lambda: len(survivors(f"sleep {mark}")) >= 200 or p.poll() is not None, 120)
    seen = len(survivors(f"sleep {mark}"))
    code, took = term_and_time(p)
    gone = wait_gone(f"sleep {mark}", 10)
    ok = started and seen < 3000 and code == 130 and took <= 2.0 and gone
    return ok, f"TERM with {seen} of 3000 started: exit {code} after {took:.2f} s, none left"


def case_term_while_running(d: str, home: str) -> tuple[bool, str]:
    """TERM once all 3,000 jobs run (all recorded as running): exit 130 within 2 s."""
    mark = "611.6"
    p = _launch_many(d, home, 3000, f'["sleep", "{mark}"]')
    ok_start = wait_for(lambda: db(home, "SELECT COUNT(*) FROM jobs WHERE status='running'")
                        == [(3000,)] or p.poll() is not None, 180, 0.5)
    code, took = term_and_time(p)
    gone = wait_gone(f"sleep {mark}", 10)
    gdl(home, "export", os.path.join(d, "r.json"), timeout=300)
    states: dict[str, int] = {}
    for j in json.load(open(os.path.join(d, "r.json")))["jobs"]:
        states[j["status"]] = states.get(j["status"], 0) + 1
    ok = ok_start and code == 130 and took <= 2.0 and gone and "running" not in states
    return ok, (f"TERM with 3000 running: exit {code} after {took:.2f} s, none left; "
                f"exported as {states}")


def case_term_in_summary(d: str, home: str) -> tuple[bool, str]:
    """3,000 jobs that end by themselves; TERM as soon as the session is recorded finished
    (the summary is being made): exit 130 within 2 s."""
    p = _launch_many(d, home, 3000, '["true"]')
    ended = wait_for(lambda: db(home, "SELECT state FROM sessions") == [("finished",)]
                     or p.poll() is not None, 240, 0.02)
    was_running = p.poll() is None
    code, took = term_and_time(p)
    ok = ended and was_running and code == 130 and took <= 2.0
    return ok, (f"TERM in the summary: exit {code} after {took:.2f} s" if was_running else
                f"the summary was done before the TERM (exit {code})")


def case_term_in_export(d: str, home: str) -> tuple[bool, str]:
    """`export` of that 3,000-job session: TERM while it reads; exit 130 within 2 s, no file
    and no temporary file left."""
    p = _launch_many(d, home, 3000, '["true"]')
    p.wait(timeout=600)
    out = os.path.join(d, "out")
    os.mkdir(out)
    env = dict(os.environ, GPUTOP_DL_HOME=home)
    e = subprocess.Popen([PY, "-m", "gputop_dl", "export", os.path.join(out, "r.json")], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    proc = psutil.Process(e.pid)
    busy = wait_for(lambda: sum(proc.cpu_times()[:2]) > 0.8 or e.poll() is not None, 60)
    was_running = e.poll() is None
    code, took = term_and_time(e)
    left = os.listdir(out)
    ok = busy and was_running and code == 130 and took <= 2.0 and not left
    return ok, (f"TERM while exporting: exit {code} after {took:.2f} s, {len(left)} files left"
                if was_running else f"the export ended before the TERM (exit {code})")


def case_huge_batch(d: str, home: str) -> tuple[bool, str]:
    path = workload(d, [("big", 'model = "synthetic"\ninput_size = 8\nbatch_size = 1000000000')])
    r = gdl(home, "launch", path, "--headless")
    return one_line(r) and "batch_size" in r.stderr, r.stderr.strip()[len("gputop-dl: error: "):][:110]


def case_memory_cap(d: str, home: str) -> tuple[bool, str]:
    """A job allocating 20 MiB every 50 ms under memory_limit = 200MiB beside a healthy one: it
    fails alone with the cap named; the host's available memory stays above its floor."""
    hog = ("import time\nx = []\nfor _ in range(100):\n    x.append(bytearray(20 << 20))\n"
           "    time.sleep(0.05)\ntime.sleep(60)")
    path = workload(d, [("hog", f'memory_limit = "200MiB"\ncommand = [{json.dumps(PY)}, "-c", '
                         f'{json.dumps(hog)}]'), ("good", 'command = ["sleep", "4"]')])
    env = dict(os.environ, GPUTOP_DL_HOME=home)
    floor = psutil.virtual_memory().available - (1 << 30)
    p = subprocess.Popen([PY, "-m", "gputop_dl", "launch", path, "--headless"], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    lowest = psutil.virtual_memory().available
    while p.poll() is None:
        lowest = min(lowest, psutil.virtual_memory().available)
        time.sleep(0.02)
    jobs = dict(db(home, "SELECT name, status || ': ' || COALESCE(failure, '') FROM jobs"))
    ok = (jobs.get("hog", "").startswith("failed: memory cap") and jobs.get("good") == "done: "
          and lowest > floor)
    return ok, (f"hog {jobs.get('hog', '?')[:90]}; good {jobs.get('good', '?').rstrip(': ')}; "
                f"lowest available {lowest >> 20} MiB, floor {max(0, floor) >> 20} MiB")


def case_memory_error_rlimit(d: str, home: str) -> tuple[bool, str]:
    code = ("import torch, resource\nresource.setrlimit(resource.RLIMIT_AS, (4 << 30, "
            "resource.RLIM_INFINITY))\nx = bytearray(6 << 30)")
    path = workload(d, [("lim", f'command = [{json.dumps(PY)}, "-c", {json.dumps(code)}]')])
    gdl(home, "launch", path, "--headless", timeout=120)
    failure = (db(home, "SELECT failure FROM jobs WHERE name='lim'") or [("",)])[0][0] or ""
    return failure.startswith("memory-limit:"), failure[:100]


def case_status_after_kill9(d: str, home: str) -> tuple[bool, str]:
    path = workload(d, [("a", 'command = ["sleep", "612.5"]'), ("b", 'command = ["sleep", "612.5"]')])
    env = dict(os.environ, GPUTOP_DL_HOME=home)
    p = subprocess.Popen([PY, "-m", "gputop_dl", "launch", path, "--headless"], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(lambda: db(home, "SELECT COUNT(*) FROM jobs WHERE status='running'") == [(2,)], 30)
    p.kill()
    p.wait()
    gone = wait_gone("sleep 612.5", 10)
    gdl(home, "export", os.path.join(d, "r.json"))
    gdl(home, "export", os.path.join(d, "r.md"))
    js = json.load(open(os.path.join(d, "r.json")))
    md = open(os.path.join(d, "r.md")).read()
    st = sorted({j["status"] for j in js["jobs"]})
    ok = gone and js["state"] == "interrupted" and st == ["interrupted"] and \
        "| interrupted |" in md and "running" not in md.split("## ")[1]
    return ok, f"session {js['state']}; jobs in the JSON {st}, in the Markdown 'interrupted'"


def case_died_at_start(d: str, home: str) -> tuple[bool, str]:
    empty = os.path.join(d, "empty")
    os.mkdir(empty)
    good = ('model = "synthetic"\ninput_size = 8\nnum_classes = 10\nbatch_size = 4\n'
            'num_workers = 0\nstep_device_ms = 20.0\nepochs = 1\nsteps_per_epoch = 15\n'
            'warmup_steps = 1')
    hog = (f'dataset = "imagefolder"\nroot = "{empty}"\nmodel = "resnet18"\nbatch_size = 2\n'
           'num_workers = 0\nepochs = 1')
    path = workload(d, [("good", good), ("hog", hog)])
    gdl(home, "launch", path, "--headless", timeout=300)
    v = json.loads((db(home, "SELECT verdict FROM sessions") or [("{}",)])[0][0] or "{}")
    died = (v.get("evidence") or {}).get("died_at_start") or {}
    judged = [j["name"] for j in v.get("jobs") or ()]
    ok = list(died) == ["hog"] and judged == ["good"] and "hog" not in v.get("reason", "")
    return ok, f"judged {judged}; not judged: hog ({died.get('hog', '?')[:60]}); verdict '{v.get('title')}'"


def case_export_in_data_dir(d: str, home: str) -> tuple[bool, str]:
    path = workload(d, [("a", 'command = ["true"]')])
    gdl(home, "launch", path, "--headless")
    r = gdl(home, "export", os.path.join(home, "r.md"))
    mode = os.stat(os.path.join(home, "r.md")).st_mode & 0o777 if r.returncode == 0 else None
    return mode == 0o600, f"export into the data dir: mode {mode:04o}" if mode else r.stderr


def case_serve_paths(d: str, home: str) -> tuple[bool, str]:
    import http.client

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, GPUTOP_DL_HOME=home)
    p = subprocess.Popen([PY, "-m", "gputop_dl", "serve", "--listen", f"127.0.0.1:{port}"],
                         env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def get(path: str) -> int | None:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("GET", path)
            code = c.getresponse().status
            c.close()
            return code
        except OSError:
            return None

    try:
        up = wait_for(lambda: get("/metrics") == 200, 60, 0.2)
        codes = {path: get(path) for path in ("/metrics", "/", "/debug", "/../../etc/passwd")}
    finally:
        p.terminate()
        p.wait(timeout=30)
    ok = up and codes["/metrics"] == codes["/"] == 200 and codes["/debug"] == 404 and \
        codes["/../../etc/passwd"] == 404
    return ok, ", ".join(f"{k} {v}" for k, v in codes.items())


def case_help_seconds(d: str, home: str) -> tuple[bool, str]:
    r = gdl(home, "diagnose", "--help")
    text = " ".join(r.stdout.split())
    ok = r.returncode == 0 and "a third observing" in text and "--seconds 10: 3 s observing" in text
    return ok, "diagnose --help: a third observing, S/6 s together, the rest alone per job"


def case_read_only_fs(d: str, home: str) -> tuple[bool | None, str]:
    if os.getuid() != 0:
        return None, "needs root to mount a read-only tmpfs"
    os.makedirs(home)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,ro", "tmpfs", home],
                      capture_output=True).returncode != 0:
        return None, "could not mount a tmpfs"
    try:
        path = workload(d, [("a", 'command = ["true"]')])
        r = gdl(home, "launch", path, "--headless")
    finally:
        subprocess.run(["umount", "-l", home], capture_output=True)
    return one_line(r) and "read-only" in r.stderr and "not writable" not in r.stderr, \
        r.stderr.strip()[len("gputop-dl: error: "):].replace(home, "HOME")


def case_tui_background(d: str, home: str) -> tuple[bool | None, str]:
    """The TUI under plain `timeout` (in the background of its terminal: SIGTTIN at its first
    read): one line, exit 2. A real terminal: tmux."""
    import shutil

    if shutil.which("tmux") is None:
        return None, "needs tmux for a real terminal"
    path = workload(d, [("a", 'command = ["sleep", "1"]')])
    out = os.path.join(d, "tui.out")
    name = f"gdl-faults-{os.getpid()}"
    cmd = (f"GPUTOP_DL_HOME={home} PYTHONPATH={os.getcwd()} timeout 30 {PY} -m gputop_dl launch "
           f"{path} 2>{out}; echo rc=$? >>{out}")
    subprocess.run(["tmux", "new-session", "-d", "-s", name, "-x", "150", "-y", "40", cmd],
                   check=True)
    try:
        done = wait_for(lambda: os.path.exists(out) and "rc=" in open(out).read(), 40, 0.2)
    finally:
        subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True)
    text = open(out).read() if os.path.exists(out) else ""
    lines = text.strip().splitlines()
    ok = done and lines[-1:] == ["rc=2"] and len(lines) == 2 and "background" in lines[0]
    return ok, (f"exit 2 after one line: '{lines[0][len('gputop-dl: error: '):][:70]}…'"
                if ok else f"got {text[:120]!r}")


# --- hostile input, round three ---------------------------------------------------

def case_dev_zero(d: str, home: str) -> tuple[bool, str]:
    """`launch /dev/zero`: refused by its type before a byte is read; the launch's own peak RSS
    (os.wait4's rusage of that one child, not RUSAGE_CHILDREN's largest child so far) stays
    small."""
    t0 = time.monotonic()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        p = subprocess.Popen([PY, "-m", "gputop_dl", "launch", "/dev/zero", "--headless"],
                             stdout=out, stderr=err, text=True,
                             env=dict(os.environ, GPUTOP_DL_HOME=home))
        _, status, usage = os.wait4(p.pid, 0)  # this child's own rusage
        p.returncode = code = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        r = subprocess.CompletedProcess(p.args, code, out.read(), err.read())
    took = time.monotonic() - t0
    rss = usage.ru_maxrss >> 10
    ok = one_line(r) and "character device" in r.stderr and rss < 200
    return ok, f"exit {code} after {took:.2f} s, one line; its peak RSS {rss} MiB"


def case_nproc(d: str, home: str) -> tuple[bool, str]:
    path = workload(d, [("a", 'command = ["true"]\nnproc = 100000')])
    r = gdl(home, "launch", path, "--headless")
    return one_line(r) and "nproc" in r.stderr, r.stderr.strip()[len("gputop-dl: error: "):][:110]


def case_deep_toml(d: str, home: str) -> tuple[bool, str]:
    path = os.path.join(d, "deep.toml")
    with open(path, "w") as f:
        f.write("x = " + "[" * 1200 + "]" * 1200 + "\n")
    runs = {c: gdl(home, c, path, *(["--headless"] if c != "simulate" else []))
            for c in ("launch", "queue", "simulate")}
    ok = all(one_line(p) and "nested more than" in p.stderr for p in runs.values())
    return ok, ", ".join(f"{c}: exit {p.returncode}" for c, p in runs.items()) + \
        f", one line each ({len(open(path).read())} bytes, 1,200 deep)"


def case_db_directory(d: str, home: str) -> tuple[bool, str]:
    os.makedirs(os.path.join(home, "sessions.db"))
    path = workload(d, [("a", 'command = ["true"]')])
    runs = {c[0]: gdl(home, *c) for c in (["sessions"], ["export", os.path.join(d, "r.md")],
                                          ["compare", "a", "b"], ["launch", path, "--headless"])}
    ok = all(one_line(p) and "is a directory" in p.stderr for p in runs.values())
    return ok, ", ".join(f"{c}: exit {p.returncode}" for c, p in runs.items()) + ", one line each"


def case_huge_session_name(d: str, home: str) -> tuple[bool, str]:
    path = workload(d, [("a", 'command = ["true"]')], session='name = "%s"' % ("n" * 5_000_000))
    r = gdl(home, "launch", path, "--headless")
    stored = os.path.exists(os.path.join(home, "sessions.db"))
    return one_line(r) and "name" in r.stderr and not stored, \
        f"exit {r.returncode}, one line of {len(r.stderr)} characters, nothing stored"


def case_secret_args(d: str, home: str) -> tuple[bool, str]:
    """--password=, --token, *_SECRET=, user:password@ in a job's arguments: the job gets
    them; not in the data dir, either export or `sessions`; exports 0600, --shared 0644."""
    secret = "pw_" + "Xk7" * 8
    show = 'import sys; print("reversed", sys.argv[-1][::-1])'
    path = workload(d, [("a", f'command = ["{PY}", "-c", {json.dumps(show)}, "--url", '
                         f'"https://ada:{secret}@h/x", "--accesstoken={secret}", '
                         f'"https://{secret}@github.com/x", "--auth_header=Bearer {secret}", '
                         f'"--u=http://h/?token={secret}", "--bearer", "{secret}", '
                         f'"--password={secret}", "--token", "{secret}"]'),
                        ("b", f'shell = true\ncommand = "true MY_SECRET={secret} --key {secret}"')])
    gdl(home, "launch", path, "--headless")
    leaked, got, modes = False, False, {}
    for out, extra in (("r.json", []), ("r.md", []), ("s.md", ["--shared"])):
        gdl(home, "export", os.path.join(d, out), *extra)
        leaked |= secret in open(os.path.join(d, out)).read()
        modes[out] = f"{os.stat(os.path.join(d, out)).st_mode & 0o777:04o}"
    leaked |= secret in gdl(home, "sessions").stdout
    for root, _, files in os.walk(home):
        for n in files:
            data = open(os.path.join(root, n), "rb").read()
            leaked |= secret.encode() in data
            got |= secret[::-1].encode() in data
    cmd = {j["name"]: j["command"] for j in json.load(open(os.path.join(d, "r.json")))["jobs"]}
    ok = (not leaked and got and modes == {"r.json": "0600", "r.md": "0600", "s.md": "0644"}
          and all(c and "<redacted>" in c for c in cmd.values()))
    return ok, (f"the job got them; none in the data dir, the exports or `sessions`; modes {modes}; "
                f"export command of b: {cmd.get('b')!r}")


def case_writers_in_one_home(d: str, home: str) -> tuple[bool, str]:
    """serve --record, two launches and readers in one data dir at once: the database passes
    integrity_check and every session is complete (scripts/store_soak.py, one run)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import store_soak

    bad = store_soak.one_run(d, seed=0)
    return not bad, "integrity ok, 2 launches and the monitor finished, every step recorded" \
        if not bad else "; ".join(bad)[:200]


def case_pause_outlives_nothing(d: str, home: str) -> tuple[bool, str]:
    """A paused job's holder, its pause guard and its watchdog all killed with -9 at once: the
    job runs again (the kernel detaches a tracee whose tracer died)."""
    job = subprocess.Popen([PY, "-c", "import time\nwhile True: time.sleep(0.01)"])
    holder = subprocess.Popen([PY, "-c", (
        "import time\nfrom gputop_dl.control.pause import Pauser\nfrom gputop_dl.control.watchdog import shared\n"
        f"pz = Pauser(); pz.pause([{job.pid}]); shared().paused_pids([])\n"
        "print(shared().pid, flush=True); time.sleep(60)")], stdout=subprocess.PIPE, text=True,
        start_new_session=True)
    try:
        watchdog = int(holder.stdout.readline())
        held = psutil.Process(job.pid).status() in ("stopped", "tracing-stop")
        os.killpg(holder.pid, signal.SIGKILL)
        os.kill(watchdog, signal.SIGKILL)
        holder.wait()
        t0 = time.monotonic()
        ran = wait_for(lambda: psutil.Process(job.pid).status() not in ("stopped", "tracing-stop"), 5)
        return held and ran, f"held, then running {time.monotonic() - t0:.2f} s after the kill -9 of all"
    finally:
        job.kill()
        job.wait()


def case_serve_record_nowhere(d: str, home: str) -> tuple[bool, str]:
    """serve --record where sessions.db is a directory: one line, exit 2, nothing served."""
    os.makedirs(os.path.join(home, "sessions.db"))
    r = gdl(home, "serve", "--listen", "127.0.0.1:0", "--record", timeout=20)
    return one_line(r) and r.returncode == 2, r.stderr.strip()[len("gputop-dl: error: "):][:100]


def case_bounds_on_intervals(d: str, home: str) -> tuple[bool, str]:
    """--interval 1e9 (monitor, serve, diagnose), --once --interval, diagnose --pid 999999999."""
    runs = [gdl(home, *a, timeout=20) for a in (["--interval", "1e9"], ["serve", "--interval", "1e9"],
                                                ["--interval", "1e9", "diagnose"],
                                                ["--once", "--interval", "2"],
                                                ["diagnose", "--pid", "999999999"])]
    ok = all(one_line(r) and r.returncode == 2 for r in runs)
    return ok, f"{sum(r.returncode == 2 for r in runs)} of {len(runs)} exit 2 with one line"


def case_launch_into_head(d: str, home: str) -> tuple[bool, str]:
    """`launch --headless | head -1`: exit 141 like every other command, jobs stopped."""
    path = workload(d, [("a", 'command = ["sleep", "30"]')])
    r = subprocess.run(["bash", "-c", f"GPUTOP_DL_HOME={home} {PY} -m gputop_dl launch {path} "
                        "--headless | head -1 >/dev/null; echo ${PIPESTATUS[0]}"],
                       capture_output=True, text=True, timeout=60)
    code = r.stdout.split()[-1] if r.stdout.split() else "?"
    return code == "141" and "Traceback" not in r.stderr and wait_gone(path), f"exit {code}"


def case_memory_cap_long_interval(d: str, home: str) -> tuple[bool, str]:
    """A job allocating 20 MiB every 50 ms under a 200 MiB cap at interval = 5: stopped near
    its cap (checked every 0.25 s between ticks), not at the next tick."""
    hog = ("import time\nx = []\nfor _ in range(100):\n    x.append(bytearray(20 << 20))\n"
           "    time.sleep(0.05)\ntime.sleep(60)")
    path = workload(d, [("hog", f'memory_limit = "200MiB"\ncommand = [{json.dumps(PY)}, "-c", '
                         f'{json.dumps(hog)}]')], baseline="none")
    with open(path) as f:
        text = f.read().replace("interval = 0.2", "interval = 5")
    with open(path, "w") as f:
        f.write(text)
    gdl(home, "launch", path, "--headless")
    [(failure,)] = db(home, "SELECT COALESCE(failure, '') FROM jobs") or [("",)]
    return failure.startswith("memory cap") and "GiB" not in failure, failure[:100]


CASES = [
    ("kill -9 of gputop-dl (shell, background &, a script's own child)", case_kill9),
    ("SIGINT during a launch", case_sigint),
    ("SIGINT during a solo baseline", case_sigint_baseline),
    ("corrupt sessions.db", case_corrupt_db),
    ("GPUTOP_DL_HOME under a file", case_home_under_file),
    ("markup and escape codes in a failure and a name", case_markup),
    ("a program that does not exist", case_bad_program),
    ("a 5 000-character name", case_long_name),
    ("a 4.6 MB env", case_huge_env),
    ("a script with a bad #! line beside a good job", case_bad_shebang),
    ("a secret in env", case_secret),
    ("sessions/export only read", case_readonly_reader),
    ("a read-only data dir", case_readonly_dir),
    ("another user's data dir", case_other_users_dir),
    ("export with nothing to export, or nowhere to write", case_export_nothing),
    ("the data dir's disk full mid-launch, and an export onto it", case_full_disk),
    ("more workloads than a file may hold", case_too_many_workloads),
    ("3,000 workloads: SIGTERM while the jobs start", case_term_while_starting),
    ("3,000 workloads: SIGTERM while all run", case_term_while_running),
    ("3,000 workloads: SIGTERM during the summary", case_term_in_summary),
    ("3,000 workloads: SIGTERM during an export", case_term_in_export),
    ("batch_size = 1000000000", case_huge_batch),
    ("a runaway job under a 200 MiB memory cap", case_memory_cap),
    ("a MemoryError under an rlimit", case_memory_error_rlimit),
    ("job statuses in JSON and Markdown after kill -9", case_status_after_kill9),
    ("a job that died at start-up beside a healthy one", case_died_at_start),
    ("an export into the data dir", case_export_in_data_dir),
    ("serve: /metrics, / and other paths", case_serve_paths),
    ("diagnose --help on --seconds", case_help_seconds),
    ("a data dir on a read-only file system", case_read_only_fs),
    ("the TUI under plain timeout (no foreground)", case_tui_background),
    ("launch /dev/zero", case_dev_zero),
    ("nproc = 100000 in a command workload", case_nproc),
    ("a TOML nested 1,200 deep in launch, queue and simulate", case_deep_toml),
    ("sessions.db is a directory in every command", case_db_directory),
    ("a 5 MB session name", case_huge_session_name),
    ("secrets in a job's arguments", case_secret_args),
    ("serve --record, two launches and readers in one data dir", case_writers_in_one_home),
    ("kill -9 of every gputop-dl process while a job is paused", case_pause_outlives_nothing),
    ("serve --record where nothing can be recorded", case_serve_record_nowhere),
    ("--interval 1e9, --once --interval, a missing --pid", case_bounds_on_intervals),
    ("launch --headless piped into head -1", case_launch_into_head),
    ("a memory cap at interval = 5", case_memory_cap_long_interval),
]


def main(only: list[str]) -> int:
    rows, failed = [], 0
    for title, fn in CASES:
        if only and not any(w in title for w in only):
            continue
        with tempfile.TemporaryDirectory() as d:
            home = os.path.join(d, "home")
            t0 = time.monotonic()
            try:
                ok, detail = fn(d, home)
            except Exception as exc:  # a case that crashes is a failed case, the rest go on
                ok, detail = False, f"{type(exc).__name__}: {exc}"
            detail = detail.replace(os.path.realpath(d), "TMP").replace(d, "TMP")
            rows.append((title, ok, detail, time.monotonic() - t0))
            failed += ok is False
    print("| case | result | what was checked | s |")
    print("|---|---|---|---:|")
    for title, ok, detail, took in rows:
        result = "skip" if ok is None else "pass" if ok else "**FAIL**"
        print(f"| {title} | {result} | {detail} | {took:.1f} |")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
