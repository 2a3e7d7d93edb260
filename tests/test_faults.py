"""Faults and hostile input, with real tiny processes (sleep, python -c) in temporary
data dirs: no orphans however gputop-dl ends."""

import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from gputop_dl.collect.nvml.gpus import Nvml
from gputop_dl.control import watchdog
from gputop_dl.runner import launch_engine, open_spec, run_file
from tests.conftest import write
from tests.schema_check import check

# a job whose own child runs under it, and whose grandchild daemon (own session, its parent
# gone) is re-parented: they write their PIDs to files so the test can look for them
FAMILY = """
import subprocess, sys, time
d = sys.argv[1]
child = subprocess.Popen(["sleep", "294"])
subprocess.run(["setsid", "sh", "-c", "sleep 295 & echo $! > " + d + "/daemon.pid"])
open(d + "/child.pid", "w").write(str(child.pid))
time.sleep(300)
"""


def toml_value(v):
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {json.dumps(x)}" for k, x in v.items()) + " }"
    return json.dumps(v)


def session(tmp_path, *jobs):
    body = '[session]\nname = "faults"\ninterval = 0.2\nbaseline = "none"\n'
    for name, keys in jobs:
        body += f'[[workload]]\nname = "{name}"\n'
        body += "".join(f"{k} = {toml_value(v)}\n" for k, v in keys.items())
    return write(tmp_path, "w.toml", body)


def family_jobs(tmp_path):
    return [("sh", {"command": [f"sleep 293 & echo $! > {tmp_path}/sh.pid; wait"], "shell": True}),
            ("py", {"command": [sys.executable, "-c", FAMILY, str(tmp_path)]})]


