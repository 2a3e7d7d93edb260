"""The box's limited memory groups (collect/proc/memory_groups.py) on fake hierarchies, and the
host domain's refaults that take theirs off (analyse/live/memory_share.py): a job reading in the
host domain is not charged with the re-reads of a limited group it is not in."""

import dataclasses
import os
import subprocess
import sys
import time

import pytest

from gputop_dl.analyse.live.memory_share import (MIN_REFAULT_BPS, domains, host_refaults,
                                                 memory_shares)
from gputop_dl.collect.proc.host import HostSampler
from gputop_dl.collect.proc.memory import PAGE, MemoryReader
from gputop_dl.collect.proc import memory_groups
from gputop_dl.collect.proc.memory_groups import LimitedGroups, hierarchy, top_limited
from tests.test_memory import MB, host, job


def with_groups(h, groups):
    """A host sample with its reading of the limited groups."""
    return dataclasses.replace(h, memory_limited_refaults=groups)


def group(root, rel, *, v1, limit=None, refaults=0):
    """A cgroup folder with its limit (None: none) and refault counter."""
    d = root / rel
    d.mkdir(parents=True, exist_ok=True)
    if v1:
        (d / "memory.limit_in_bytes").write_text(limit or "9223372036854771712\n")
        (d / "memory.stat").write_text(f"cache 1\ntotal_workingset_refault_file {refaults}\n")
    else:
        (d / "memory.max").write_text(limit or "max\n")
        (d / "memory.high").write_text("max\n")
        (d / "memory.stat").write_text(f"anon 1\nworkingset_refault_file {refaults}\n")
    return d


@pytest.mark.parametrize("v1", [False, True])
def test_the_walk_finds_the_top_most_limited_groups_only(tmp_path, v1):
    root = tmp_path / "cg"
    group(root, "", v1=v1)
    group(root, "user.slice/u1/session.scope", v1=v1)
    group(root, "docker/a", v1=v1, limit="1073741824\n")
    group(root, "docker/a/inner", v1=v1, limit="1000\n")  # held by a limited group: not read
    group(root, "slurm/job7", v1=v1, limit="2147483648\n")
    found, whole = top_limited(str(root), v1)
    assert whole and found == [str(root / "docker/a"), str(root / "slurm/job7")]
    found, whole = top_limited(str(root), v1, max_dirs=2)
    assert not whole and len(found) <= 2


def test_the_hierarchy_is_v1_memorys_else_v2_with_the_memory_controller(tmp_path):
    v2, v1 = tmp_path / "cg", tmp_path / "cg" / "memory"
    v2.mkdir()
    assert hierarchy(str(v2), str(v1)) is None  # neither
    (v2 / "cgroup.controllers").write_text("cpu io memory pids\n")
    assert hierarchy(str(v2), str(v1)) == (str(v2), False)
    (v2 / "cgroup.controllers").write_text("cpu io\n")
    assert hierarchy(str(v2), str(v1)) is None
    v1.mkdir()
    (v1 / "memory.stat").write_text("cache 0\n")
    assert hierarchy(str(v2), str(v1)) == (str(v1), True)


@pytest.mark.parametrize("v1", [False, True])
def test_each_groups_rate_from_the_second_reading_and_groups_found_later(tmp_path, v1):
    base = tmp_path / "cg"
    root = base / "memory" if v1 else base
    group(root, "", v1=v1)
    if not v1:
        (root / "cgroup.controllers").write_text("memory\n")
    group(root, "box", v1=v1, limit="1000000\n", refaults=10)
    clock = [0.0]
    lg = LimitedGroups(cgroup_root=str(base), v1_root=str(base / "memory"), clock=lambda: clock[0])
    label = ("v1:" if v1 else "") + "/box"
    assert lg.read(now=1.0) == ()  # the first reading: no rate yet
    group(root, "box", v1=v1, limit="1000000\n", refaults=110)
    group(root, "late", v1=v1, limit="1000000\n", refaults=5)
    assert lg.read(now=3.0) == ((label, round(100 * PAGE / 2.0)),)  # "late" not looked for yet
    clock[0] = memory_groups.RESCAN_S
    group(root, "box", v1=v1, limit="1000000\n", refaults=110)
    assert dict(lg.read(now=4.0)) == {label: 0}  # "late" found: read, no rate yet
    group(root, "late", v1=v1, limit="1000000\n", refaults=15)
    assert dict(lg.read(now=5.0))[("v1:" if v1 else "") + "/late"] == 10 * PAGE


def test_no_memory_hierarchy_gives_none(tmp_path):
    lg = LimitedGroups(cgroup_root=str(tmp_path), v1_root=str(tmp_path / "memory"))
    assert lg.read(now=1.0) is None


