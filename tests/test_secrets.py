"""Secrets in arguments: a job's secret-looking arguments are redacted by the same
rule as its `env` values (`workload.redact_secrets`) in the store, the exports, `/metrics` and
the screen; an export is private (0600) unless `--shared`; the export's `command` is filled."""

import json
import os
import sqlite3
import stat
import sys

import pytest

from gputop_dl import cli
from gputop_dl.collect.jobs.discover import Found
from gputop_dl.collect.jobs.job_name import shown_line
from gputop_dl.collect.jobs.found import tell_apart
from gputop_dl.collect.proc.identity import Identity
from gputop_dl.workload import REDACTED, redact_args, redact_line, redact_secrets
from tests.conftest import write
from tests.schema_check import check

SECRET = "s3cr3t" + "Qz" * 6


@pytest.mark.parametrize("args, shown", [
    (["--password", SECRET], ["--password", REDACTED]),
    ([f"--password={SECRET}"], [f"--password={REDACTED}"]),
    (["--token", SECRET, "--lr", "1"], ["--token", REDACTED, "--lr", "1"]),
    (["--key", SECRET], ["--key", REDACTED]),
    (["--api-key", SECRET], ["--api-key", REDACTED]),
    ([f"--secret={SECRET}"], [f"--secret={REDACTED}"]),
    ([f"HF_TOKEN={SECRET}"], [f"HF_TOKEN={REDACTED}"]),
    ([f"AWS_SECRET_ACCESS_KEY={SECRET}"], [f"AWS_SECRET_ACCESS_KEY={REDACTED}"]),
    ([f"--db=postgres://ada:{SECRET}@db:5432/x"], [f"--db=postgres://ada:{REDACTED}@db:5432/x"]),
    ([f"--accesstoken={SECRET}"], [f"--accesstoken={REDACTED}"]),
    ([f"--hftoken={SECRET}"], [f"--hftoken={REDACTED}"]),
    (["--clientSecret", SECRET], ["--clientSecret", REDACTED]),
    ([f"https://{SECRET}@github.com/a/b.git"], [f"https://{REDACTED}@github.com/a/b.git"]),
    ([f"--url=http://h/x?page=2&token={SECRET}"], [f"--url=http://h/x?page=2&token={REDACTED}"]),
    (["--bearer", SECRET], ["--bearer", REDACTED]),
    ([f"--auth_header=Bearer {SECRET}"], [f"--auth_header={REDACTED}"]),  # one argument, spaces
    (["--auth", f"Bearer {SECRET}"], ["--auth", REDACTED]),
    (["-H", f"Authorization: Bearer {SECRET}"], ["-H", f"Authorization: Bearer {REDACTED}"]),
    (["mysql", "-p", SECRET], ["mysql", "-p", REDACTED]),
    (["mysql", f"-p{SECRET}"], ["mysql", f"-p{REDACTED}"]),
    (["--token", "--lr"], ["--token", "--lr"]),  # a flag without a value
    (["--tokenizer", "gpt2", "--max_tokens", "512", "-p", "8080", "ssh://git@github.com/x"],
     ["--tokenizer", "gpt2", "--max_tokens", "512", "-p", "8080", "ssh://git@github.com/x"]),
    (["--keep-going", "x", "--monkey", "y", "--keys", "z", "MY_TOKEN="],
     ["--keep-going", "x", "--monkey", "y", "--keys", "z", "MY_TOKEN="]),  # no secret
])
def test_the_argument_rule(args, shown):
    assert redact_args(["python", "train.py", *args]) == ["python", "train.py", *shown]


def test_a_command_line_string_by_the_same_rule_quotes_and_spacing_kept():
    line = f"HF_TOKEN={SECRET} python t.py --password '{SECRET} and more'  --lr 1 | tee x"
    assert redact_line(line) == f"HF_TOKEN={REDACTED} python t.py --password {REDACTED}  --lr 1 | tee x"
    assert redact_line(f"gputop-dl --prometheus http://u:{SECRET}@h:9090 --once") == \
        f"gputop-dl --prometheus http://u:{REDACTED}@h:9090 --once"


