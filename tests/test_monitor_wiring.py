"""runner/monitor.py's wiring of the monitor's keys: the launcher (`l`), the export (`e`) and the
diagnosis (`d`) import what they need on first use, and `--readonly` never probes."""

from __future__ import annotations

import inspect

from gputop_dl.record.store import Store
from gputop_dl.runner import live, monitor
from tests.fakes import reports as fx

COMMAND_FILE = """
[session]
name = "two commands"
baseline = "none"

[[workload]]
name = "a"
command = ["python3", "-c", "pass"]

[[workload]]
name = "b"
command = ["python3", "-c", "pass"]
"""


def test_the_launcher_is_built_on_first_use_and_kept(tmp_path):
    path = tmp_path / "w.toml"
    path.write_text(COMMAND_FILE)
    launcher = monitor.LazyLauncher()
    assert launcher._launcher is None  # nothing imported or built for the first frame
    spec = launcher.load(str(path), only=["b"])
    assert [w.name for w in spec.workloads] == ["b"]
    built = launcher._launcher
    assert built is not None
    launcher.load(str(path))
    assert launcher._launcher is built


def test_export_writes_the_session(tmp_path):
    store = Store(str(tmp_path / "s.db"))
    sid = fx.make_session(store)
    store.close()
    out = tmp_path / "report.md"
    assert monitor.export(sid, str(out), store_path=str(tmp_path / "s.db")) == str(out)
    assert out.read_text().startswith("# ")


def test_diagnose_takes_the_apps_arguments_and_readonly_never_probes(monkeypatch):
    calls = []
    monkeypatch.setattr(live, "diagnose_for_tui",
                        lambda nvml, seconds, probe, progress: calls.append((seconds, probe)) or {})
    # the app passes the keywords the function takes (session_actions.py inspects them)
    assert {"seconds", "probe", "progress"} <= set(inspect.signature(monitor.diagnose).parameters)
    monitor.diagnose(seconds=5.0, probe=True)
    monitor.diagnose(seconds=5.0, probe=True, readonly=True)
    assert calls == [(5.0, True), (5.0, False)]
