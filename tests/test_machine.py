"""`gputop-dl machine` and `plan`: the profile's parts on fake /sys, /proc and NVML trees, the
fit logic, the store, the faults (one line each, the rest produced) and the two commands."""

from __future__ import annotations

import errno
import json
import os
import socket
import subprocess
import sys

import pytest

from gputop_dl.cli import main
from gputop_dl.collect.boxprofile import SCHEMA, cpus, gpus, links, memory, storage
from gputop_dl.collect.nvml.gpus import Nvml
from gputop_dl.record.store import Store
from gputop_dl.sched.fit import JobDemand, capacities, plan_fit
from tests.fakes.nvml import FakeProcess, FakePynvml
from tests.schema_check import check, problems

ROOT = os.path.join(os.path.dirname(__file__), "..")
TRIO = os.path.join(ROOT, "workloads", "mobilenet_trio.toml")


def put(root, rel, text):
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)


@pytest.fixture
def box(tmp_path):
    """A fake 2-socket box: 8 threads on 4 cores, two NUMA nodes, cgroup v2 without quota."""
    sysr, proc, cg = tmp_path / "sys", tmp_path / "proc", tmp_path / "cg"
    put(sysr, "devices/system/cpu/online", "0-7\n")
    for c in range(8):
        put(sysr, f"devices/system/cpu/cpu{c}/topology/physical_package_id", str(c // 4))
        put(sysr, f"devices/system/cpu/cpu{c}/topology/core_id", str(c % 2))
    for n in (0, 1):
        put(sysr, f"devices/system/node/node{n}/cpulist", f"{4 * n}-{4 * n + 3}\n")
        put(sysr, f"devices/system/node/node{n}/meminfo",
            f"Node {n} MemTotal:       16384000 kB\nNode {n} MemFree: 1 kB\n")
    put(proc, "cpuinfo", "processor\t: 0\nmodel name\t: Fake CPU 9000\n")
    put(proc, "meminfo", "MemTotal:       32768000 kB\nMemAvailable:   20000000 kB\n")
    put(cg, "cpu.max", "max 100000\n")
    return sysr, proc, cg


def test_cpus_from_a_fake_tree(box):
    sysr, proc, cg = box
    c = cpus.read_cpus(str(proc), str(sysr), str(cg), affinity=lambda: set(range(8)))
    assert (c["model"], c["threads"], c["cores"]) == ("Fake CPU 9000", 8, 4)
    assert [(n["node"], n["cpus"], n["mem_total"]) for n in c["numa"]] == [
        (0, "0-3", 16384000 * 1024), (1, "4-7", 16384000 * 1024)]
    assert c["quota_cpus"] is None and c["usable_cpus"] == 8 and c["notes"] == []


def test_cgroup_quota_v2_and_v1_limit_the_usable_cores(box, tmp_path):
    sysr, proc, cg = box
    (cg / "cpu.max").write_text("150000 100000\n")
    c = cpus.read_cpus(str(proc), str(sysr), str(cg), affinity=lambda: set(range(8)))
    assert c["usable_cpus"] == 1.5 and c["quota_cpus"] == 1.5
    assert len(c["notes"]) == 1 and "cgroup CPU quota allows 1.5 CPUs" in c["notes"][0]
    v1 = tmp_path / "v1"
    put(v1, "cpu/cpu.cfs_quota_us", "200000\n")
    put(v1, "cpu/cpu.cfs_period_us", "100000\n")
    assert cpus.cgroup_quota(str(v1))[0] == 2.0
    put(v1, "cpu/cpu.cfs_quota_us", "-1\n")
    assert cpus.cgroup_quota(str(v1)) == (None, None)


def test_memory_from_meminfo_and_a_measured_copy(box):
    _, proc, _ = box
    m = memory.read_memory(str(proc), [{"node": 0, "mem_total": 5}])
    assert (m["total"], m["available"], m["numa"]) == (32768000 * 1024, 20000000 * 1024,
                                                        [{"node": 0, "total": 5}])
    cp = memory.measure_copy(0.05, 2, mib=4)
    assert cp["single_bps"] > 1e8 and cp["all_bps"] > 1e8 and cp["procs"] == 2 and cp["note"] is None


def test_storage_measures_a_test_file_and_removes_it(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    out, notes = storage.profile_paths([str(data), str(tmp_path / "missing")], seconds=0.05,
                                       file_size=1 << 20)
    assert notes == [f"--data {tmp_path / 'missing'}: does not exist"]
    (s,) = out
    assert s["test_file"] and s["seq_bps"] > 0 and s["rand_iops"] > 0 and s["file_bytes"] == 1 << 20
    assert s["fstype"] and s["mount"]
    assert os.listdir(data) == []  # the test file is gone


def test_storage_reads_an_existing_file_where_the_folder_takes_no_writes(tmp_path, monkeypatch):
    (tmp_path / "big.bin").write_bytes(os.urandom(1 << 20))
    monkeypatch.setattr(storage, "_write_test_file", lambda *a: None)
    (s,), _ = storage.profile_paths([str(tmp_path)], seconds=0.05, file_size=1 << 20)
    assert s["file"] == str(tmp_path / "big.bin") and not s["test_file"] and s["seq_bps"] > 0


def test_unreadable_path_is_one_line(tmp_path, monkeypatch):
    real = os.access
    monkeypatch.setattr(storage.os, "access", lambda p, m: False if p == str(tmp_path) else real(p, m))
    out, notes = storage.profile_paths([str(tmp_path)], seconds=0.05, file_size=1 << 20)
    assert out == [] and notes == [f"--data {tmp_path}: not readable by this user"]


def test_refused_o_direct_reads_through_the_cache_and_says_so(tmp_path, monkeypatch):
    f = tmp_path / "f.bin"
    f.write_bytes(os.urandom(1 << 20))
    real = os.open

    def no_direct(path, flags, *a):
        if flags & getattr(os, "O_DIRECT", 0):
            raise OSError(errno.EINVAL, "Invalid argument")
        return real(path, flags, *a)

    monkeypatch.setattr(storage.os, "open", no_direct)
    r = storage.read_rates(str(f), 0.05)
    assert r["page_cache_bypassed"] is False and r["seq_bps"] > 0
    assert "refuses O_DIRECT" in r["note"]


def test_tmpfs_is_memory_not_a_disk(tmp_path):
    dev = os.stat(tmp_path).st_dev
    proc = tmp_path / "proc"
    put(proc, "self/mountinfo", f"30 1 {os.major(dev)}:{os.minor(dev)} / {tmp_path} rw - tmpfs tmpfs rw\n")
    (s,), _ = storage.profile_paths([str(tmp_path)], seconds=0.05, file_size=1 << 20, proc=str(proc))
    assert s["fstype"] == "tmpfs" and s["page_cache_bypassed"] is False
    assert "memory rates, not a disk's" in s["note"]


def test_gpus_from_fake_nvml_busy_and_peak():
    fake = FakePynvml(gpus=2)
    fake.gpus[1].processes = [FakeProcess(pid=4242, used_memory=1 << 30)]
    fake.gpus[0].link_gen, fake.gpus[0].link_width = 4, 8  # trained down
    nv = Nvml(module=fake)
    try:
        gs, note = gpus.read_gpus(nv)
    finally:
        nv.close()
    assert note is None and [g["index"] for g in gs] == [0, 1]
    assert gs[0]["link_peak_bps"] == pytest.approx(1.969e9 * 8)
    assert gs[0]["link_peak_max_bps"] == pytest.approx(3.938e9 * 16)
    assert gs[1]["busy_pids"] == [4242] and gs[0]["busy_pids"] == []
    assert gs[0]["numa_node"] == 0


def test_no_driver_is_one_line():
    nv = Nvml(module=FakePynvml(init_error=FakePynvml.NVML_ERROR_DRIVER_NOT_LOADED))
    gs, note = gpus.read_gpus(nv)
    assert gs == [] and note.lower().startswith("no nvidia gpu") and "\n" not in note


def test_links_refuse_busy_gpus_and_read_the_worker(tmp_path):
    worker = tmp_path / "w.py"
    worker.write_text("import json, sys\na = sys.argv[1:]\ng = int(a[a.index('--gpu') + 1])\n"
                      "print(json.dumps({'gpu': g, 'h2d_pinned_bps': 2.4e10, 'cpus': "
                      "a[a.index('--cpus') + 1] if '--cpus' in a else None}))\n")
    gs = [{"index": 0, "busy_pids": [], "cpu_affinity": "0-3", "numa_node": 0, "copies": []},
          {"index": 1, "busy_pids": [77], "cpu_affinity": "4-7", "numa_node": 1, "copies": []}]
    numa = [{"node": 0, "cpus": "0-3"}, {"node": 1, "cpus": "4-7"}]
    notes = links.measure_links(gs, numa, quick=False, worker=[sys.executable, str(worker)])
    assert notes == ["GPU 1: not measured: jobs are using it (PID 77)"]
    assert [(c["from"], c["cpus"], c["h2d_pinned_bps"]) for c in gs[0]["copies"]] == [
        ("near", "0-3", 2.4e10), ("far", "4-7", 2.4e10)]
    assert gs[1]["copies"] == []
    assert links.measure_links(gs, numa, quick=True) == ["GPU copy rates not measured (--quick)"]
    bad = links.measure_links([dict(gs[0], copies=[])], [], quick=False,
                              worker=[sys.executable, "-c", "import sys; sys.exit('no CUDA here')"])
    assert bad == ["GPU 0: copy rates (near CPUs) failed: no CUDA here"]


FULL_WORKER = """\
import json, sys
a = sys.argv[1:]
g = int(a[a.index('--gpu') + 1])
if g == 2:
    print(json.dumps({'gpu': g, 'error': 'RuntimeError: torch sees no CUDA device'}))
    sys.exit()
out = {'gpu': g, 'bytes': 1 << 28, 'repeats': 10, 'h2d_pinned_bps': 2.4e10,
       'd2h_pinned_bps': 2.3e10, 'h2d_pageable_bps': 1.1e10, 'd2h_pageable_bps': 1.0e10,
       'cpus': a[a.index('--cpus') + 1] if '--cpus' in a else None}
if '--peer' in a:
    out.update(peer=int(a[a.index('--peer') + 1]), d2d_peer_bps=3.0e11)
print(json.dumps(out))
"""


def test_a_full_profile_with_gpus_and_copies_is_valid_under_its_schema(tmp_path, monkeypatch):
    """Every part of a full (not --quick) profile, on fake NVML with three GPUs (one busy, one
    whose worker fails, one with a PCIe link NVML cannot read): the conftest wrapper checks
    what `profile_machine` returns; the checks below show the wrapper is not vacuous."""
    from gputop_dl import collect

    monkeypatch.setitem(collect.boxprofile.FULL, "mem_s", 0.05)
    monkeypatch.setitem(collect.boxprofile.FULL, "disk_s", 0.05)
    monkeypatch.setitem(collect.boxprofile.FULL, "file", 1 << 20)
    fake = FakePynvml(gpus=4)
    fake.gpus[1].processes = [FakeProcess(pid=4242)]
    fake.gpus[3].unsupported = {"link_gen", "link_width", "numa_node", "cpu_affinity"}
    (tmp_path / "w.py").write_text(FULL_WORKER)
    p = collect.boxprofile.profile_machine(
        [str(tmp_path)], nvml_factory=lambda: Nvml(module=fake),
        link_worker=[sys.executable, str(tmp_path / "w.py")])
    assert [len(g["copies"]) for g in p["gpus"]] == [1, 0, 1, 1]
    assert p["gpus"][0]["copies"][0]["peer"] == 2 and "error" in p["gpus"][2]["copies"][0]
    assert p["gpus"][3]["link_peak_bps"] is None and p["gpus"][3]["numa_node"] is None
    assert p["storage"][0]["file_bytes"] == 1 << 20
    check(json.loads(json.dumps(p)))  # as `machine --json` prints it
    for where, extra in ((p["gpus"][0], "clock"), (p["gpus"][0]["copies"][0], "h2d_bps"),
                         (p["storage"][0], "iops"), (p["memory"]["copy"], "rate"), (p["cpus"], "x")):
        where[extra] = 1
        (found,) = problems(p)
        assert f"'{extra}' was unexpected" in found
        del where[extra]
    p["gpus"][0]["mem_total"] = "80 GiB"
    assert problems(p)


def test_a_profile_without_nvidia_is_valid_and_says_why(tmp_path):
    from gputop_dl.collect.boxprofile import profile_machine

    nv = lambda: Nvml(module=FakePynvml(init_error=FakePynvml.NVML_ERROR_DRIVER_NOT_LOADED))  # noqa: E731
    p = profile_machine([str(tmp_path)], quick=True, nvml_factory=nv)
    assert p["gpus"] == [] and any(n.lower().startswith("no nvidia gpu") for n in p["notes"])
    assert p["quick"] and p["storage"][0]["seq_bps"] > 0 and p["memory"]["copy"]["single_bps"] > 0


# --- the fit --------------------------------------------------------------------------------
CAP = {"cores": (2.0, "usable CPUs"), "memory": (20e9, "available"), "disk_read": (1e9, "measured")}


def test_trio_on_two_cores_fits_one_and_the_cpu_binds():
    jobs = [JobDemand("bs32", {"cores": 1.05, "memory": 1.0e9}, "measured"),
            JobDemand("bs64", {"cores": 1.07, "memory": 1.3e9}, "measured"),
            JobDemand("bs128", {"cores": 1.05, "memory": 1.7e9}, "measured")]
    p = plan_fit(jobs, CAP)
    assert (p.fit, p.binding) == (1, "cores")
    cores = next(r for r in p.resources if r.key == "cores")
    assert cores.total == pytest.approx(3.17) and cores.fit == 1
    assert next(r for r in p.resources if r.key == "memory").fit == 3


def test_memory_or_disk_can_bind_and_unknown_never_does():
    jobs = [JobDemand(n, {"cores": 0.5, "memory": 8e9, "disk_read": 0.2e9}, "m") for n in "abc"]
    assert (plan_fit(jobs, CAP).fit, plan_fit(jobs, CAP).binding) == (2, "memory")
    jobs = [JobDemand(n, {"cores": 0.5, "disk_read": 0.45e9}, "m") for n in "abc"]
    assert (plan_fit(jobs, CAP).fit, plan_fit(jobs, CAP).binding) == (2, "disk_read")
    jobs = [JobDemand(n, {}, "unknown") for n in "ab"]
    p = plan_fit(jobs, CAP)
    assert (p.fit, p.binding) == (2, None) and all(r.fit is None for r in p.resources)


def test_capacities_from_a_profile():
    prof = {"cpus": {"usable_cpus": 1.5}, "memory": {"available": 10},
            "storage": [{"paths": ["/d"], "seq_bps": 5e8}],
            "gpus": [{"mem_total": 80, "link_peak_bps": 6.3e10,
                      "copies": [{"from": "near", "h2d_pinned_bps": 5.0e10}]}]}
    c = capacities(prof)
    assert c["cores"][0] == 1.5 and c["disk_read"] == (5e8, "measured, /d")
    assert c["pcie"][0] == 5.0e10 and "measured" in c["pcie"][1] and c["gpu_memory"][0] == 80


# --- the store and the commands ---------------------------------------------------------------
def test_store_keeps_profiles_and_an_old_database_reads_none(gdl_home):
    import sqlite3

    old = gdl_home / "old.db"
    db = sqlite3.connect(old)
    db.executescript("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);"
                     "INSERT INTO meta VALUES ('schema', '2');")
    db.commit()
    db.close()
    st = Store(str(old), readonly=True)
    assert st.latest_machine() is None
    st.close()
    st = Store(str(old))  # opened to write: the table is added
    st.save_machine({"schema": SCHEMA, "created": 1.0, "host": "a", "quick": True})
    st.save_machine({"schema": SCHEMA, "created": 2.0, "host": "b", "quick": False})
    assert st.latest_machine()["host"] == "b" and st.latest_machine("a")["created"] == 1.0
    st.close()


def fake_profile(cores: float) -> dict:
    return {"schema": SCHEMA, "created": 1e9, "host": socket.gethostname(), "quick": True,
            "took_s": 0.1, "cpus": {"usable_cpus": cores, "allowed_count": int(cores), "numa": []},
            "memory": {"available": 20 << 30, "copy": {}}, "storage": [], "gpus": [], "notes": []}


TWO_CORE_JOBS = """\
[defaults]
model = "synthetic"
threads = 1
num_workers = 1
[[workload]]
name = "a"
[[workload]]
name = "b"
[[workload]]
name = "c"
"""


def test_plan_uses_the_stored_profile(capsys, tmp_path):
    st = Store()
    st.save_machine(fake_profile(2.0))
    st.close()
    trio = tmp_path / "trio.toml"
    trio.write_text(TWO_CORE_JOBS)  # no gpus: the same jobs with or without CUDA
    assert main(["plan", str(trio), "--json"]) == 0
    out = check(json.loads(capsys.readouterr().out))
    assert (out["fit"], out["asked"], out["binding"]) == (1, 3, "cores")
    assert all(j["source"].startswith("estimate from the file") for j in out["jobs"])
    st = Store()
    st.save_machine(dict(fake_profile(16.0), created=2e9))
    st.close()
    assert main(["plan", str(trio)]) == 0
    assert "all 3 jobs fit at once" in capsys.readouterr().out
    st = Store()
    st.save_machine(dict(fake_profile(1.0), created=3e9))
    st.close()
    assert main(["plan", str(trio)]) == 0
    assert "0 of 3 jobs at solo speed (one alone needs more" in capsys.readouterr().out


def test_plan_bad_file_is_exit_2_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text("[[workload]]\nname = 'a'\nbatch_size = 'x'\n")
    assert main(["plan", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and str(bad) in err and "batch_size" in err
    assert main(["plan", str(tmp_path / "none.toml")]) == 2


def test_show_without_a_profile_is_exit_2(capsys):
    assert main(["machine", "--show"]) == 2
    assert "no stored machine profile" in capsys.readouterr().err


def test_machine_quick_json_cli_stores_and_shows(tmp_path, gdl_home):
    env = dict(os.environ, PYTHONPATH=os.path.abspath(ROOT), GPUTOP_DL_HOME=str(gdl_home))
    run = [sys.executable, "-m", "gputop_dl", "machine"]
    r = subprocess.run([*run, "--quick", "--json", "--data", str(tmp_path), "--data",
                        str(tmp_path / "nope"), "--out", str(tmp_path / "m.md")],
                       capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr
    p = check(json.loads(r.stdout))
    assert p["schema"] == SCHEMA and p["quick"] and p["cpus"]["threads"] >= 1
    assert p["memory"]["copy"]["single_bps"] > 0 and p["storage"][0]["seq_bps"] > 0
    assert f"--data {tmp_path / 'nope'}: does not exist" in p["notes"]
    assert "## Storage (128 KiB reads)" in (tmp_path / "m.md").read_text()
    r2 = subprocess.run([*run, "--show", "--json"], capture_output=True, text=True, env=env,
                        cwd=tmp_path, timeout=60)
    assert r2.returncode == 0 and json.loads(r2.stdout) == p
    r3 = subprocess.run([*run, "--show"], capture_output=True, text=True, env=env, cwd=tmp_path,
                        timeout=60)
    assert "Storage (128 KiB reads)" in r3.stdout and "memory copy, 1 process" in r3.stdout


def test_plan_trio_cli_measures_a_quick_profile(tmp_path, gdl_home):
    env = dict(os.environ, PYTHONPATH=os.path.abspath(ROOT), GPUTOP_DL_HOME=str(gdl_home))
    r = subprocess.run([sys.executable, "-m", "gputop_dl", "plan", os.path.abspath(TRIO), "--json"],
                       capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "measuring a quick one" in r.stderr
    plan = check(json.loads(r.stdout))
    assert plan["profile"] == "a quick machine profile measured now" and plan["asked"] == 3
    text = "\n".join(plan["lines"])
    # the estimate (no cached baseline in a new store): a thread and its loader workers, each
    # a core: on this 2-core box, 1 of 3 and the cores bind; a larger box may fit them all
    assert "estimate from the file" in text
    assert ("the cores run out first" in text) != ("all 3 jobs fit at once" in text)
    assert (plan["binding"] == "cores") == ("the cores run out first" in text)
    # the stored quick profile, as `machine --show --json` prints it, is valid too
    r2 = subprocess.run([sys.executable, "-m", "gputop_dl", "machine", "--show", "--json"],
                        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert r2.returncode == 0, r2.stderr
    assert check(json.loads(r2.stdout))["quick"] is True


def test_launch_warns_in_one_line_when_more_jobs_than_fit(tmp_path):
    from gputop_dl.config import load_session
    from gputop_dl.runner.machine import launch_fit_warning

    f = tmp_path / "trio.toml"
    f.write_text(TWO_CORE_JOBS)
    spec = load_session(str(f), gpu_count=0)
    nv = Nvml(module=FakePynvml(gpus=0))
    assert launch_fit_warning(spec, nv) is None  # no stored profile: nothing said
    st = Store()
    st.save_machine(fake_profile(2.0))
    st.close()
    line = launch_fit_warning(spec, nv)
    assert line == (f"warning: 3 jobs at once, but 1 fit at solo speed on this box (the cores "
                    f"run out first; `gputop-dl plan {f}`)")