# --- the host domain ----------------------------------------------------------------------
def test_a_host_domain_reader_is_not_charged_with_an_unjudged_limited_groups_re_reads():
    """The pair reads in the host domain; a thrashing group (other jobs, not judged here) makes
    the host's count 8 MB/s: the pair's domain re-reads nothing."""
    a = job("a", 1, 4 * MB, cg="v1:/", limited=False)
    b = job("b", 2, 4 * MB, cg="v1:/", limited=False)
    busy = host(refault=8 * MB)
    assert memory_shares([a, b], busy)["a"] == (1.0, True)  # without the groups' reading
    read = with_groups(busy, (("v1:/thrash", 8 * MB),))
    assert host_refaults([a, b], read) == 0.0
    assert memory_shares([a, b], read)["a"] == (0.0, True)
    # a limited group that holds a host-domain job: its re-reads may be that job's, kept
    c = job("c", 3, 4 * MB, cg="v1:/thrash/c", limited=False)
    assert host_refaults([a, b, c], read) == 8 * MB


def test_a_judged_limited_group_not_read_yet_is_taken_off_by_its_jobs_reading():
    a = job("a", 1, 4 * MB, cg="/box", limited=True, refault=6 * MB)
    c = job("c", 3, 1 * MB, cg="/user.slice", limited=False)
    h = with_groups(host(refault=9 * MB), ())  # the walk has not seen /box yet
    assert host_refaults([a, c], h) == 3 * MB
    h = with_groups(host(refault=9 * MB), (("/box", 7 * MB),))  # it has: its reading, not twice
    assert host_refaults([a, c], h) == 2 * MB
    d = domains([a, c], h)
    assert d["c"].refault_bps == 2 * MB and d["a"].refault_bps == 6 * MB
    assert host_refaults([a, c], None) is None


# --- on the box: a group that re-reads its own file ---------------------------------------
THRASHER = r"""
import os, sys, time
path, size, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
block = b"x" * (1 << 20)
with open(path, "wb") as f:  # written here: its pages charged to this group
    for _ in range(size):
        f.write(block)
end = time.monotonic() + seconds
while time.monotonic() < end:
    with open(path, "rb") as f:
        while f.read(1 << 20):
            pass
"""


def _v1_memory_group(name: str) -> str | None:
    """A new v1 memory group, or None where one cannot be made here."""
    root = "/sys/fs/cgroup/memory"
    if os.geteuid() != 0 or not os.path.exists(os.path.join(root, "memory.limit_in_bytes")):
        return None
    path = os.path.join(root, name)
    os.makedirs(path, exist_ok=True)
    return path


@pytest.mark.shares_box("reads counters only; another test's refaults only add groups")
def test_a_limited_group_that_thrashes_is_read_and_taken_off_the_host_domain(tmp_path):
    """Slurm's shape: the limit on a group, the process in an unlimited group below it."""
    cg = _v1_memory_group(f"gputop-dl-thrash-{os.getpid()}")
    if cg is None:
        pytest.skip("needs root and the cgroup v1 memory controller to make a limited group")
    task = os.path.join(cg, "task")
    p = None
    try:
        with open(os.path.join(cg, "memory.limit_in_bytes"), "w") as f:
            f.write(str(24 << 20))
        os.mkdir(task)
        script = tmp_path / "thrash.py"
        script.write_text(THRASHER)
        p = subprocess.Popen(
            ["sh", "-c", f'echo $$ > {task}/cgroup.procs && exec "{sys.executable}" "{script}" '
                         f'"{tmp_path / "data.bin"}" 48 30'])
        sampler = HostSampler()
        label = "v1:/" + os.path.basename(cg)
        moved_by = time.monotonic() + 10
        while f"{task[len('/sys/fs/cgroup/memory'):]}\n" not in open(f"/proc/{p.pid}/cgroup").read():
            assert p.poll() is None and time.monotonic() < moved_by, "the shell did not move in"
            time.sleep(0.01)  # until the shell has moved itself in
        reader = MemoryReader(p.pid)
        assert reader.read(time.monotonic()).domain == label  # the job's domain: the limit's
        deadline = time.monotonic() + 25
        while True:  # until a tick reads the group re-reading
            time.sleep(0.2)  # a tick's interval: refaults come in bursts of a read's pages
            s = sampler.sample()
            ours = dict(s.memory_limited_refaults or ()).get(label, 0)
            if ours >= MIN_REFAULT_BPS or time.monotonic() > deadline:
                break
        assert ours >= MIN_REFAULT_BPS, f"no refaults read in {label}: {s.memory_limited_refaults}"
        total = s.memory_refault_bytes_per_s or 0
        # the part is read after the whole, a few hundred microseconds later: within 10 %
        assert sum(r for _, r in s.memory_limited_refaults or ()) <= 1.1 * total + MIN_REFAULT_BPS
        reader = job("a", 1, 4 * MB, cg="v1:/", limited=False)
        assert host_refaults([reader], s) <= max(0, total - ours)
    finally:
        if p is not None:
            p.kill()
            p.wait()
        deadline = time.monotonic() + 10
        while os.path.exists(cg):  # the groups empty once their process is reaped
            try:
                if os.path.exists(task):
                    os.rmdir(task)
                os.rmdir(cg)
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
