"""The spin-share model of a spinning intra-op pool: native stacks read into kinds, and its
arithmetic (collect/pyspy/gomp_spin.py, analyse/live/pool_progress.py).

The fixtures are real `py-spy record --native --threads --idle --format raw` output (excerpts:
the most frequent stacks of each kind, counts as recorded) of tests/external/mt_examples.py
with torch's bundled libgomp, two intra-op threads and one loader worker: an mnist copy beside
another, and a dcgan copy alone.
"""

from __future__ import annotations

import os
import sys
from collections import Counter

import pytest

from gputop_dl.analyse.live.pool_progress import (MAX_SLOWDOWN, MIN_SAMPLES, progress_slowdown,
                                             spin_share, useful_share)
from gputop_dl.collect.pyspy.gomp_spin import SpinSample, main_thread_kinds, native_kind, record_spin
from gputop_dl.collect.pyspy.trace import parse_raw

HERE = os.path.join(os.path.dirname(__file__), "fakes", "pyspy_native")


def fixture(name: str) -> Counter:
    with open(os.path.join(HERE, name + ".raw"), encoding="utf-8") as f:
        return parse_raw(f.read())


@pytest.mark.parametrize("name, pid, want", [
    ("mnist_pair_31665", 31665, {"work": 30, "runtime": 29, "idle": 2}),
    ("dcgan_alone_30139", 30139, {"work": 36, "runtime": 12, "idle": 3}),
])
def test_real_native_stacks_counted_by_kind_main_thread_only(name, pid, want):
    stacks = fixture(name)
    assert dict(main_thread_kinds(stacks, pid)) == want
    # the loader's queue-feeder thread (hundreds of samples) is not the main thread's
    assert sum(stacks.values()) > sum(want.values()) + 200


@pytest.mark.parametrize("leaf, want", [
    # libgomp's hidden functions (a stripped wheel): addresses in the library
    (["GOMP_parallel (libgomp.so.1)", "0x7fef41a1c19a (libgomp.so.1)",
      "0x7fef41a1de8e (libgomp.so.1)"], "runtime"),
    (["jit_uni_reorder_t::execute (libtorch_cpu.so)", "0x7fef41a1ca9d (libgomp.so.1)"], "runtime"),
    (["dnnl::impl::parallel (libtorch_cpu.so)", "omp_get_num_threads (libgomp.so.1)"], "runtime"),
    (["__kmp_launch_thread (libiomp5.so)", "__kmp_wait_template (libiomp5.so)"], "runtime"),
    # libc called from the runtime: its futex sleep (or an allocation in the team's start)
    (["GOMP_parallel (libgomp.so.1)", "0x7fef41a1c19a (libgomp.so.1)", "malloc (libc.so.6)",
      "0x7fef42cb326c (libc.so.6)"], "runtime"),
    # libc called from the interpreter: an idle wait (the loader's pipe)
    (["Connection._recv (multiprocessing/connection.py:395)", "os_read (libpython3.11.so.1.0)",
      "read (libc.so.6)"], "idle"),
    # the operators' own code, and the interpreter's
    (["GOMP_parallel (libgomp.so.1)", "at::parallel_for (libtorch_cpu.so)"], "work"),
    (["0x7f0adb44524a (libc.so.6)", "gc_collect_main (libpython3.11.so.1.0)"], "work"),
    (["dnnl::impl::parallel (libtorch_cpu.so)", "free (libc.so.6)"], "work"),
    ([], "idle"),
])
def test_native_kind(leaf, want):
    assert native_kind(["<module> (train.py:10)", *leaf] if leaf else []) == want


def sample(work: int, runtime: int, idle: int = 0, ran: float | None = 1.0,
           waited: float | None = 1.0) -> SpinSample:
    return SpinSample(work, runtime, idle, ran, waited, wall_s=3.0)


def test_useful_share_is_on_cpu_share_times_work_share():
    # on a CPU half of its runnable time, in the operators' code 40 of 100 samples
    s = sample(40, 55, 5, ran=1.0, waited=1.0)
    assert useful_share(s) == pytest.approx(0.5 * 0.4)
    assert progress_slowdown(s) == pytest.approx(5.0)
    assert spin_share(s) == 0.55


def test_pauses_are_in_neither_figure():
    # py-spy held the process stopped for part of the wall: only ran/waited count
    assert useful_share(sample(50, 50, ran=2.0, waited=0.0)) == pytest.approx(0.5)


def test_unknown_with_too_few_samples_or_no_schedstat():
    few = sample(MIN_SAMPLES - 11, 10)
    assert useful_share(few) is None and spin_share(few) is None
    assert progress_slowdown(few) is None
    assert useful_share(sample(40, 40, ran=None)) is None
    assert useful_share(sample(40, 40, ran=0.0, waited=0.0)) is None


def test_slowdown_clipped():
    assert progress_slowdown(sample(0, 60)) == MAX_SLOWDOWN
    assert progress_slowdown(sample(100, 0, ran=1.0, waited=0.0)) == 1.0
    assert progress_slowdown(sample(1, 99, ran=1.0, waited=3.0)) == MAX_SLOWDOWN


def test_record_spin_reads_a_blocking_native_burst(tmp_path):
    """`record_spin` asks py-spy for native stacks, without `--nonblocking` (py-spy refuses
    native stacks then), and counts the main thread's samples of what it wrote."""
    args, fake = tmp_path / "args", tmp_path / "fake.py"
    fake.write_text("import shutil, sys\n"
                    "a = sys.argv[1:]\n"
                    f"open({str(args)!r}, 'w').write(' '.join(a))\n"
                    f"shutil.copy({os.path.join(HERE, 'mnist_pair_31665.raw')!r}, "
                    "a[a.index('-o') + 1])\n")
    exe = tmp_path / "fake-py-spy"
    exe.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{fake}" "$@"\n')
    exe.chmod(0o755)
    got, err = record_spin(os.getpid(), 1, 10, str(exe))
    assert err is None and got is not None
    assert (got.work, got.runtime, got.idle) == (30, 29, 2)
    assert got.ran_s is not None and got.waited_s is not None and got.wall_s > 0
    used = args.read_text().split()
    assert "--native" in used and "--threads" in used and "--nonblocking" not in used
