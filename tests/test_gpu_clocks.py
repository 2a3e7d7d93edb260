"""GPU clocks, PCIe link and NUMA findings in the live verdict:
analyse/live/gpu_clocks.py on fixed samples, through PassiveJudge, and collect/proc/affinity.py."""

from __future__ import annotations

from gputop_dl.analyse.live import gpu_clocks as C
from gputop_dl.analyse.live.passive import PassiveJudge
from gputop_dl.collect.proc.affinity import CpuAffinity, read_affinity
from gputop_dl.snapshot import GpuProcess, GpuSample, HostSample, JobSample
from gputop_dl.text.cpulist import mask_words_to_cpus

HOST = HostSample(cpus=64, cpu_busy=0.2, cpu_pressure_some10=0.0, load1=1.0)


def job(name: str, pid: int) -> JobSample:
    return JobSample(name=name, pid=pid, launched=False, pids=(pid, pid + 1), cpu_cores=0.5,
                     cpu_wait_fraction=0.0, stall_fraction=0.0, device="cuda:0")


def gpu(i: int = 0, **kw) -> GpuSample:
    base = dict(util=0.9, sm_clock_mhz=1410, sm_clock_max_mhz=1980, pcie_link_gen=5,
                pcie_link_gen_max=5, pcie_link_width=16, pcie_link_width_max=16,
                cpu_affinity="0-31", numa_node=0,
                throttle=(("power", 0.0), ("thermal", 0.0), ("low_util", 0.0)))
    base.update(kw)
    return GpuSample(index=i, name="H100", **base)  # type: ignore[arg-type]


def verdict(jobs, gprocs, gpus):
    judge = PassiveJudge(min_ticks=1)
    v, _ = judge.verdict(jobs, HOST, gprocs, gpus, 1.0)
    return v


def test_throttle_text_names_reasons_largest_first_and_folds_thermal():
    g = gpu(throttle=(("power", 0.34), ("thermal", 0.02), ("hw_thermal", 0.08),
                      ("low_util", 0.9), ("sync_boost", None)))
    assert C.throttle_text(g) == "throttled: power 34%, thermal 8%"
    assert C.throttle_text(gpu()) == "" and C.throttle_text(gpu(throttle=())) == ""


def test_throttled_gpu_of_two_jobs_is_a_finding_naming_both():
    g = gpu(throttle=(("power", 0.34), ("thermal", 0.0)))
    procs = (GpuProcess(0, 100, sm_util=0.5), GpuProcess(0, 200, sm_util=0.4))
    v = verdict([job("a", 100), job("b", 200)], procs, (g, gpu(1, throttle=(("power", 0.9),))))
    lines = [x for x in v.evidence_lines if x.startswith("GPU ")]
    assert lines == ["GPU 0 (a, b): clocks held down by power 34% of the last interval (NVML "
                     "counters); SM clock 1410 of 1980 MHz; the jobs on it share its power and "
                     "heat budget"]  # GPU 1 is used by no job: not named
    assert any("power limit" in r for r in v.recommendations)
    assert v.evidence["gpu_findings"][0] == {"kind": "throttle", "gpu": 0, "jobs": ["a", "b"],
                                             "throttle": {"power": 0.34}}


def test_small_or_unknown_throttle_is_no_finding():
    g = gpu(throttle=(("power", 0.03), ("thermal", None)))
    v = verdict([job("a", 100)], (GpuProcess(0, 100, sm_util=0.5),), (g,))
    assert not any(x.startswith("GPU 0") for x in v.evidence_lines)
    assert "gpu_findings" not in v.evidence


def test_link_below_max_only_while_busy():
    slow = gpu(pcie_link_gen=3, pcie_link_width=8)
    procs = (GpuProcess(0, 100, sm_util=0.5),)
    v = verdict([job("a", 100)], procs, (slow,))
    line = next(x for x in v.evidence_lines if "PCIe" in x)
    assert "Gen3 x8 while 90% busy, below its Gen5 x16 (about 8× less" in line
    assert any("lspci" in r for r in v.recommendations)
    idle = gpu(pcie_link_gen=1, util=0.1)  # idle GPUs drop to Gen1: normal
    v = verdict([job("a", 100)], procs, (idle,))
    assert not any("PCIe" in x for x in v.evidence_lines)
    assert C.pcie_text(slow) == "Gen3 x8 (max Gen5 x16)"
    assert C.pcie_text(gpu(pcie_rx_bytes_per_s=1_200_000_000, pcie_tx_bytes_per_s=30_000_000),
                       compact=True) == "G5x16 ↓1.2 ↑0.03"


