"""Live rates against the stored machine profile's measured peaks: the dataset
disk's read rate and each GPU link's copies, analyse/live/box_peaks.py through PassiveJudge, on
fixed samples and the fake pynvml; no profile: said once, no peak made up."""

from __future__ import annotations

import calendar
import json

from gputop_dl.analyse.live.box_peaks import NO_PROFILE, Peaks, peaks_from_profile
from gputop_dl.analyse.live.passive import PassiveJudge, once
from gputop_dl.collect.nvml.gpus import Nvml
from gputop_dl.collect.nvml.counters import FIRST_DELTA_S
from gputop_dl.snapshot import GpuProcess, HostSample, JobSample, Snapshot

from tests.fakes.nvml import FakePynvml
from tests.schema_check import check

MB = 1_000_000
DEV = 64768
CREATED = calendar.timegm((2026, 11, 26, 13, 40, 0, 0, 0, 0))
PRESSED = HostSample(cpus=2, cpu_busy=0.1, cpu_pressure_some10=0.0, load1=0.3,
                     io_pressure_some10=0.45)
CALM = HostSample(cpus=2, cpu_busy=0.1, cpu_pressure_some10=0.0, load1=0.3,
                  io_pressure_some10=0.0)


def reader(name: str, pid: int, rate: float, dev: int = DEV, **kw) -> JobSample:
    return JobSample(name=name, pid=pid, launched=False, pids=(pid, pid + 1), cpu_cores=0.02,
                     cpu_wait_fraction=0.0, io_read_bytes_per_s=int(rate), io_device=dev,
                     io_device_label="vda (/, ext4)", io_blocked=1.0, stall_fraction=0.97, **kw)


def profile(**over) -> dict:
    p = {"schema": "gputop-dl.machine/1", "created": CREATED, "host": "box", "quick": False,
         "storage": [{"paths": ["/data"], "mount": "/", "name": "vda", "seq_bps": 180 * MB,
                      "rand_bps": 40 * MB, "page_cache_bypassed": True}],
         "gpus": [{"index": 0, "uuid": "GPU-0", "link_peak_bps": 31.5e9,
                   "copies": [{"from": "near", "h2d_pinned_bps": 24e9, "d2h_pinned_bps": 25e9}]}]}
    p.update(over)
    return p


def peaks(p: dict | None) -> Peaks:
    return Peaks(None if p is None else peaks_from_profile(p, lambda path: DEV))


def judged(jobs, host, pk: Peaks | None, ticks: int = 4, gprocs=(), gpus=()):
    judge = PassiveJudge(peaks=pk)
    v = None
    for t in range(ticks):
        v, _ = judge.verdict(jobs, host, gprocs, gpus, float(t))
    assert v is not None
    check(v.to_json(), "verdict")
    return v


def test_io_bound_pair_names_the_disks_measured_peak_and_what_they_read_together():
    v = judged([reader("a", 1, 170 * MB), reader("b", 3, 170 * MB)], PRESSED, peaks(profile()))
    assert v.kind == "io-bound"
    line = next(x for x in v.evidence_lines if x.startswith("disk: vda (/, ext4) reads"))
    assert "reads 180 MB/s at most, 40 MB/s in random 128 KiB reads (measured 2026-11-26 13:40 UTC)" in line
    assert "a and b read 340 MB/s together now, 189% of that" in line
    assert "at solo speed" in line  # each slowed about 1.9x: they would ask for more
    d = v.evidence["box_peaks"]["disks"][0]
    assert d["seq_bps"] == 180 * MB and d["read_bps"] == 340 * MB and d["share"] == 1.889
    assert d["solo_read_bps"] > d["read_bps"]
    assert v.evidence["box_peaks"]["profile"] == {"host": "box", "created": CREATED, "quick": False}


def test_no_profile_is_said_once_with_how_to_make_one_and_no_peak():
    v = judged([reader("a", 1, 2 * MB), reader("b", 3, 2 * MB)], PRESSED, peaks(None))
    assert v.kind == "io-bound"
    assert v.evidence_lines.count(NO_PROFILE) == 1 and "`gputop-dl machine`" in NO_PROFILE
    bp = v.evidence["box_peaks"]
    assert bp["profile"] is None and bp["note"] == NO_PROFILE
    assert bp["disks"][0]["seq_bps"] is None and bp["disks"][0]["share"] is None
    assert not any("at most" in x for x in v.evidence_lines)
    # not looked up (a verdict of tests or replays): nothing added at all
    assert "box_peaks" not in judged([reader("a", 1, 2 * MB)], PRESSED, None).evidence


