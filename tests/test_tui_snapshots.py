"""SVG snapshot tests of the TUI at 160×50, fed fixed snapshots by a fake source and a fixed clock.

Each case renders the screen and compares (1) its plain text and (2) its SVG export with the files
in tests/tui_snapshots/. The text comparison fails first, with a readable diff; the SVG catches
colour and style changes. Rendering is deterministic: fixed data, fixed clock, TZ=UTC for log
times, no notifications. The files were made with the textual/rich versions in
tests/tui_snapshots/VERSIONS, which the test extra pins (pyproject.toml): under other versions the
cases fail with a line saying so (never a silent skip). Regenerate with:

    GPUTOP_DL_UPDATE_SNAPSHOTS=1 .venv/bin/python -m pytest tests/test_tui_snapshots.py

and move the pins of the test extra to the versions written in VERSIONS.
"""

from __future__ import annotations

import asyncio
import difflib
import io
import json
import os
import time
from importlib import metadata

import pytest
from rich.console import Console

from gputop_dl.present.tui.app import GputopApp

from tests.fakes.source import (SPEC, T0, FakeSource, FixedClock, found_jobs_snapshot, make_snapshot,
                               monitor_snapshot, queue_snapshot)

HERE = os.path.dirname(os.path.abspath(__file__))
SNAP_DIR = os.path.join(HERE, "tui_snapshots")
VERSIONS_FILE = os.path.join(SNAP_DIR, "VERSIONS")
SIZE = (160, 50)
UPDATE = os.environ.get("GPUTOP_DL_UPDATE_SNAPSHOTS") == "1"


def versions() -> dict:
    """The libraries that draw the screens (the history charts: textual-plotext and plotext)."""
    return {name: metadata.version(name) for name in ("textual", "rich", "textual-plotext", "plotext")}