def test_a_workload_config_redacts_env_and_command_by_one_rule():
    cfg = {"command": ["python", "t.py", "--token", SECRET], "env": {"HF_TOKEN": SECRET}}
    assert redact_secrets(cfg) == {"command": ["python", "t.py", "--token", REDACTED],
                                   "env": {"HF_TOKEN": REDACTED}}
    shell = {"command": [f"python t.py --secret {SECRET} && echo ok"], "shell": True}
    assert redact_secrets(shell)["command"] == [f"python t.py --secret {REDACTED} && echo ok"]
    plain = {"command": ["python", "t.py"], "env": {}}
    assert redact_secrets(plain) is plain


def found(pid: int, *argv: str) -> Found:
    return Found(name="train.py", pid=pid, start=pid, pids=(pid,), target=pid, torch=True,
                 gpu=False, cmdline=argv)


def test_a_found_jobs_command_line_and_name_hold_no_secret():
    """What the screen, the store (`info.command`) and /metrics (`job_name`) get of a job
    found running: its command line redacted, and no name told apart by a secret."""
    def args(secret):
        return ("--token", secret, f"--auth_header=Bearer {secret}",
                f"https://{secret}@github.com/x", f"--accesstoken={secret}")
    a = found(10, "python", "train.py", *args(SECRET))
    b = found(11, "python", "train.py", *args("other" + SECRET))
    assert SECRET not in shown_line(a.cmdline) and REDACTED in shown_line(a.cmdline)
    assert "Bearer" not in shown_line(a.cmdline)  # the argument's whole value, not a word of it
    name = tell_apart(a, Identity(user="ada"), [(b, Identity(user="bob"))], {"train.py"})
    assert SECRET not in name and name == "train.py @ada"


def launch_with_secrets(tmp_path) -> str:
    show = "import sys; print(sys.argv[-1][::-1])"  # the job gets the secret as it was given
    path = write(tmp_path, "w.toml", f"""
[session]
name = "s"
baseline = "none"
interval = 0.2
[[workload]]
name = "a"
command = [{json.dumps(sys.executable)}, "-c", {json.dumps(show)}, "--auth_header=Bearer {SECRET}",
           "https://{SECRET}@github.com/x", "--accesstoken={SECRET}", "--url=http://h/?token={SECRET}",
           "--password", "{SECRET}"]
[[workload]]
name = "b"
shell = true
command = "true HF_TOKEN={SECRET} https://u:{SECRET}@h/x"
""")
    assert cli.main(["launch", path, "--headless", "--only", "a,b"]) in (0, 1)
    return path


def test_no_secret_argument_in_the_store_or_an_export_and_the_command_is_filled(
        tmp_path, gdl_home, capsys):
    launch_with_secrets(tmp_path)
    con = sqlite3.connect(gdl_home / "sessions.db")
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    for root, _dirs, files in os.walk(gdl_home):
        for n in files:
            assert SECRET.encode() not in open(os.path.join(root, n), "rb").read(), n
    out = tmp_path / "out"
    out.mkdir()
    for name in ("r.json", "r.md"):
        assert cli.main(["export", str(out / name)]) == 0
        text = (out / name).read_text()
        assert [line for line in text.splitlines() if SECRET in line] == []
        assert "redacted" in text  # (escaped in Markdown: &lt;redacted&gt;)
        assert stat.S_IMODE(os.stat(out / name).st_mode) == 0o600
    jobs = {j["name"]: j for j in check(json.loads((out / "r.json").read_text()))["jobs"]}
    assert jobs["a"]["command"].endswith(f"--password {REDACTED}")
    assert jobs["b"]["command"] == f"true HF_TOKEN={REDACTED} https://u:{REDACTED}@h/x"
    capsys.readouterr()
    assert cli.main(["sessions"]) == 0
    assert SECRET not in capsys.readouterr().out


def test_an_export_is_private_unless_shared(tmp_path, gdl_home):
    from tests.fakes.reports import fresh_store, make_session

    st = fresh_store(str(gdl_home / "sessions.db"))
    make_session(st, command=f"gputop-dl launch w.toml --prometheus http://u:{SECRET}@h:1")
    st.close()
    old = os.umask(0o022)
    try:
        assert cli.main(["export", str(tmp_path / "private.md")]) == 0
        assert cli.main(["export", str(tmp_path / "shared.md"), "--shared"]) == 0
        assert cli.main(["export", str(gdl_home / "in-data-dir.md"), "--shared"]) == 0
    finally:
        os.umask(old)
    mode = {p: stat.S_IMODE(os.stat(p).st_mode) for p in
            (tmp_path / "private.md", tmp_path / "shared.md", gdl_home / "in-data-dir.md")}
    assert list(mode.values()) == [0o600, 0o644, 0o600]
    assert SECRET not in (tmp_path / "shared.md").read_text()  # the session's own command line


