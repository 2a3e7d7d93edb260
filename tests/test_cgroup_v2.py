"""The CPU, memory and I/O cgroup readers on a cgroup v2 host: a faked /sys/fs/cgroup laid out as
systemd and Docker lay it out on a v2-only distribution, its files in the formats of the
kernel's cgroup-v2 documentation (Documentation/admin-guide/cgroup-v2.rst)."""

from __future__ import annotations

import pytest

from gputop_dl.collect.proc.cgroup_io import CgroupIO, parse_io_stat, parse_pressure
from gputop_dl.collect.proc.host import cgroup_cpu_limit, read_cgroup_throttled_usec
from gputop_dl.collect.proc.memory import MemoryReader, PAGE
from gputop_dl.collect.proc.procfs import read_proc
from gputop_dl.collect.proc.cgroup_cpu import CgroupThrottle, quota_cgroup

DOCKER = "/system.slice/docker-3f0a9c1e2b7d4e55aa.scope"
SESSION = "/user.slice/user-1001.slice/session-3.scope"
CONTROLLERS = "cpuset cpu io memory hugetlb pids rdma misc\n"


def group(root, path, *, cpu_max="max 100000", throttled=0, rbytes=0, wbytes=0, io_some=0.0,
          mem_max="max", refaults=0, oom_kill=0, high=0):
    d = root.joinpath(*[p for p in path.split("/") if p])
    d.mkdir(parents=True, exist_ok=True)
    files = {
        "cgroup.controllers": CONTROLLERS,
        "cgroup.type": "domain\n",
        "cpu.max": f"{cpu_max}\n",
        "cpu.weight": "100\n",
        "cpu.stat": (f"usage_usec 87316350\nuser_usec 80123000\nsystem_usec 7193350\n"
                     f"core_sched.force_idle_usec 0\nnr_periods 812\nnr_throttled 97\n"
                     f"throttled_usec {throttled}\nnr_bursts 0\nburst_usec 0\n"),
        "cpu.pressure": ("some avg10=41.20 avg60=30.02 avg300=10.00 total=91234567\n"
                         "full avg10=12.00 avg60=9.50 avg300=3.10 total=41234567\n"),
        "memory.max": f"{mem_max}\n",
        "memory.high": "max\n",
        "memory.current": "1358954496\n",
        "memory.events": f"low 0\nhigh {high}\nmax 0\noom 0\noom_kill {oom_kill}\noom_group_kill 0\n",
        "memory.stat": ("anon 1207959552\nfile 150994944\nkernel 8388608\nshmem 0\n"
                        "file_mapped 4096\nactive_file 75497472\ninactive_file 75497472\n"
                        "workingset_refault_anon 0\n"
                        f"workingset_refault_file {refaults}\nworkingset_activate_file 0\n"
                        "pgfault 1234567\npgmajfault 12\n"),
        "memory.pressure": ("some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
                            "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"),
        "io.stat": (f"8:16 rbytes=1459200 wbytes=314773504 rios=192 wios=353 dbytes=0 dios=0\n"
                    f"8:0 rbytes={rbytes} wbytes={wbytes} rios=8950 wios=1252 dbytes=50331648 dios=3021\n"
                    f"253:0 rbytes={rbytes} wbytes={wbytes} rios=8950 wios=1252 dbytes=0 dios=0\n"),
        "io.pressure": (f"some avg10={io_some:.2f} avg60=20.00 avg300=5.00 total=7654321\n"
                        "full avg10=18.50 avg60=10.00 avg300=2.00 total=3654321\n"),
        "io.max": "",
    }
    for name, text in files.items():
        (d / name).write_text(text)
    return d


@pytest.fixture
def v2(tmp_path):
    """A v2 host: the root group, a user's session scope, and a Docker container with a CPU
    quota (2 cores) and a memory limit (8 GiB); PID 700 trains in the container, 800 in the
    session."""
    root = tmp_path / "sys" / "fs" / "cgroup"
    group(root, "/", throttled=0)
    group(root, "/system.slice")
    group(root, "/user.slice")
    group(root, "/user.slice/user-1001.slice")
    group(root, SESSION, rbytes=1000, io_some=3.0)
    group(root, DOCKER, cpu_max="200000 100000", throttled=1_000_000, rbytes=90430464,
          wbytes=299008000, mem_max=str(8 << 30), io_some=25.0)
    proc = tmp_path / "proc"
    for pid, path in ((700, DOCKER), (800, SESSION)):
        (proc / str(pid)).mkdir(parents=True)
        (proc / str(pid) / "cgroup").write_text(f"0::{path}\n")  # v2 only: one line
    return root, proc


