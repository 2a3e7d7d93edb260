"""`gpus = N` in a launch: the pure placement (sched/placement.py) and open_spec on a fake NVML."""

from __future__ import annotations

from gputop_dl.collect.nvml.gpus import Nvml
from gputop_dl.runner import open_spec
from gputop_dl.sched.placement import GpuState, place_counts
from tests.fakes.nvml import GiB, FakeProcess, FakePynvml

FOUR = [GpuState(0, 10 * GiB), GpuState(1, 70 * GiB), GpuState(2, 40 * GiB), GpuState(3, 70 * GiB)]


def test_counts_go_to_gpus_without_jobs_then_most_free_memory_then_lowest_index():
    chosen, lines = place_counts([("a", 2, ()), ("b", 1, ())], FOUR)
    assert chosen == {"a": (1, 3), "b": (2,)}
    assert lines[0].startswith("a: gpus = 2 placed on GPUs 1, 3 (each without another job")
    assert "140.0 GiB free" in lines[0]


def test_explicit_gpus_count_as_taken_and_sharing_is_the_last_resort():
    chosen, lines = place_counts([("pinned", None, (1, 3)), ("a", 2, ()), ("b", 1, ())], FOUR)
    assert chosen["a"] == (0, 2)  # 1 and 3 hold the pinned job
    assert chosen["b"] == (1,)  # every GPU holds one job now: the most free memory, lowest index
    assert "shared with another job of this launch: GPU 1 (no free GPU left)" in lines[1]


def test_other_processes_and_lost_gpus_come_after_idle_ones():
    gpus = [GpuState(0, 70 * GiB, others=2), GpuState(1, 70 * GiB, lost=True), GpuState(2, 5 * GiB)]
    chosen, _ = place_counts([("a", 1, ()), ("b", 1, ()), ("c", 1, ())], gpus)
    assert chosen == {"a": (2,), "b": (0,), "c": (2,)}  # shared rather than the lost GPU


def test_a_launch_places_counts_on_the_real_readings(tmp_path, capsys):
    fake = FakePynvml(gpus=4)
    for g, used in zip(fake.gpus, (70, 5, 60, 5)):
        g.mem_used = used * GiB
    fake.gpus[1].processes = [FakeProcess(pid=999999, used_memory=1 * GiB)]  # someone else's
    path = tmp_path / "w.toml"
    path.write_text('[session]\nname = "p"\n[[workload]]\nname = "a"\ncommand = ["true"]\n'
                    'gpus = 2\n[[workload]]\nname = "b"\ncommand = ["true"]\ngpus = [3]\n')
    spec = open_spec(str(path), Nvml(module=fake))
    # GPU 1 has the most free memory but someone else's process: 0 and 2 come first
    assert {w.name: w.gpus for w in spec.workloads} == {"a": (0, 2), "b": (3,)}
    assert "a: gpus = 2 placed on GPUs 0, 2" in capsys.readouterr().err
    queue = open_spec(str(path), Nvml(module=fake), place=False)  # a queue places its own
    assert queue.workloads[0].gpus == () and queue.workloads[0].gpu_count == 2
