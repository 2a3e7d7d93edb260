"""`gputop-dl compare A B [--json]` and `sessions --json`: two recorded sessions side by side
(schema gputop-dl.comparison/1), bad input as one line and exit 2."""

from __future__ import annotations

import io
import json
import os

from rich.console import Console

from gputop_dl import cli
from gputop_dl.present.report.compare import COMPARISON_SCHEMA, compare_sessions, comparison_table
from tests.fakes.reports import make_session, fresh_store
from tests.schema_check import check


def two_sessions(tmp_path, monkeypatch, second_names=None, second_config=None):
    home = tmp_path / "home"
    monkeypatch.setenv("GPUTOP_DL_HOME", str(home))
    from gputop_dl.record.store import default_db_path

    store = fresh_store(default_db_path())
    a = make_session(store, name="before")
    b = make_session(store, name="after", job_names=second_names, extra_config=second_config)
    store.close()
    return a, b


def test_two_sessions_side_by_side_with_the_change_and_both_verdicts(tmp_path, monkeypatch):
    a, b = two_sessions(tmp_path, monkeypatch)
    doc = compare_sessions(a, b)
    assert doc["schema"] == COMPARISON_SCHEMA and doc["common_jobs"] == 3 and doc["note"] is None
    assert doc["a"]["id"] == a and doc["b"]["name"] == "after"
    assert doc["a"]["verdict"]["kind"] and doc["b"]["verdict"]["kind"] == doc["a"]["verdict"]["kind"]
    bs32 = next(j for j in doc["jobs"] if j["name"] == "bs32")
    assert bs32["a"]["step_time_s"] == bs32["b"]["step_time_s"]
    assert bs32["change"]["step_time_s"] == 1.0 and bs32["change"]["stall_fraction"] == 0.0
    assert bs32["a"]["cpu_wait_fraction"] is None and bs32["change"]["cpu_wait_fraction"] is None
    console = Console(width=200, file=io.StringIO(), color_system=None)
    console.print(comparison_table(doc))
    out = console.file.getvalue()
    assert "bs32" in out and "×1.00" in out and "+0 pts" in out and "before" in out


def test_no_job_in_common_is_said_and_both_are_shown(tmp_path, monkeypatch, capsys):
    a, b = two_sessions(tmp_path, monkeypatch, second_names=("x1", "x2", "x3"))
    assert cli.main(["compare", a, b]) == 0
    out = capsys.readouterr().out
    assert "no job in common" in out and "bs32" in out and "x1" in out and "not in B" in out
    assert cli.main(["compare", a, b, "--json"]) == 0
    doc = check(json.loads(capsys.readouterr().out))
    assert doc["common_jobs"] == 0 and {j["name"] for j in doc["jobs"]} >= {"bs32", "x1"}
    x1 = next(j for j in doc["jobs"] if j["name"] == "x1")
    assert x1["a"] is None and x1["b"]["step_time_s"] is not None


def test_bad_input_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    a, b = two_sessions(tmp_path, monkeypatch)
    for argv in (["compare", a, a], ["compare", a, "nope-no-such"]):
        assert cli.main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("gputop-dl: error:") and "\n" not in err and "Traceback" not in err
    assert cli.main(["compare", a, "nope-no-such"]) == 2
    assert "no session 'nope-no-such'" in capsys.readouterr().err


def test_sessions_json_for_scripts(tmp_path, monkeypatch, capsys):
    a, b = two_sessions(tmp_path, monkeypatch)
    assert cli.main(["sessions", "--json"]) == 0
    doc = check(json.loads(capsys.readouterr().out))
    assert doc["schema"] == "gputop-dl.sessions/1"
    assert {s["id"] for s in doc["sessions"]} == {a, b}
    assert os.path.exists(tmp_path / "home")


