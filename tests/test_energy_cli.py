"""The real CLI over the fake NVML (tests/fakes/pynvml_site on PYTHONPATH): `gputop-dl --once
--json` gives a job started by hand its GPU's joules and power, the numbers the fake counter's
known watts over the measured seconds make; a Grace module says its scope; a box without the
driver says why, never 0 J."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.fakes.by_hand import LIGHT, ByHand

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SITE = os.path.join(ROOT, "tests", "fakes", "pynvml_site")


def once_json(tmp_path, fake: str) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([SITE, ROOT]), GPUTOP_DL_FAKE_NVML=fake,
               GPUTOP_DL_HOME=str(tmp_path / "home"))
    r = subprocess.run([sys.executable, "-m", "gputop_dl", "--once", "--json"], env=env,
                       capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.fixture(scope="module")
def script():
    """A light training script started by hand, and the text its command line alone has."""
    scripts = ByHand()
    try:
        pids = scripts.start(LIGHT, 1)
        assert len(pids) == 1, "the script did not start"
        yield pids.pop(), scripts.dir
    finally:
        scripts.stop()


def test_once_gives_a_job_its_gpu_s_joules_from_the_counter(tmp_path, script):
    pid, marker = script
    doc = once_json(tmp_path, f"gpus=2;power_w=250;gpu0={marker}")
    assert doc["gpu_status"] == "ok"
    g0, g1 = doc["gpus"]
    for g in (g0, g1):  # --once's one interval, about a second: 250 W over it
        assert g["energy_source"] == "counter" and g["energy_scope"] == "gpu"
        assert 0.8 * 250 <= g["energy_j"] <= 250 * 3
    job = next(j for j in doc["jobs"] if j["pid"] == pid)
    assert job["energy_j"] == pytest.approx(g0["energy_j"], rel=1e-6)  # alone on GPU 0: all
    assert job["energy_w"] == pytest.approx(250.0, rel=0.02)
    assert job["energy_estimate"] is False and job["energy_source"] == "counter"
    others = [j for j in doc["jobs"] if j["pid"] != pid]
    assert all(j["energy_j"] is None and j["energy_note"] for j in others)  # not on a GPU


def test_once_on_a_grace_module_says_the_power_is_the_module_s(tmp_path, script):
    pid, marker = script
    doc = once_json(tmp_path, f"gpus=1;name=NVIDIA GH200 480GB;gpu0={marker}")
    g = doc["gpus"][0]
    assert g["energy_scope"] == "module" and g["energy_note"]
    job = next(j for j in doc["jobs"] if j["pid"] == pid)
    assert job["energy_j"] > 0 and job["energy_estimate"] is False
    assert job["energy_note"] and "module" in job["energy_note"]  # the job's joules say it too


def test_once_without_the_driver_is_unknown_with_the_reason_never_0_j(tmp_path, script):
    pid, _ = script
    doc = once_json(tmp_path, "driver=none")
    assert doc["gpu_status"] == "no-driver" and doc["gpus"] == []
    job = next(j for j in doc["jobs"] if j["pid"] == pid)
    for key in ("energy_j", "energy_w", "energy_per_step_j", "samples_per_joule"):
        assert job[key] is None
    assert "no-driver" in job["energy_note"]


def test_the_lent_gpu_check_runs_its_cost_and_tick_parts_on_the_fake(capsys):
    """benchmarks/energy_check.py is the one script for the day a GPU is lent: its cost and
    tick checks run on the fake NVML (the loaded run, 40 s and more, is run by hand:
    docs/energy.md)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "energy_check", os.path.join(ROOT, "benchmarks", "energy_check.py"))
    assert spec is not None and spec.loader is not None
    check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check)
    rig = check.Rig(0, fake=True)
    call = check.cost(rig)
    assert 0 < call < 1e-3  # the fake's call: microseconds
    assert check.tick(rig, call, ticks=10) is True  # a tiny share of the engine's tick
    said = capsys.readouterr().out
    assert said.count("tick:") == 2 and "cost:" in said