@pytest.fixture(autouse=True)
def utc(monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.fixture(autouse=True)
def pinned_versions():
    if UPDATE:
        os.makedirs(SNAP_DIR, exist_ok=True)
        with open(VERSIONS_FILE, "w") as f:
            json.dump(versions(), f, indent=1)
            f.write("\n")
        return
    try:
        with open(VERSIONS_FILE) as f:
            made_with = json.load(f)
    except OSError:
        pytest.fail(f"{VERSIONS_FILE} missing: run with GPUTOP_DL_UPDATE_SNAPSHOTS=1")
    if made_with != versions():
        pytest.fail(f"snapshots made with {made_with}, running {versions()}: install the test "
                    "extra (it pins them), or regenerate with GPUTOP_DL_UPDATE_SNAPSHOTS=1, "
                    "review the diff and move the pins in pyproject.toml")


def test_the_test_extra_pins_the_versions_the_snapshots_were_made_with():
    """A fresh `pip install -e '.[test]'` gets exactly the textual and rich of VERSIONS."""
    import tomllib

    with open(os.path.join(HERE, "..", "pyproject.toml"), "rb") as f:
        test_extra = tomllib.load(f)["project"]["optional-dependencies"]["test"]
    with open(VERSIONS_FILE) as f:
        made_with = json.load(f)
    for name, version in made_with.items():
        assert f"{name}=={version}" in test_extra, (name, version, test_extra)


def screen_text(app) -> str:
    console = Console(width=SIZE[0], height=SIZE[1], file=io.StringIO(), record=True,
                      color_system=None, force_terminal=False, legacy_windows=False)
    console.print(app.screen._compositor.render_update(full=True, screen_stack=app._background_screens))
    return "\n".join(line.rstrip() for line in console.export_text().splitlines()) + "\n"


def check(name: str, text: str, svg: str, tmp_path) -> None:
    txt_path = os.path.join(SNAP_DIR, f"{name}.txt")
    svg_path = os.path.join(SNAP_DIR, f"{name}.svg")
    if UPDATE:
        with open(txt_path, "w", encoding="utf-8") as f:
            f.write(text)
        with open(svg_path, "w", encoding="utf-8") as f:
            f.write(svg)
        return
    with open(txt_path, encoding="utf-8") as f:
        want_text = f.read()
    with open(svg_path, encoding="utf-8") as f:
        want_svg = f.read()
    got_svg = tmp_path / f"{name}.svg"
    got_svg.write_text(svg, encoding="utf-8")
    if text != want_text:
        diff = "".join(difflib.unified_diff(want_text.splitlines(True), text.splitlines(True),
                                            "expected", "actual"))
        pytest.fail(f"{name}: screen text differs (actual SVG: {got_svg}):\n{diff}")
    assert svg == want_svg, f"{name}: same text, different styling; actual SVG: {got_svg}"


async def charts_drawn(app, pilot, within_s: float = 10.0) -> None:
    """Wait for the event: the bottom row mounted and, where the history charts are on screen,
    drawn. The monitor mounts them after its first frame; a key's modal opened before they
    drew leaves them empty behind it (on a loaded box the help screen once showed an empty
    axis where the charts had their samples)."""
    hp = app.history_panel
    for _ in range(int(within_s / 0.05)):
        if app.rest_mounted and (not hp._visible() or hp.drawn_at is not None):
            return
        await pilot.pause(0.05)
    raise AssertionError("the history charts were not drawn in time")


def render(name: str, tmp_path, *, mode: str = "launch", snaps=(), keys=(), theme: str | None = None,
           env: dict | None = None, session_id: str | None = "20251121-183320-abc123") -> None:
    async def go():
        src = FakeSource(live=["bs32", "bs64"], spec=SPEC if mode == "launch" else None,
                         session_id=session_id, env=env)
        app = GputopApp(src, clock=FixedClock(T0 + len(snaps)), mode=mode,
                        launcher=object() if mode == "monitor" else None)
        async with app.run_test(size=SIZE) as pilot:
            if theme:
                app.theme = theme
            for s in snaps:
                src.emit(s)
                await pilot.pause()
            await charts_drawn(app, pilot)
            for k in keys:
                await pilot.press(k)
            await pilot.pause()
            await pilot.wait_for_scheduled_animations()
            await pilot.pause()
            check(name, screen_text(app), app.export_screenshot(title="gputop-dl"), tmp_path)

    asyncio.run(go())


CORUN = [make_snapshot(t) for t in range(6)]


def test_launch_corun_with_verdict(tmp_path):
    render("launch_corun", tmp_path, snaps=CORUN)


def test_launch_corun_light_theme(tmp_path):
    render("launch_corun_light", tmp_path, snaps=CORUN, theme="textual-light")


def test_launch_baseline_on_cpu_only_machine(tmp_path):
    note = "No NVIDIA GPU: the NVIDIA driver is not loaded (libnvidia-ml.so.1 not found); workloads train on the CPU."
    snaps = [make_snapshot(t, verdict=None, phase="baseline", n_gpus=0, gpu_status="no-library", notes=(note,),
                           gpu_processes=()) for t in range(3)]
    render("launch_baseline_cpu", tmp_path, snaps=snaps)


def test_monitor_without_gpu(tmp_path):
    detail = "No NVIDIA GPU: the NVIDIA driver is not loaded (libnvidia-ml.so.1 not found)"
    render("monitor_nogpu", tmp_path, mode="monitor", session_id=None, env={"gpu_status_detail": detail},
           snaps=[monitor_snapshot(t) for t in range(3)])


def test_verdict_modal(tmp_path):
    render("verdict_modal", tmp_path, snaps=CORUN[:2], keys=("v",))


def test_job_details_modal(tmp_path):
    render("job_details_modal", tmp_path, snaps=CORUN[:2], keys=("j", "j", "enter"))


def test_sorted_by_cpu_all_epochs(tmp_path):
    render("sorted_cpu_all_epochs", tmp_path, snaps=CORUN[:3], keys=("c", "a"))


def test_launch_queue_panel(tmp_path):
    render("launch_queue", tmp_path, snaps=[queue_snapshot(t) for t in range(3)])


def test_fleet_view(tmp_path):
    """Three nodes (one unreachable, one stale), a distributed job with a rank missing."""
    from gputop_dl.present.tui.fleet_app import FleetApp

    from tests.fakes.fleet import FakeFleetSource, fleet_snapshot

    async def go():
        src = FakeFleetSource()
        app = FleetApp(src, clock=FixedClock(T0 + 1))
        async with app.run_test(size=SIZE) as pilot:
            src.emit(fleet_snapshot())
            await pilot.pause()
            await pilot.pause()
            check("fleet", screen_text(app), app.export_screenshot(title="gputop-dl"), tmp_path)

    asyncio.run(go())


CHARTS = [found_jobs_snapshot(t) for t in range(0, 600, 5)]  # 10 minutes, a sample every 5 s


def test_monitor_history_charts(tmp_path):
    """The monitor's history charts: three found jobs, one slowed from 200 s to 400 s of a
    10-minute session, the verdict's changes marked; the last 5 minutes."""
    render("monitor_charts", tmp_path, mode="monitor", session_id=None, snaps=CHARTS)


def test_monitor_history_charts_whole_session_light(tmp_path):
    """The same zoomed out (`z`) under a light theme."""
    render("monitor_charts_light", tmp_path, mode="monitor", session_id=None, snaps=CHARTS, keys=("z",),
           theme="textual-light")


def test_help_lists_every_key_light_theme(tmp_path):
    """`?` help over the monitor, under a light theme."""
    render("help_light", tmp_path, mode="monitor", session_id=None, snaps=CHARTS[:3], keys=("question_mark",),
           theme="textual-light")
