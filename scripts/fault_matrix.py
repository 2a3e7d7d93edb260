"""The fault matrix of issue 16, run for real: each hostile case through the CLI, pass or fail.

    python scripts/fault_matrix.py

Every case runs `python -m gputop_dl ...` in its own temporary data dir (GPUTOP_DL_HOME) with
tiny jobs (sleep, python -c), checks what must hold (exit code, one line without a traceback,
no surviving process, the data kept) and prints a Markdown table; exit 1 if a case fails.
About 12 s. As root, the permission cases run their commands as `nobody` (setpriv).
"""

from __future__ import annotations

import json
import os
import signal
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
]


def main() -> int:
    rows, failed = [], 0
    for title, fn in CASES:
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
    sys.exit(main())
