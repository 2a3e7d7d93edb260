"""Shared fixtures: every test gets its own session store (GPUTOP_DL_HOME in a tmp dir)."""

import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


@pytest.fixture(autouse=True)
def gdl_home(tmp_path, monkeypatch):
    home = tmp_path / "gdl-home"
    home.mkdir()
    monkeypatch.setenv("GPUTOP_DL_HOME", str(home))
    return home


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


HEAVY_MODULES = {"test_launch", "test_scenarios", "test_tmux"}


def pytest_collection_modifyitems(config, items):
    """Real-process tests run one at a time on one xdist worker (`--dist loadgroup`): they
    measure CPU contention and slowdowns, which a second heavy test beside them would skew."""
    for item in items:
        mod = item.module.__name__.rsplit(".", 1)[-1]
        if mod in HEAVY_MODULES or "real_launch" in item.name or "end_to_end" in item.name:
            item.add_marker(pytest.mark.xdist_group("heavy"))