def test_step_phases_are_a_table_of_means_with_the_change(tmp_path, monkeypatch):
    a, b = two_sessions(tmp_path, monkeypatch)
    doc = compare_sessions(a, b)
    bs32 = next(j for j in doc["jobs"] if j["name"] == "bs32")
    bs32["a"]["phases"] = {"data_s": 0.0117, "h2d_s": 1.26e-05, "forward_s": 0.197,
                           "backward_s": 0.275, "optimizer_s": 0.0057, "other_s": 0.0032}
    bs32["b"]["phases"] = {"data_s": 0.0056, "h2d_s": 1.06e-05, "forward_s": 0.208,
                           "backward_s": 0.238, "optimizer_s": 0.0050, "other_s": 0.0052}
    console = Console(width=200, file=io.StringIO(), color_system=None)
    console.print(comparison_table(doc))
    out = console.file.getvalue()
    assert "{" not in out and "data_s" not in out  # no raw dict
    row = [line for line in out.splitlines() if line.startswith("│ bs32") and "→" in line][-1]
    assert "12 ms → 5.6 ms" in row and "13 µs → 11 µs" in row and "197 ms → 208 ms" in row
    assert "×0.48" in out and "×1.06" in out


def test_what_changed_between_the_sessions_is_said_per_setting(tmp_path, monkeypatch):
    a, b = two_sessions(tmp_path, monkeypatch, second_config={"num_workers": 1})
    doc = compare_sessions(a, b)
    changes = {j["name"]: j["config_changes"] for j in doc["jobs"]}
    assert set(changes) == {"bs32", "bs64", "bs128"}
    # the fixture's third job (it fails at start) keeps its settings
    assert changes == {"bs32": {"num_workers": [4, 1]}, "bs64": {"num_workers": [4, 1]},
                       "bs128": {}}
    console = Console(width=200, file=io.StringIO(), color_system=None)
    console.print(comparison_table(doc))
    out = console.file.getvalue()
    line = [x for x in out.splitlines() if x.startswith("changed: num_workers")]
    assert line == ["changed: num_workers: 4 → 1 (bs32, bs64)"], out
    # the same settings are said to be the same; a found job (no settings) says nothing
    a2, b2 = two_sessions(tmp_path / "2", monkeypatch)
    doc2 = compare_sessions(a2, b2)
    assert all(j["config_changes"] == {} for j in doc2["jobs"])
    console = Console(width=200, file=io.StringIO(), color_system=None)
    console.print(comparison_table(doc2))
    assert "settings: the same in A and B for bs32, bs64, bs128" in console.file.getvalue()
    from gputop_dl.present.report.compare import _config_changes, _what_changed

    assert _config_changes(None, {"x": 1}) is None
    assert _what_changed([{"name": "t.py", "config_changes": None}]) is None


def test_cpu_wait_and_disk_are_compared_from_the_recorded_samples(tmp_path, monkeypatch):
    """compare read the CPU wait from the job summaries, which never had it (always "–"); it
    and the disk figures come from the recorded samples."""
    monkeypatch.setenv("GPUTOP_DL_HOME", str(tmp_path / "home"))
    from gputop_dl.record.store import default_db_path

    store = fresh_store(default_db_path())
    a = make_session(store, name="before", sample_extra=dict(
        cpu_wait_fraction=0.2, io_read_bytes_per_s=1_000_000, io_wait_fraction=0.4))
    b = make_session(store, name="after", sample_extra=dict(
        cpu_wait_fraction=0.5, io_read_bytes_per_s=2_000_000, io_wait_fraction=0.9))
    store.close()
    bs32 = next(j for j in compare_sessions(a, b)["jobs"] if j["name"] == "bs32")
    assert bs32["a"]["cpu_wait_fraction"] == 0.2 and bs32["b"]["io_read_bytes_per_s"] == 2_000_000
    assert bs32["change"]["cpu_wait_fraction"] == 0.3 and bs32["change"]["io_read_bytes_per_s"] == 2.0
    assert bs32["change"]["io_wait_fraction"] == 0.5
    console = Console(width=240, file=io.StringIO(), color_system=None)
    console.print(comparison_table(compare_sessions(a, b)))
    out = console.file.getvalue()
    assert "disk read" in out and "I/O wait" in out and "+30 pts" in out