def test_cpu_quota_and_throttling_from_the_jobs_v2_group(v2):
    root, proc = v2
    docker = str(root.joinpath(*DOCKER.strip("/").split("/")))
    assert quota_cgroup(700, str(proc), str(root)) == docker
    assert quota_cgroup(800, str(proc), str(root)) is None  # no quota up to the root
    t = CgroupThrottle(700, str(proc), str(root))
    t._files.read = read_proc  # the fake is a plain file: read it anew each time
    assert t.read(10.0) is None  # the first reading starts the delta
    group(root, DOCKER, cpu_max="200000 100000", throttled=1_500_000)
    assert t.read(12.0) == 0.25
    # gputop-dl inside that container: its /sys/fs/cgroup is the container's group
    assert cgroup_cpu_limit(docker) == 2.0
    assert read_cgroup_throttled_usec(docker) == 1_500_000
    assert cgroup_cpu_limit(str(root)) is None  # the host's root: no quota


def test_memory_limit_events_and_refaults_from_the_jobs_v2_group(v2):
    root, proc = v2
    r = MemoryReader(700, proc=str(proc), cgroup_root=str(root), v1_root=str(root / "memory"),
                     read=lambda p, *a: open(p, "rb").read())
    first = r.read(now=1.0)
    assert first.cgroup == DOCKER and first.limited is True
    group(root, DOCKER, cpu_max="200000 100000", mem_max=str(8 << 30), refaults=1000, high=3,
          oom_kill=1)
    m = r.read(now=3.0)
    assert m.refault_bps == pytest.approx(1000 * PAGE / 2.0)
    assert dict(m.events)["oom_kill"] == 1 and dict(m.events)["high"] == 3
    s = MemoryReader(800, proc=str(proc), cgroup_root=str(root), v1_root=str(root / "memory"),
                     read=lambda p, *a: open(p, "rb").read()).read(now=1.0)
    assert s.cgroup == SESSION and s.limited is False  # memory.max and memory.high "max"


def test_io_rates_and_pressure_from_the_jobs_v2_group(v2):
    root, proc = v2
    r = CgroupIO(700, str(proc), str(root))
    r._files.read = read_proc
    first = r.read(10.0)
    assert first.cgroup == DOCKER and first.read_bytes_per_s is None  # no interval yet
    assert first.pressure_some10 == 0.25 and first.pressure_full10 == 0.185
    group(root, DOCKER, cpu_max="200000 100000", rbytes=90430464 + 2 * 50_000_000,
          wbytes=299008000 + 2 * 1_000_000, io_some=60.0)
    got = r.read(12.0)
    # the disk's bytes (8:0) count, the device-mapper volume on it (253:0) not twice
    assert got.read_bytes_per_s == pytest.approx(50_000_000)
    assert got.write_bytes_per_s == pytest.approx(1_000_000)
    assert got.pressure_some10 == 0.6
    # cgroup v1 (no 0:: line, no io.stat): nothing, not zeros
    (proc / "700" / "cgroup").write_text("12:blkio:/docker/3f0a\n4:memory:/docker/3f0a\n")
    assert CgroupIO(700, str(proc), str(root)).read(1.0) is None


def test_io_stat_and_pressure_parsers():
    assert parse_io_stat(b"8:0 rbytes=10 wbytes=20 rios=1 wios=2 dbytes=0 dios=0\n"
                         b"259:0 rbytes=5 wbytes=0 rios=1 wios=0 dbytes=0 dios=0\n"
                         b"9:0 rbytes=15 wbytes=20 rios=1 wios=2 dbytes=0 dios=0\n") == (15, 20)
    assert parse_io_stat(b"") == (0, 0)
    assert parse_pressure(b"some avg10=1.50 avg60=0 avg300=0 total=1\n") == (0.015, None)


def test_a_jobs_row_carries_its_v2_groups_io(v2):
    from gputop_dl.collect.proc.cgroup_io import CgroupIOReading
    from gputop_dl.collect.proc.diskio import io_fields
    from gputop_dl.collect.proc.procs import TreeSample

    ts = TreeSample(pids=(700,), cpu_cores=1.0, rss=0, threads=1,
                    cgroup_io=CgroupIOReading(DOCKER, 5e7, 1e6, 0.6, 0.2))
    f = io_fields(ts)
    assert (f["io_cgroup"], f["io_cgroup_read_bytes_per_s"], f["io_cgroup_pressure"]) == \
        (DOCKER, 50_000_000, 0.6)
    assert io_fields(None)["io_cgroup_read_bytes_per_s"] is None  # gone: unknown, not 0