def pids_from(tmp_path, names, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            return [int((tmp_path / f"{n}.pid").read_text()) for n in names]
        except (OSError, ValueError):
            time.sleep(0.05)
    raise AssertionError(f"the jobs did not write {names} in {timeout} s")


def running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def wait_gone(pids, timeout):
    """Seconds until none of pids runs; fails if some still run after timeout."""
    t0 = time.monotonic()
    while any(running(p) for p in pids):
        if time.monotonic() - t0 > timeout:
            for p in pids:  # do not leave them behind ourselves
                if running(p):
                    os.kill(p, signal.SIGKILL)
            raise AssertionError(f"survivors after {timeout} s: {[p for p in pids if running(p)]}")
        time.sleep(0.02)
    return time.monotonic() - t0


def test_a_background_child_of_a_finished_shell_job_is_stopped_at_the_end(tmp_path):
    """`sleep 277 & echo started`: the job is done at once, its `sleep` survived the session."""
    path = session(tmp_path, ("bg", {"command": [f"sleep 277 & echo $! > {tmp_path}/bg.pid"],
                                     "shell": True}))
    eng = run_file(path, nvml=Nvml())
    assert eng.runs["bg"].status == "done"
    [pid] = pids_from(tmp_path, ["bg"], timeout=1)
    wait_gone([pid], timeout=1.0)


def test_every_descendant_stops_with_the_session_even_a_daemon_in_its_own_session(tmp_path):
    """gputop-dl is the subreaper of its jobs' orphans: the daemon whose parent exited is still
    found (and stopped) by gputop-dl itself, not by the watchdog, which only acts when the
    process is gone."""
    nvml = Nvml()
    eng = launch_engine(open_spec(session(tmp_path, *family_jobs(tmp_path)), nvml), nvml)
    eng.start()
    pids = pids_from(tmp_path, ["sh", "child", "daemon"])
    eng.request_stop()
    assert eng.join(30)
    wait_gone(pids, timeout=0.5)
    assert {r.status for r in eng.runs.values()} == {"stopped"}


def test_kill_9_of_gputop_dl_leaves_no_process_of_any_job(tmp_path):
    """The watchdog sees its pipe close and stops every registered job's group and every
    process carrying a job's marker (the daemon in its own session included)."""
    p = subprocess.Popen([sys.executable, "-m", "gputop_dl", "launch", "--headless",
                          session(tmp_path, *family_jobs(tmp_path))],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pids = pids_from(tmp_path, ["sh", "child", "daemon"])
    leaders = [c.pid for c in psutil.Process(p.pid).children() if c.pid not in pids]
    p.kill()
    p.wait()
    took = wait_gone(pids + leaders, timeout=5.0)
    print(f"no process left {took:.2f} s after kill -9")


def test_the_watchdog_kills_watched_groups_and_resumes_paused_ones_when_its_pipe_closes():
    dog = watchdog.Watchdog()
    job = subprocess.Popen(["sleep", "296"], start_new_session=True,
                           env={**os.environ, "GDL_TEST_MARK": "job-1"})
    other = subprocess.Popen(["sleep", "297"], start_new_session=True)  # a probe paused it
    try:
        os.kill(other.pid, signal.SIGSTOP)
        dog.watch(job.pid, "GDL_TEST_MARK=job-1")
        dog.paused(other.pid)
        dog.watch(other.pid, "GDL_TEST_MARK=not-this-one")  # no marked member: left alone
        assert job.poll() is None
        dog._proc.stdin.close()  # what gputop-dl's death looks like to it
        dog._proc.wait(timeout=10)
        assert job.wait(timeout=2) == -signal.SIGTERM
        assert psutil.Process(other.pid).status() != psutil.STATUS_STOPPED
        assert other.poll() is None
    finally:
        for proc in (job, other):
            proc.kill()
            proc.wait()


def test_the_watchdog_forgets_a_group_that_was_stopped():
    dog = watchdog.Watchdog()
    job = subprocess.Popen(["sleep", "298"], start_new_session=True,
                           env={**os.environ, "GDL_TEST_MARK": "job-2"})
    try:
        dog.watch(job.pid, "GDL_TEST_MARK=job-2")
        dog.forget(job.pid)
        dog._proc.stdin.close()
        dog._proc.wait(timeout=10)
        time.sleep(0.2)
        assert job.poll() is None
    finally:
        job.kill()
        job.wait()


# ---- storage failures ---------------------------------------------------------------------------

def cli(*args, home=None, timeout=60):
    env = dict(os.environ)
    if home is not None:
        env["GPUTOP_DL_HOME"] = str(home)
    p = subprocess.run([sys.executable, "-m", "gputop_dl", *args], capture_output=True,
                       text=True, env=env, timeout=timeout, stdin=subprocess.DEVNULL)
    return p.returncode, p.stdout, p.stderr


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def quick_job(tmp_path, seconds=0.5):
    return session(tmp_path, ("a", {"command": ["sleep", str(seconds)]}))


def recorded_db(tmp_path, gdl_home):
    """A real session database with a few pages of samples."""
    eng = run_file(quick_job(tmp_path, 1.0), nvml=Nvml())
    assert eng.session_id
    return gdl_home / "sessions.db"


def test_sessions_and_export_leave_the_database_untouched(tmp_path, gdl_home):
    """They open it read-only: the store used to switch it to WAL and set up its schema even
    to read, which another user (no write access) could not do. Checked byte for byte on a
    database in rollback-journal mode, which that set-up rewrote."""
    import sqlite3

    db = recorded_db(tmp_path, gdl_home)
    con = sqlite3.connect(db)
    con.execute("PRAGMA journal_mode=DELETE")
    con.close()
    data = db.read_bytes()
    rc, out, err = cli("sessions")
    assert rc == 0 and "faults" in out, err
    rc, out, err = cli("export", str(tmp_path / "r.json"))
    assert rc == 0, err
    assert db.read_bytes() == data
    assert sorted(p.name for p in gdl_home.iterdir()) == ["sessions", "sessions.db"]


def test_a_corrupt_database_is_one_line_for_readers_and_moved_aside_by_a_launch(tmp_path, gdl_home):
    db = gdl_home / "sessions.db"
    garbage = os.urandom(3000)
    db.write_bytes(garbage)
    for args in (["sessions"], ["export", str(tmp_path / "r.md")]):
        rc, _, err = cli(*args)
        assert rc == 2 and str(db) in one_line(err), err
    assert db.read_bytes() == garbage
    rc, out, err = cli("launch", "--headless", quick_job(tmp_path))
    assert rc == 0, out + err
    [kept] = gdl_home.glob("sessions.corrupt-*.db")
    assert kept.read_bytes() == garbage
    line = [x for x in err.splitlines() if "damaged" in x]
    assert len(line) == 1 and str(db) in line[0] and str(kept) in line[0]
    rc, out, _ = cli("sessions")
    assert rc == 0 and "faults" in out


def test_a_truncated_database_is_moved_aside_and_a_new_one_started(tmp_path, gdl_home, capsys):
    from gputop_dl.record.store import Store, StoreError

    db = recorded_db(tmp_path, gdl_home)
    Store().db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = db.read_bytes()
    assert len(data) > 8192
    db.write_bytes(data[: len(data) // 2])
    try:
        Store(readonly=True)
        raise AssertionError("a truncated database was read")
    except StoreError as exc:
        assert "truncated" in str(exc) and str(db) in str(exc)
    capsys.readouterr()
    st = Store()
    assert st.sessions() == []
    st.close()
    [kept] = gdl_home.glob("sessions.corrupt-*.db")
    assert kept.read_bytes() == data[: len(data) // 2]
    assert str(kept) in capsys.readouterr().err


def test_a_data_dir_under_a_file_is_one_line_and_exit_2_for_every_command(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("x")
    for home in (afile / "sub", afile):
        for args in (["sessions"], ["export", str(tmp_path / "r.md")],
                     ["launch", "--headless", quick_job(tmp_path)], []):
            rc, out, err = cli(*args, home=home, timeout=30)  # [] is the TUI monitor
            assert rc == 2, (args, out, err)
            assert f"GPUTOP_DL_HOME={home}" in one_line(err)


def test_a_data_dir_that_is_not_writable_is_one_line(tmp_path, gdl_home, monkeypatch):
    """As root every folder is writable, so the check itself is what is exercised here."""
    from gputop_dl.errors import UsageError
    from gputop_dl.runner import check_store

    real = os.access
    monkeypatch.setattr(os, "access", lambda p, m: False if str(p) == str(gdl_home) and m & os.W_OK
                        else real(p, m))
    try:
        check_store()
        raise AssertionError("no error")
    except UsageError as exc:
        assert str(gdl_home) in str(exc) and "not writable" in str(exc)


def test_a_write_failure_mid_run_stops_recording_not_the_jobs(tmp_path, monkeypatch):
    import sqlite3

    from gputop_dl.record.store import Store

    calls = {"n": 0}
    real = Store.add_host_sample

    def full(self, *a):
        calls["n"] += 1
        if calls["n"] > 3:
            raise sqlite3.OperationalError("database or disk is full")
        return real(self, *a)

    monkeypatch.setattr(Store, "add_host_sample", full)
    eng = run_file(session(tmp_path, ("a", {"command": ["sleep", "2"]}),
                           ("b", {"command": ["sleep", "2.5"]})), nvml=Nvml())
    assert eng.error is None
    assert {r.status for r in eng.runs.values()} == {"done"}
    assert "database or disk is full" in eng.recorder.failure
    assert any("warning: recording stopped" in msg for _, msg in eng.log)
    assert eng.snapshot is not None and eng.snapshot.time > eng.runs["b"].ended - 0.5
    assert Store().session(eng.session_id).state == "cut short"
    assert eng.exit_code() == 1


def test_a_job_log_is_bounded_to_its_head_and_latest_output(tmp_path, monkeypatch):
    from gputop_dl.control import launch

    monkeypatch.setattr(launch, "LOG_CAP", 64 << 10)
    monkeypatch.setattr(launch, "LOG_HEAD", 8 << 10)
    writer = ("import sys, time\n"
              "for i in range(40000):\n"
              "    print(f'line {i:06d} ' + 'x' * 40)\n"
              "    if i % 4000 == 0: sys.stdout.flush(); time.sleep(0.15)\n")
    eng = run_file(session(tmp_path, ("loud", {"command": [sys.executable, "-c", writer]})),
                   nvml=Nvml())
    run = eng.runs["loud"]
    assert run.status == "done"
    text = open(run.proc.log_path, encoding="utf-8", errors="replace").read()
    assert len(text) <= (64 << 10) + 200  # + what the job wrote after the last tick's check
    assert text.startswith("line 000000 ")
    assert "bytes of this log cut here" in text
    assert text.rstrip().endswith("line 039999 " + "x" * 40)
    assert run.stderr_tail[-1].startswith("line 039999")


def test_export_with_no_session_or_to_a_missing_directory_is_exit_2(tmp_path):
    rc, _, err = cli("export", str(tmp_path / "r.md"))
    assert rc == 2 and "no sessions recorded yet" in one_line(err)
    run_file(quick_job(tmp_path, 0.1), nvml=Nvml())
    rc, _, err = cli("export", str(tmp_path / "missing" / "r.md"))
    assert rc == 2 and "no such directory" in one_line(err)
    (tmp_path / "taken.md").mkdir()  # a path the user must change, like a folder without write
    rc, _, err = cli("export", str(tmp_path / "taken.md"))
    assert rc == 2 and f"cannot write {tmp_path / 'taken.md'}: Is a directory" in one_line(err)


# ---- untrusted text is text ---------------------------------------------------------------------

HOSTILE = "[/] [link=https://evil.example]click[/link] [bold red]x \x1b]0;pwned\x07\x1b[2J\r"


def test_clean_makes_control_codes_visible_and_escape_escapes_markup():
    from gputop_dl.text.safe import clean, escape, text

    assert clean("ok\tline\nnext") == "ok\tline\nnext"
    assert clean("a\x1b[31mb\x07\x9b\u202e") == "a\\x1b[31mb\\x07\\x9b\\u202e"
    assert clean(None) == ""
    assert escape("[/] [link=x]") == "\\[/] \\[link=x]"
    assert text("[/]").plain == "[/]"


def test_a_hostile_failure_message_and_session_name_print_literally(tmp_path):
    """A failure message with `[/]` crashed the summary (MarkupError: no summary, no verdict);
    ESC/OSC sequences in a session name reached the terminal raw."""
    boom = f"raise RuntimeError({HOSTILE!r})"
    path = write(tmp_path, "w.toml",
                 '[session]\nname = "evil\\u001b]0;pwned\\u0007 [/]"\ninterval = 0.2\n'
                 f'baseline = "none"\n[[workload]]\nname = "bad"\ncommand = {json.dumps([sys.executable, "-c", boom])}\n')
    rc, out, err = cli("launch", "--headless", path)
    assert rc == 1, out + err
    assert "\x1b" not in out + err and "\x07" not in out + err
    assert "Traceback" not in err
    assert "[/] [link=https://evil.example]click[/link]" in out  # literally, in the summary
    assert "\\x1b]0;pwned\\x07" in out
    assert "verdict:" in out and "session " in out
    rc, out, _ = cli("sessions")
    assert rc == 0 and "\x1b" not in out and "evil\\x1b]0;pwned\\x07 [/]" in out.replace("\n", "")


def test_the_tui_shows_hostile_job_text_as_text():
    from gputop_dl.present.tui.job_detail import job_detail_lines
    from gputop_dl.present.tui.jobs_table import Palette, job_row
    from gputop_dl.snapshot import JobSample

    j = JobSample(name="python \x1b]0;x\x07 train.py", pid=1, launched=False, status="failed",
                  failure=HOSTILE, stderr_tail=(HOSTILE,), device="cuda\x1b[0m")
    row = job_row(j, Palette())
    shown = " ".join(c.text for c in row.cells) + job_detail_lines(j, {"env": {"A": HOSTILE}}).plain
    assert "\x1b" not in shown and "\x07" not in shown and "\r" not in shown
    assert "[link=https://evil.example]" in shown


# ---- bad files are exit 2, before anything starts -----------------------------------------------

def test_what_can_be_known_before_starting_is_one_line_and_exit_2(tmp_path):
    good = ("good", {"command": ["sleep", "30"]})
    cases = {
        "missing program": (("bad", {"command": ["pythn3", "train.py"]}), "pythn3"),
        "missing file": (("bad", {"command": ["./nope.sh"]}), "nope.sh"),
        "long name": (("b" * 5000, {"command": ["sleep", "1"]}), "5000 characters"),
        "huge env": (("bad", {"command": ["sleep", "1"], "env": {"BIG": "x" * (4 << 20)}}), "env"),
    }
    for what, (job, needle) in cases.items():
        path = session(tmp_path, good, job)
        t0 = time.monotonic()
        rc, out, err = cli("launch", "--headless", path)
        line = one_line(err)
        assert rc == 2 and needle in line and path in line, (what, out, err)
        assert len(line) < 400 and time.monotonic() - t0 < 20, what


# --- secrets: a private data dir, env values redacted ---------------------------------------------

@pytest.mark.shares_box("file modes and stored text")
def test_real_launch_keeps_the_data_private_and_env_values_out_of_the_store_and_exports(tmp_path):
    import json as _json
    import stat as _stat

    from gputop_dl.cli import main as cli_main
    from gputop_dl.record.store import data_dir

    secret = "hf_" + "s3cr3t" * 4
    job = [sys.executable, "-c", "import os; print('token', os.environ['HF_TOKEN'][:6])"]
    toml = tmp_path / "w.toml"
    # two jobs: one alone has no start barrier, and its go file is checked below
    toml.write_text('[session]\nname = "secret"\ninterval = 0.2\nbaseline = "none"\n'
                    f'[[workload]]\nname = "job"\ncommand = {_json.dumps(job)}\n'
                    f'env = {{ HF_TOKEN = "{secret}" }}\n'
                    '[[workload]]\nname = "other"\ncommand = ["true"]\n')
    eng = run_file(str(toml), nvml=Nvml())
    run = eng.runs["job"]
    with open(run.proc.log_path) as f:
        assert "token hf_s3c" in f.read()  # the job itself got the real value
    home = data_dir()
    assert _stat.S_IMODE(os.stat(home).st_mode) == 0o700
    assert _stat.S_IMODE(os.stat(os.path.dirname(run.proc.log_path)).st_mode) == 0o700
    for path in [os.path.join(home, "sessions.db"), run.proc.log_path, run.proc.events_path,
                 run.proc.log_path[:-4] + ".json"]:
        assert _stat.S_IMODE(os.stat(path).st_mode) == 0o600, path
    # every folder 0700 and every file 0600, the co-run's start barrier file included
    for root, _dirs, files in os.walk(home):
        assert _stat.S_IMODE(os.stat(root).st_mode) == 0o700, root
        for name in files:
            assert _stat.S_IMODE(os.stat(os.path.join(root, name)).st_mode) == 0o600, name
    assert os.path.exists(os.path.join(os.path.dirname(run.proc.log_path), "co-run.go"))
    # nowhere on disk under the data dir, and not in either export
    for root, _, files in os.walk(home):
        for name in files:
            with open(os.path.join(root, name), "rb") as f:
                assert secret.encode() not in f.read(), name
    for out in ("r.json", "r.md"):
        assert cli_main(["export", str(tmp_path / out)]) == 0
        text = (tmp_path / out).read_text()
        assert secret not in text and "HF_TOKEN" in text
    doc = check(_json.loads((tmp_path / "r.json").read_text()))
    assert doc["jobs"][0]["config"]["env"] == {"HF_TOKEN": "<redacted>"}


def test_an_existing_wide_open_data_dir_and_database_are_tightened(tmp_path):
    import stat as _stat

    from gputop_dl.record.store import Store, data_dir

    home = data_dir()
    os.chmod(home, 0o755)
    Store().close()
    db = os.path.join(home, "sessions.db")
    os.chmod(db, 0o644)
    Store().close()
    data_dir()
    assert _stat.S_IMODE(os.stat(home).st_mode) == 0o700
    assert _stat.S_IMODE(os.stat(db).st_mode) == 0o600


@pytest.mark.shares_box("a failure and its statuses")
def test_real_launch_a_job_that_cannot_exec_fails_alone_and_the_others_go_on(tmp_path, capsys):
    from gputop_dl.cli import main as cli_main

    bad = tmp_path / "bad.sh"
    bad.write_text("#!/no/such/interpreter\necho never\n")
    bad.chmod(0o755)
    toml = tmp_path / "w.toml"
    toml.write_text('[session]\nname = "exec"\ninterval = 0.2\nbaseline = "none"\n'
                    f'[[workload]]\nname = "bad"\ncommand = ["{bad}"]\n'
                    '[[workload]]\nname = "good"\ncommand = ["sh", "-c", "sleep 0.5"]\n')
    assert cli_main(["launch", str(toml), "--headless"]) == 1  # a job failed
    out = capsys.readouterr()
    assert "Traceback" not in out.out + out.err and "engine error" not in out.out + out.err
    from gputop_dl.record.store import Store

    st = Store(readonly=True)
    jobs = {j["name"]: j for j in st.jobs(st.sessions()[0].id)}
    assert jobs["good"]["status"] == "done"
    assert jobs["bad"]["status"] == "failed"
    assert "could not start" in jobs["bad"]["failure"] and "No such file" in jobs["bad"]["failure"]


def test_a_failure_without_a_message_says_what_is_known():
    from gputop_dl.injob.channel import failure_message

    msg = failure_message(MemoryError())
    assert msg.startswith("MemoryError (no message: an allocation failed; this process's peak RSS")
    assert msg.endswith(" MiB)")
    assert failure_message(RuntimeError("boom\nmore")) == "RuntimeError: boom"
    assert failure_message(KeyError()) == "KeyError (no message)"


def test_py_spy_is_taken_from_the_interpreters_environment_before_path(tmp_path, monkeypatch):
    from gputop_dl.collect.pyspy import run as pyspy

    bindir = tmp_path / "bin"
    bindir.mkdir()
    for d in (bindir, tmp_path):
        exe = d / "py-spy"
        exe.write_text("#!/bin/sh\n")
        exe.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(bindir / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    assert pyspy.pyspy_path() == str(bindir / "py-spy")
    (bindir / "py-spy").unlink()
    assert pyspy.pyspy_path() == str(tmp_path / "py-spy")


def test_the_console_summary_shows_the_peak_memory_the_export_shows():
    from rich.console import Console

    from gputop_dl.analyse.recorded.summary import JobResult
    from gputop_dl.present.headless import summary_table

    r = JobResult(name="cpu-job", status="failed", failure="host-oom: MemoryError", device="cpu",
                  config={}, peak_rss=int(2.8 * 1024**3))
    assert r.peak_mem() == (int(2.8 * 1024**3), "host-rss-tree")
    con = Console(width=200, record=True)
    con.print(summary_table([r]))
    text = con.export_text()
    assert "2.8 GiB" in text
    # which step the table shows, and which the slowdown is of (they differ: README)
    assert "median step" in text and "its median step while all jobs ran / its solo step" in text


def test_a_job_that_never_started_is_never_signalled_or_waited_on(tmp_path, monkeypatch):
    """A NotStarted has no PID: its run is ended from the first (a "stop" asked before its
    first poll reaches nothing), and stop_jobs/reap_orphans leave it out (waitid(P_PGID, None)
    raised TypeError; killpg(0) would be our own group)."""
    from gputop_dl.control import launch, stop
    from gputop_dl.engine.jobrun import JobRun
    from gputop_dl.workload import Workload

    log = tmp_path / "bad.log"
    log.write_text("could not start ./bad.sh: Exec format error\n")
    ns = launch.NotStarted("bad", str(log), str(tmp_path / "bad.events.jsonl"), ["./bad.sh"],
                           time.time(), "could not start ./bad.sh: Exec format error")
    calls = []
    for fn in ("killpg", "kill", "waitid", "waitpid"):
        monkeypatch.setattr(os, fn, lambda *a, _fn=fn: calls.append((_fn, a)))
    stop.stop_jobs([ns], grace_s=0.1)
    stop.reap_orphans([ns])
    assert calls == []
    run = JobRun(Workload(name="bad", command=("./bad.sh",)), ns, "co-run")
    assert not run.alive and run.status == "failed" and run.exit_code == 127
    assert run.failure == "could not start ./bad.sh: Exec format error"
    assert run.stderr_tail == ("could not start ./bad.sh: Exec format error",)


def test_a_bad_interpreter_line_is_named_in_the_cause(tmp_path):
    from gputop_dl.control.launch import StartError, start_job
    from gputop_dl.workload import Workload

    bad = tmp_path / "bad.sh"
    bad.write_text("#!/no/such/interpreter -x\necho never\n")
    bad.chmod(0o755)
    noexec = tmp_path / "noexec.sh"
    noexec.write_text("#!/bin/sh\n")
    causes = {}
    for name, prog in (("bad", str(bad)), ("noexec", str(noexec)), ("gone", str(tmp_path / "x"))):
        try:
            start_job(Workload(name=name, command=(prog,)), str(tmp_path / "w"), cuda=False)
            raise AssertionError(f"{name} started")
        except StartError as exc:
            causes[name] = str(exc)
            assert exc.job.pid is None and (tmp_path / "w" / f"{name}.log").read_text() == \
                causes[name] + "\n"
    assert causes["bad"] == (f"could not start {bad}: No such file or directory (the "
                             "interpreter of its #! line, '/no/such/interpreter -x', is not there)")
    assert causes["noexec"] == f"could not start {noexec}: Permission denied"
    assert causes["gone"] == f"could not start {tmp_path / 'x'}: No such file or directory"


def test_env_values_an_older_version_stored_in_clear_are_redacted_when_read(tmp_path):
    """Sessions recorded before the redaction (or by an older gputop-dl) hold env values in
    clear: every reader of the store (exports, the TUI's history, sessions) gets them redacted."""
    from gputop_dl.cli import main as cli_main
    from gputop_dl.record.store import Store

    secret = "hf_" + "0ldT0k3n" * 3
    config = {"name": "job", "command": ["true"], "env": {"HF_TOKEN": secret, "A": "1"}}
    st = Store()
    sid = st.create_session("old", file=None, command="gputop-dl launch w.toml", kind="launch",
                            environment={}, spec={"workloads": [config], "baseline": "none"})
    st.upsert_job(sid, "job", launched=True, config=config, status="done")
    st.commit()
    st.close()
    st = Store(readonly=True)
    assert st.jobs(sid)[0]["config"]["env"] == {"HF_TOKEN": "<redacted>", "A": "<redacted>"}
    assert st.session(sid).spec["workloads"][0]["env"]["HF_TOKEN"] == "<redacted>"
    st.close()
    for out in ("old.json", "old.md"):
        assert cli_main(["export", str(tmp_path / out)]) == 0
        assert secret not in (tmp_path / out).read_text()
    doc = check(json.loads((tmp_path / "old.json").read_text()))
    assert doc["jobs"][0]["config"]["env"] == {"HF_TOKEN": "<redacted>", "A": "<redacted>"}


def test_databases_kept_aside_and_an_older_wal_are_made_private(tmp_path, gdl_home):
    import stat as _stat

    from gputop_dl.record.store import Store

    db = gdl_home / "sessions.db"
    db.write_bytes(b"not a database at all" * 10)
    os.chmod(db, 0o644)
    Store().close()
    kept = [p for p in gdl_home.iterdir() if p.name.startswith("sessions.corrupt")]
    assert kept and all(_stat.S_IMODE(p.stat().st_mode) == 0o600 for p in kept)
    Store().close()
    for suffix in ("", "-wal", "-shm"):  # as an older gputop-dl left them
        p = gdl_home / ("sessions.db" + suffix)
        if not p.exists():
            p.write_bytes(b"")
        os.chmod(p, 0o644)
    st = Store()
    for suffix in ("", "-wal", "-shm"):
        assert _stat.S_IMODE((gdl_home / ("sessions.db" + suffix)).stat().st_mode) == 0o600, suffix
    st.close()


def test_a_data_dir_that_cannot_be_read_is_one_line_naming_it(tmp_path, gdl_home, monkeypatch):
    """Another user's data dir (0700): `sessions` and `export` said "not writable", or "no
    sessions recorded yet" as if it were empty. As root every folder is readable, so the check
    is what is exercised here (scripts/fault_matrix.py runs it as another user)."""
    from gputop_dl.record.store import StoreError, data_dir

    real = os.access
    monkeypatch.setattr(os, "access", lambda p, m: False if str(p) == str(gdl_home) else real(p, m))
    for writable in (False, True):
        try:
            data_dir(writable=writable)
            raise AssertionError("no error")
        except StoreError as exc:
            assert str(exc).startswith(f"GPUTOP_DL_HOME={gdl_home}: the data directory cannot be "
                                       "read (mode 0"), str(exc)


def _disk_full_from(call: int, monkeypatch, *, frees_before_end: bool):
    """Store writes fail from the `call`-th host sample on; the end-of-run catch-up finds the
    space freed again (`frees_before_end`) or the disk still full."""
    import sqlite3

    from gputop_dl.record.store import Store

    state = {"n": 0, "full": False}
    real_sample, real_end, real_upsert = Store.add_host_sample, Store.end_session, Store.upsert_job

    def full_check():
        if state["full"]:
            raise sqlite3.OperationalError("database or disk is full")

    def sample(self, *a):
        state["n"] += 1
        state["full"] = state["full"] or state["n"] >= call
        full_check()
        return real_sample(self, *a)

    def end(self, *a, **k):
        full_check()
        return real_end(self, *a, **k)

    def upsert(self, *a, **k):
        full_check()
        return real_upsert(self, *a, **k)

    monkeypatch.setattr(Store, "add_host_sample", sample)
    monkeypatch.setattr(Store, "end_session", end)
    monkeypatch.setattr(Store, "upsert_job", upsert)
    if frees_before_end:
        from gputop_dl.engine.recorder import Recorder

        real_close = Recorder.close

        def close(self, *a, **k):
            state["full"] = False
            return real_close(self, *a, **k)

        monkeypatch.setattr(Recorder, "close", close)


def test_a_full_disk_that_frees_up_still_gets_the_final_statuses_and_cut_short(tmp_path, monkeypatch):
    from gputop_dl.record.store import Store

    _disk_full_from(3, monkeypatch, frees_before_end=True)
    eng = run_file(session(tmp_path, ("a", {"command": ["sleep", "1.5"]}),
                           ("b", {"command": ["sleep", "2"]})), nvml=Nvml())
    assert "final statuses were saved" in eng.recorder.failure
    st = Store()
    assert st.session(eng.session_id).state == "cut short"
    assert {j["name"]: j["status"] for j in st.jobs(eng.session_id)} == {"a": "done", "b": "done"}


def test_a_disk_still_full_at_the_end_gives_the_final_statuses_in_the_summary(tmp_path, monkeypatch):
    import io

    from rich.console import Console

    from gputop_dl.record.store import Store
    from gputop_dl.runner import print_summary

    _disk_full_from(3, monkeypatch, frees_before_end=False)
    eng = run_file(session(tmp_path, ("a", {"command": ["sleep", "1.5"]})), nvml=Nvml())
    assert "final statuses were saved" not in eng.recorder.failure
    assert {j["status"] for j in Store().jobs(eng.session_id)} != {"done"}  # stale in the store
    buf = io.StringIO()
    print_summary(eng, Console(file=buf, width=200))
    out = buf.getvalue()
    assert "recorded before recording stopped" in out and "recording cut short" in out
    assert "│ a   │ done" in out


def test_a_setsid_daemon_that_ends_mid_session_is_reaped_not_left_a_zombie(tmp_path):
    # the job's shell leaves a daemon in a session of its own and exits; the daemon comes to
    # us (the subreaper) and ends while the other job still runs
    daemon = f"setsid sh -c 'echo $$ > {tmp_path}/d.pid; exec sleep 0.6' & sleep 0.1"
    eng = run_file(session(tmp_path, ("sh", {"command": [daemon], "shell": True}),
                           ("long", {"command": ["sleep", "2.5"]})), nvml=Nvml())
    assert eng.error is None
    pid = int((tmp_path / "d.pid").read_text())
    assert not os.path.exists(f"/proc/{pid}"), open(f"/proc/{pid}/status").read()[:200]


def test_env_values_an_older_version_stored_in_clear_are_scrubbed_from_disk_once(tmp_path, gdl_home):
    """Opening a database for writing once redacts what an older gputop-dl kept in clear: the
    rows (with secure_delete, so the old bytes are overwritten) and the jobs' spec files."""
    import glob
    import sqlite3

    from gputop_dl.record.store import Store, default_db_path

    secret = "hf_" + "0ldT0k3n" * 3
    config = {"name": "job", "command": ["true"], "env": {"HF_TOKEN": secret}}
    st = Store()
    sid = st.create_session("old", file=None, command="gputop-dl launch w.toml", kind="launch",
                            environment={}, spec={"workloads": [config], "baseline": "none"})
    st.upsert_job(sid, "job", launched=True, config=config, status="done")
    st.db.execute("DELETE FROM meta WHERE key='env_redacted'")  # as an older version left it
    st.commit()
    st.close()
    spec_dir = os.path.join(gdl_home, "sessions", sid)
    os.makedirs(spec_dir, exist_ok=True)
    with open(os.path.join(spec_dir, "job.json"), "w") as f:
        json.dump(config, f)
    db = default_db_path()
    con = sqlite3.connect(db)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()

    def on_disk() -> bool:
        files = glob.glob(db + "*") + glob.glob(os.path.join(gdl_home, "sessions", "*", "*"))
        return any(secret.encode() in open(p, "rb").read() for p in files)

    assert on_disk()
    Store().close()  # any writer: a launch, the monitor
    assert not on_disk()
    assert json.load(open(os.path.join(spec_dir, "job.json")))["env"] == {"HF_TOKEN": "<redacted>"}
    st = Store(readonly=True)
    assert st.jobs(sid)[0]["status"] == "done"
    st.close()