def test_job_on_the_far_numa_node_gets_a_finding_and_a_taskset_line():
    g = gpu(2, cpu_affinity="0-31", numa_node=0)
    procs = (GpuProcess(2, 100, sm_util=0.5, cpus_allowed="32-63"),)
    v = verdict([job("a", 100)], procs, (g,))
    assert ("a feeds GPU 2 from CPUs that are not near it: pid 100 may run on CPUs 32-63 only "
            "(its NUMA node 0: CPUs 0-31)") in v.evidence_lines
    fix = next(r for r in v.recommendations if "taskset" in r)
    assert "`taskset -a -cp 0-31 100`" in fix and "`numactl --cpunodebind=0 --membind=0`" in fix


def test_unpinned_job_on_two_nodes_is_partly_far_and_node_unknown_uses_physcpubind():
    g = gpu(0, cpu_affinity="0-31", numa_node=None)
    procs = (GpuProcess(0, 100, sm_util=0.5, cpus_allowed="0-63"),)
    v = verdict([job("a", 100)], procs, (g,))
    line = next(x for x in v.evidence_lines if "feeds GPU 0" in x)
    assert "32 of the 64 CPUs pid 100 may run on (32-63) are on another node" in line
    assert any("`numactl --physcpubind=0-31`" in r for r in v.recommendations)


def test_no_numa_finding_on_a_single_node_box_or_when_unknown():
    procs = (GpuProcess(0, 100, sm_util=0.5, cpus_allowed="0-15"),)
    for g in (gpu(cpu_affinity="0-15"), gpu(cpu_affinity=None)):
        v = verdict([job("a", 100)], procs, (g,))
        assert not any("feeds GPU" in x for x in v.evidence_lines)
    v = verdict([job("a", 100)], (GpuProcess(0, 100, sm_util=0.5),), (gpu(cpu_affinity="0-7"),))
    assert not any("feeds GPU" in x for x in v.evidence_lines)  # its CPUs were not read


def test_affinity_cached_refreshed_and_forgotten():
    reads: list[int] = []
    t = [0.0]

    def reader(pid: int) -> str | None:
        reads.append(pid)
        return None if pid == 3 else "0-3"

    aff = CpuAffinity(reader=reader, clock=lambda: t[0], refresh_s=5.0)
    procs = (GpuProcess(0, 1), GpuProcess(1, 1), GpuProcess(0, 3))
    out = aff.annotate(procs)
    assert [p.cpus_allowed for p in out] == ["0-3", "0-3", None]
    assert reads == [1, 3]
    t[0] = 4.0
    aff.annotate(procs)
    assert reads == [1, 3]
    t[0] = 6.0
    aff.annotate(procs[:1])
    assert reads == [1, 3, 1] and set(aff._cache) == {1}


def test_read_affinity_of_this_process_and_a_missing_one(tmp_path):
    import os

    assert C.parse_cpulist(read_affinity(os.getpid())) == frozenset(os.sched_getaffinity(0))
    gone = 2**22 + 5  # above the kernel's pid_max: sched_getaffinity refuses it
    (tmp_path / str(gone)).mkdir()
    (tmp_path / str(gone) / "status").write_text("Name:\tx\nCpus_allowed_list:\t0-3,8\n")
    assert read_affinity(gone, proc=str(tmp_path)) == "0-3,8"  # the /proc fallback
    assert read_affinity(gone + 1, proc=str(tmp_path)) is None


def test_cpulist_round_trip_and_garbage():
    assert C.parse_cpulist("0-3,8,10-11") == {0, 1, 2, 3, 8, 10, 11}
    assert C.format_cpulist({11, 10, 8, 3, 2, 1, 0}) == "0-3,8,10-11"
    assert C.parse_cpulist("x-1") == frozenset() and C.parse_cpulist(None) == frozenset()


def test_mask_words_to_cpus():
    assert mask_words_to_cpus([0b101, 1 << 63]) == {0, 2, 127}


def test_once_gpu_table_shows_clock_throttle_and_pcie():
    import io

    from rich.console import Console

    from gputop_dl.present.once import print_once
    from gputop_dl.snapshot import Snapshot

    g = gpu(throttle=(("power", 0.34),), pcie_link_gen=3, pcie_link_width=8,
            pcie_rx_bytes_per_s=1_200_000_000, pcie_tx_bytes_per_s=300_000_000)
    buf = io.StringIO()
    print_once(Snapshot(time=1.0, gpu_status="ok", gpus=(g,)),
               Console(file=buf, width=250, color_system=None))
    out = buf.getvalue()
    assert "1410 / 1980 MHz throttled: power 34%" in out
    assert "Gen3 x8 (max Gen5 x16) rx 1.2 tx 0.3 GB/s" in out