def test_disk_the_profile_did_not_measure_or_read_through_the_cache_has_no_peak():
    other = Peaks(peaks_from_profile(profile(), lambda path: 1))  # its paths are elsewhere now
    v = judged([reader("a", 1, 2 * MB), reader("b", 3, 2 * MB)], PRESSED, other)
    assert any("a disk the machine profile did not measure: `gputop-dl machine --data DIR`" in x
               for x in v.evidence_lines)
    cached = profile(storage=[{"paths": ["/data"], "mount": "/", "name": "vda", "seq_bps": 3e9,
                               "rand_bps": 1e9, "page_cache_bypassed": False}])
    v = judged([reader("a", 1, 2 * MB), reader("b", 3, 2 * MB)], PRESSED, peaks(cached))
    assert any("through the page cache (O_DIRECT refused): no disk peak" in x for x in v.evidence_lines)
    assert v.evidence["box_peaks"]["disks"][0]["seq_bps"] is None


def test_a_calm_verdict_gets_a_disk_line_only_near_the_peak():
    low = judged([reader("a", 1, 20 * MB), reader("b", 3, 20 * MB)], CALM, peaks(profile()))
    assert low.kind == "parallel" and not any(x.startswith("disk:") for x in low.evidence_lines)
    assert low.evidence["box_peaks"]["disks"][0]["share"] == 0.222  # the figures are kept
    near = judged([reader("a", 1, 50 * MB), reader("b", 3, 50 * MB)], CALM, peaks(profile()))
    assert any("a and b read 100 MB/s together now, 56% of that" in x for x in near.evidence_lines)


def _gpu_sample(rx_kbs: int, tx_kbs: int):
    fake = FakePynvml(gpus=1)
    fake.gpus[0].unsupported |= {"field:pcie_tx", "field:pcie_rx"}  # NVML's throughput
    fake.gpus[0].pcie_rx_kbs, fake.gpus[0].pcie_tx_kbs = rx_kbs, tx_kbs
    t = [1000.0]
    fake.clock = lambda: t[0]
    nv = Nvml(module=fake, clock=lambda: t[0])
    nv.sample()
    t[0] += FIRST_DELTA_S
    return nv.sample()[0]


def test_pcie_h2d_and_d2h_against_the_links_measured_copies():
    g = _gpu_sample(rx_kbs=21_562_500, tx_kbs=1_000_000)  # 22.08 GB/s in, 1.02 GB/s out
    job = JobSample(name="a", pid=10, launched=False, pids=(10,), cpu_cores=0.5,
                    cpu_wait_fraction=0.0, stall_fraction=0.0, device="cuda:0")
    host = HostSample(cpus=8, cpu_busy=0.1, cpu_pressure_some10=0.0, load1=0.5)
    gp = (GpuProcess(gpu_index=0, pid=10),)
    uuid = g.uuid
    p = profile(gpus=[{"index": 0, "uuid": uuid, "link_peak_bps": 31.5e9, "copies": [
        {"from": "near", "h2d_pinned_bps": 24e9, "d2h_pinned_bps": 25e9}]}])
    v = judged([job], host, peaks(p), gprocs=gp, gpus=(g,))
    line = next(x for x in v.evidence_lines if x.startswith("GPU 0 (a): PCIe"))
    assert "H2D 22.1 GB/s, 92% of 24.0 GB/s; D2H 1.0 GB/s, 4% of 25.0 GB/s" in line
    assert "measured pinned copies (measured 2026-11-26 13:40 UTC)" in line
    link = v.evidence["box_peaks"]["links"][0]
    assert link["peak"] == "measured" and link["h2d_share"] == 0.92
    # a --quick profile has no copies: the theoretical peak, said so
    quick = profile(quick=True, gpus=[{"index": 0, "uuid": uuid, "link_peak_bps": 31.5e9, "copies": []}])
    v = judged([job], host, peaks(quick), gprocs=gp, gpus=(g,))
    assert any("of 31.5 GB/s" in x and "theoretical peak (its copies were not measured" in x
               for x in v.evidence_lines)
    # no profile: one line, no peak
    v = judged([job], host, peaks(None), gprocs=gp, gpus=(g,))
    assert v.evidence_lines.count(NO_PROFILE) == 1
    assert v.evidence["box_peaks"]["links"][0]["h2d_peak_bps"] is None


def test_once_json_carries_box_peaks_and_fits_the_snapshot_schema():
    jobs = (reader("a", 1, 170 * MB), reader("b", 3, 170 * MB))
    snap = once(Snapshot(time=1.0, gpu_status="ok", host=PRESSED, jobs=jobs), peaks(profile()))
    doc = check(json.loads(json.dumps(snap.to_json())))
    assert doc["verdict"]["evidence"]["box_peaks"]["disks"][0]["seq_bps"] == 180 * MB
