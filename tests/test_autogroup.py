"""Autogroups (collect/proc/autogroup.py): the kernel's CPU group per session, read from /proc,
and the outside-load fix that follows from it: a process in another session than the job's is
lowered by its session's nice value, not by its own nice value or class."""

import os
import subprocess
from dataclasses import replace

import pytest

from gputop_dl.analyse.live import outside_load
from gputop_dl.collect.proc.autogroup import (ENABLED, autogroup_of, in_root_cpu_group,
                                              parse_autogroup)
from gputop_dl.collect.proc.procfs import read_proc
from gputop_dl.snapshot import ProcLoad

LOOP = ProcLoad(pid=4242, cores=1.0, user="bob", command="python3 -c 'while True: pass'",
                nice=19, policy="other", autogroup="/autogroup-9", autogroup_nice=0)


def test_parse_and_the_root_cpu_group(tmp_path):
    assert parse_autogroup(b"/autogroup-516 nice 19\n") == ("/autogroup-516", 19)
    assert parse_autogroup(b"") is None and parse_autogroup(b"/autogroup-1 nice x") is None
    assert in_root_cpu_group(b"3:cpuset:/\n1:cpu,cpuacct:/\n0::/\n")
    assert not in_root_cpu_group(b"1:cpu,cpuacct:/docker/abc\n")
    assert in_root_cpu_group(b"2:cpuacct:/x\n1:cpu:/\n")  # cpuacct is not cpu
    (tmp_path / "user.slice").mkdir()
    (tmp_path / "user.slice" / "cgroup.controllers").write_text("memory pids\n")
    (tmp_path / "system.slice").mkdir()
    (tmp_path / "system.slice" / "cgroup.controllers").write_text("cpu memory pids\n")
    assert in_root_cpu_group(b"0::/user.slice\n", str(tmp_path))  # v2 without the cpu controller
    assert not in_root_cpu_group(b"0::/system.slice\n", str(tmp_path))


def test_a_consumer_in_another_session_gets_its_sessions_nice_as_the_fix():
    other = outside_load.fixes((LOOP,), 2, groups={"/autogroup-3"})
    assert "echo 19 > /proc/4242/autogroup" in other[0] and "chrt" not in other[0]
    same = outside_load.fixes((LOOP,), 2, groups={"/autogroup-9"})
    assert "chrt -a --idle -p 0 4242" in same[0] and "autogroup" not in same[0]
    unknown = outside_load.fixes((LOOP,), 2)  # the jobs' sessions not read: both, said which
    assert "echo 19 > /proc/4242/autogroup" in unknown[0] and "chrt -a --idle -p 0 4242" in unknown[0]
    off = outside_load.fixes((replace(LOOP, autogroup=None),), 2, groups={"/autogroup-3"})
    assert "chrt -a --idle -p 0 4242" in off[0]  # autogroups off: its class is the lever
    assert "session nice 19" in outside_load.named((replace(LOOP, autogroup_nice=19),))


def _autogroups_on() -> str | None:
    try:
        on = read_proc(ENABLED).strip() == b"1"
    except OSError:
        return "no /proc/sys/kernel/sched_autogroup_enabled (a kernel without autogroups)"
    return None if on else "autogroups are off here (kernel.sched_autogroup_enabled = 0)"


def _new_session() -> subprocess.Popen:
    """A `sleep` in a session of its own, in the root CPU cgroup: moved there where this
    process sits in a CPU cgroup of its own (a CI runner's), where autogroups do not apply."""
    p = subprocess.Popen(["setsid", "sleep", "30"])
    while read_proc(f"/proc/{p.pid}/comm") != b"sleep\n":  # until setsid has run
        os.sched_yield()
    if autogroup_of(p.pid) is None:
        for procs in ("/sys/fs/cgroup/cpu/cgroup.procs", "/sys/fs/cgroup/cgroup.procs"):
            try:
                with open(procs, "w") as f:
                    f.write(str(p.pid))
                break
            except OSError:
                continue
    return p


def test_a_new_session_is_another_autogroup_and_its_nice_is_read():
    why = _autogroups_on()
    if why:
        pytest.skip(why)
    a, b = _new_session(), _new_session()
    try:
        ours, theirs = autogroup_of(a.pid), autogroup_of(b.pid)
        if ours is None or theirs is None:
            pytest.skip("the test's processes are in a CPU cgroup of their own and could not "
                        "be moved to the root one (no write access): autogroups do not apply")
        assert theirs[0] != ours[0] and theirs[1] == 0
        with open(f"/proc/{b.pid}/autogroup", "w") as f:
            f.write("19")
        assert autogroup_of(b.pid) == (theirs[0], 19)
        assert autogroup_of(a.pid) == ours  # the other session's nice is its own
    finally:
        for p in (a, b):
            p.kill()
            p.wait()
