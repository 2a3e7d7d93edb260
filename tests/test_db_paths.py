"""What the session database's path can be: a directory, a FIFO, an empty file, a
read-only file. Every command says so in one line, exit 2, and `launch` never leaves a 0-byte
database behind."""

import os
import subprocess
import sys

import pytest

from gputop_dl import cli
from gputop_dl.record import schema
from tests.conftest import write

WORKLOAD = '[session]\nname = "s"\nbaseline = "none"\ninterval = 0.2\n[[workload]]\nname = "a"\ncommand = ["true"]\n'
READERS = [["sessions"], ["export", "OUT/r.md"], ["compare", "a", "b"]]


def one_line(capsys, args, tmp_path) -> str:
    args = [a.replace("OUT", str(tmp_path)) for a in args]
    assert cli.main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def make(kind: str, db) -> None:
    if kind == "directory":
        db.mkdir()
    elif kind == "FIFO (named pipe)":
        os.mkfifo(db)


@pytest.mark.parametrize("kind", ["directory", "FIFO (named pipe)"])
@pytest.mark.parametrize("args", READERS + [["launch", "W", "--headless"]])
def test_a_database_path_that_is_no_file_is_one_line_in_every_command(
        capsys, tmp_path, gdl_home, kind, args):
    make(kind, gdl_home / "sessions.db")
    args = [write(tmp_path, "w.toml", WORKLOAD) if a == "W" else a for a in args]
    err = one_line(capsys, args, tmp_path)
    assert f"sessions.db: is a {kind}, not a session database file" in err


@pytest.mark.parametrize("args", READERS)
def test_an_empty_database_file_is_named_as_such(capsys, tmp_path, gdl_home, args):
    (gdl_home / "sessions.db").write_bytes(b"")
    assert "sessions.db: an empty file (0 bytes), no session recorded" in one_line(capsys, args, tmp_path)


def test_a_read_only_database_is_refused_for_writing_only(tmp_path, monkeypatch):
    """As root no mode bit stops a write, so the check (os.access) is stubbed here; the
    fault matrix runs the real case as another user."""
    db = str(tmp_path / "sessions.db")
    schema.open_for_writing(db).close()
    monkeypatch.setattr(schema.os, "access", lambda p, mode: not mode & os.W_OK)
    os.chmod(db, 0o400)
    with pytest.raises(schema.StoreError, match=r"the session database is read-only \(mode 0400\)"):
        schema.open_for_writing(db)
    schema.open_readonly(db).close()  # sessions and export still read it


def test_a_launch_onto_a_full_disk_leaves_no_empty_database(tmp_path, gdl_home):
    """RLIMIT_FSIZE = 0: the file can be created but not one byte written, as on a full disk."""
    path = write(tmp_path, "w.toml", WORKLOAD)
    code = ("import resource, signal, sys\n"
            "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
            "resource.setrlimit(resource.RLIMIT_FSIZE, (0, resource.RLIM_INFINITY))\n"
            "from gputop_dl.cli import main\n"
            f"sys.exit(main(['launch', {path!r}, '--headless']))\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and "cannot open the session database" in p.stderr
    assert os.listdir(gdl_home) == []