def test_shared_is_for_a_report_file_only(capsys):
    assert cli.main(["export", "tb", "--tensorboard", "--shared"]) == 2
    assert "--shared goes with a .md or .json report" in capsys.readouterr().err


def test_an_older_database_is_scrubbed_of_secret_arguments_once(gdl_home):
    """A database written before arguments were redacted: its rows are redacted when a writer
    first opens it (as the env values were)."""
    from gputop_dl.record.store import Store, default_db_path

    config = {"name": "job", "command": ["python", "t.py", f"--token={SECRET}"]}
    st = Store()
    sid = st.create_session("old", file=None, command="gputop-dl launch w.toml", kind="launch",
                            environment={}, spec={"workloads": [config], "baseline": "none"})
    st.db.execute("UPDATE sessions SET command=? WHERE id=?", (f"gputop-dl x --password {SECRET}", sid))
    st.db.execute("INSERT INTO jobs (session_id, name, launched, config) VALUES (?, 'job', 1, ?)",
                  (sid, json.dumps(config)))
    st.db.execute("DELETE FROM meta WHERE key='args_redacted'")  # as an older version left it
    st.commit()
    st.close()
    Store().close()
    con = sqlite3.connect(default_db_path())
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    assert SECRET.encode() not in open(default_db_path(), "rb").read()


def test_a_real_found_jobs_secret_arguments_reach_neither_once_nor_metrics(tmp_path):
    """A process found on the real /proc (its maps show a torch library: a file mapped from a
    `torch/_C` folder, so no torch import is needed) started with secret arguments: the
    `--once --json` snapshot and a scrape of `serve` list the job and hold no secret."""
    import shlex
    import signal
    import subprocess
    import time
    import urllib.request

    from tests.fakes.orphan import orphan_shell

    lib = tmp_path / "torch" / "_C" / "lib.so"
    lib.parent.mkdir(parents=True)
    lib.write_bytes(b"\0" * 8192)
    script = write(tmp_path, "train.py", "import mmap, sys, time\n"
                   "f = open(sys.argv[1], 'rb')\n"
                   "m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)\n"
                   "print('ready', flush=True)\n"
                   "time.sleep(120)\n")
    # started as from a terminal: a child of this process (an xdist worker that imported
    # torch) would be counted as that worker's loader worker, not as a job of its own
    ready = tmp_path / "ready"
    argv = [sys.executable, script, str(lib), "--token", SECRET, f"--auth_header=Bearer {SECRET}",
            f"https://{SECRET}@github.com/x"]
    _, pid = orphan_shell(f'{shlex.join(argv)} > {ready} 2>&1 & echo "pid $!"')
    serve = None
    try:
        def is_ready():  # the shell creates the file as it starts the job: maybe after its echo
            return ready.exists() and "ready" in ready.read_text()

        deadline = time.monotonic() + 60
        while not is_ready() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert is_ready()
        once = subprocess.run([sys.executable, "-m", "gputop_dl", "--once", "--json"],
                              capture_output=True, text=True, timeout=120, check=True).stdout
        mine = [j for j in json.loads(once)["jobs"] if j["pid"] == pid]
        assert len(mine) == 1 and REDACTED in mine[0]["command"]
        assert SECRET not in once

        serve = subprocess.Popen([sys.executable, "-m", "gputop_dl", "serve", "--listen",
                                  "127.0.0.1:0", "--interval", "0.5", "--stall-budget", "0"],
                                 stderr=subprocess.PIPE, text=True)
        url = serve.stderr.readline().split()[-1]
        deadline, text = time.monotonic() + 60, ""
        while f'pid="{pid}"' not in text and time.monotonic() < deadline:
            time.sleep(0.25)
            with urllib.request.urlopen(url, timeout=5) as r:
                text = r.read().decode()
        assert f'pid="{pid}"' in text  # the job is served
        assert SECRET not in text
    finally:
        os.kill(pid, signal.SIGKILL)
        if serve is not None:
            serve.terminate()
            serve.wait(30)
