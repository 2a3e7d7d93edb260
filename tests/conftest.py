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
