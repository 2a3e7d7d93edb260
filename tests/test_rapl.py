"""Host CPU package energy from RAPL (collect/proc/rapl.py) on a fake powercap tree: packages summed,
sub-zones left out, a counter's wrap, no powercap, and root-only files read as another user."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile

import pytest

from gputop_dl.collect.proc.host import HostSampler
from gputop_dl.collect.proc.rapl import RaplReader
from gputop_dl.snapshot import Snapshot
from tests.fakes.users import Users, why_not


def _zone(root: str, zone: str, name: str, uj: int, wrap: int = 262_143_328_850) -> None:
    d = os.path.join(root, zone)
    os.makedirs(d, exist_ok=True)
    for f, v in (("name", name), ("energy_uj", str(uj)), ("max_energy_range_uj", str(wrap))):
        with open(os.path.join(d, f), "w") as fh:
            fh.write(v + "\n")


def _set(root: str, zone: str, uj: int) -> None:
    with open(os.path.join(root, zone, "energy_uj"), "w") as fh:
        fh.write(f"{uj}\n")


def test_packages_summed_subzones_left_out_and_a_wrap(tmp_path):
    root = str(tmp_path)
    _zone(root, "intel-rapl:0", "package-0", 1_000_000)
    _zone(root, "intel-rapl:0:0", "core", 5)  # a sub-zone: inside package-0's count
    _zone(root, "intel-rapl:1", "package-1", 999_000_000, wrap=999_999_999)
    r = RaplReader(root)
    first = r.read(10.0)
    assert first.joules is None and first.note is None  # no interval yet
    _set(root, "intel-rapl:0", 51_000_000)  # +50 J
    _set(root, "intel-rapl:1", 29_000_000)  # wrapped: +1 J to the range, +29 J after it
    got = r.read(12.0)
    assert got.joules == pytest.approx(50.0 + 30.0)
    assert got.power_w == pytest.approx(80.0 / 2.0)


def test_no_powercap_says_so(tmp_path):
    got = RaplReader(str(tmp_path / "none")).read(1.0)
    assert got.joules is None and got.note and "RAPL" in got.note


def test_the_host_sample_carries_it_and_keeps_to_the_schema(tmp_path):
    root = str(tmp_path)
    _zone(root, "intel-rapl:0", "package-0", 0)
    hs = HostSampler(rapl_root=root)
    _set(root, "intel-rapl:0", 7_000_000)
    h = hs.sample()
    assert h.cpu_energy_j == pytest.approx(7.0) and h.cpu_power_w is not None
    doc = Snapshot(time=0.0, gpu_status="no-driver", host=h).to_json()  # schema-checked
    assert doc["host"]["cpu_energy_j"] == pytest.approx(7.0)
    assert HostSampler(rapl_root=str(tmp_path / "none")).sample().cpu_energy_note


def test_root_only_energy_files_read_by_another_user_say_why():
    why = why_not()
    if why:
        pytest.skip(why)
    users = Users.make()
    root = tempfile.mkdtemp(prefix="rapl-", dir="/tmp")
    try:
        os.chmod(root, 0o755)
        _zone(root, "intel-rapl:0", "package-0", 1_000)
        for dirpath, dirs, files in os.walk(root):
            for d in dirs:
                os.chmod(os.path.join(dirpath, d), 0o755)
            for f in files:
                os.chmod(os.path.join(dirpath, f), 0o444)
        os.chmod(os.path.join(root, "intel-rapl:0", "energy_uj"), 0o400)  # as Linux >= 5.10
        code = ("import json, sys; from gputop_dl.collect.proc.rapl import RaplReader; "
                "r = RaplReader(sys.argv[1]); a = r.read(1.0); b = r.read(2.0); "
                "print(json.dumps([b.joules, b.note]))")
        out = users.run("alice", [sys.executable, "-c", code, root])
        assert out.returncode == 0, out.stderr
        joules, note = json.loads(out.stdout.strip().splitlines()[-1])
        assert joules is None and "root" in note
        as_root = RaplReader(root)  # root reads it: the file itself is fine
        as_root.read(1.0)
        assert as_root.read(2.0).note is None
    finally:
        users.close()
        shutil.rmtree(root)


def test_serve_and_once_show_the_host_cpu_energy():
    from rich.console import Console

    from gputop_dl.present.once import print_once
    from gputop_dl.present.prometheus import SnapshotCollector
    from gputop_dl.snapshot import HostSample
    from tests.test_serve import one, render

    h = HostSample(cpus=2, cpu_energy_j=1234.0, cpu_power_w=88.0)
    c = SnapshotCollector(hostname="n")
    c.feed(Snapshot(time=1.0, gpu_status="no-driver", host=h))
    m = render(c)
    assert one(m, "gputop_dl_host_cpu_energy_joules_total") == 1234.0
    assert one(m, "gputop_dl_host_cpu_power_watts") == 88.0
    c.feed(Snapshot(time=1.0, gpu_status="no-driver", host=HostSample(cpus=2)))
    assert "gputop_dl_host_cpu_energy_joules_total" not in render(c)  # unknown: no sample
    out = Console(width=300, record=True)
    print_once(Snapshot(time=1.0, gpu_status="no-driver", host=h), out)
    assert "88 W" in out.export_text()
