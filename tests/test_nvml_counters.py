"""GPU clocks, PCIe and NUMA from NVML against the fake pynvml: the
cumulative throttle and PCIe counters as shares and rates, their cadence, the fallbacks, the link
and the CPUs near each GPU."""

from __future__ import annotations

import json

from gputop_dl.collect.nvml import gpus as nvml_mod
from gputop_dl.collect.nvml.gpus import Nvml
from gputop_dl.collect.nvml.counters import COUNTER_INTERVAL_S, FIRST_DELTA_S, THROTTLE_LABELS
from gputop_dl.snapshot import Snapshot

from tests.fakes.nvml import FakePynvml

S = 1_000_000_000  # ns


class Clock:
    def __init__(self, t: float = 1_000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


def _setup(gpus: int = 1, **kw) -> tuple[FakePynvml, Nvml, Clock]:
    clock = Clock()
    fake = FakePynvml(gpus=gpus, **kw)
    fake.clock = clock
    return fake, Nvml(module=fake, clock=clock), clock


def test_throttle_share_is_counter_delta_over_wall_time():
    fake, nv, clock = _setup()
    first = nv.sample()[0].throttle_shares()
    assert set(first) == set(THROTTLE_LABELS) and all(v is None for v in first.values())
    clock.t += FIRST_DELTA_S
    fake.gpus[0].counters["power"] += int(0.17 * S)  # 0.17 s of 0.5 s held down by power
    fake.gpus[0].counters["hw_thermal"] += int(0.5 * S)
    shares = nv.sample()[0].throttle_shares()
    assert abs(shares["power"] - 0.34) < 1e-9
    assert shares["hw_thermal"] == 1.0 and shares["thermal"] == 0.0 and shares["sync_boost"] == 0.0


def test_counters_read_first_then_soon_then_every_interval_and_cached_between():
    fake, nv, clock = _setup()
    nv.sample()
    assert fake.calls["nvmlDeviceGetFieldValues"] == 1
    clock.t += FIRST_DELTA_S
    nv.sample()
    assert fake.calls["nvmlDeviceGetFieldValues"] == 2
    fake.gpus[0].counters["power"] += 2 * S
    for _ in range(int(COUNTER_INTERVAL_S) - 1):
        clock.t += 1.0
        assert nv.sample()[0].throttle_shares()["power"] == 0.0  # the last share, cached
    assert fake.calls["nvmlDeviceGetFieldValues"] == 2
    clock.t += 1.0 + COUNTER_INTERVAL_S  # past the interval and the stagger
    assert nv.sample()[0].throttle_shares()["power"] > 0.0
    assert fake.calls["nvmlDeviceGetFieldValues"] == 3
    # the link is read with the counters, its maximum once
    assert fake.calls["nvmlDeviceGetCurrPcieLinkGeneration"] == 3
    assert fake.calls["nvmlDeviceGetMaxPcieLinkGeneration"] == 1
    assert fake.calls["nvmlDeviceGetMaxClockInfo"] == 1


def test_module_without_field_ids_falls_back_to_violation_status():
    fake, nv, clock = _setup(field_ids=False)
    nv.sample()
    assert fake.calls["nvmlDeviceGetFieldValues"] == 0
    clock.t += 1.0
    fake.gpus[0].counters["thermal"] += S // 4
    shares = nv.sample()[0].throttle_shares()
    assert shares["thermal"] == 0.25
    # the reasons with no policy (the clock-event-only ids) are unknown: not reported
    assert set(shares) == {"power", "thermal", "sync_boost", "board_limit", "low_util",
                           "reliability"}
    assert fake.calls["nvmlDeviceGetViolationStatus"] == 12  # six policies, two reads


def test_field_refused_by_device_is_dropped_and_power_falls_back_to_its_policy():
    fake, nv, clock = _setup()
    fake.gpus[0].unsupported |= {"field:hw_thermal", "field:power"}
    shares = nv.sample()[0].throttle_shares()
    assert "hw_thermal" not in shares and "power" in shares  # power: now by policy
    clock.t += 1.0
    fake.gpus[0].counters["power"] += S // 2
    assert nv.sample()[0].throttle_shares()["power"] == 0.5
    assert fake.calls["nvmlDeviceGetViolationStatus"] == 2  # power only, at once and again


def test_whole_field_values_call_unsupported_uses_policies():
    fake, nv, clock = _setup()
    fake.gpus[0].unsupported.add("field_values")
    nv.sample()
    clock.t += 1.0
    fake.gpus[0].counters["sync_boost"] += S
    assert nv.sample()[0].throttle_shares()["sync_boost"] == 1.0
    assert fake.calls["nvmlDeviceGetFieldValues"] == 1  # asked once, never again


def test_no_counter_at_all_is_empty_throttle_and_json_null():
    fake = FakePynvml(gpus=1, field_ids=False)
    fake.nvmlDeviceGetViolationStatus = None  # type: ignore[assignment,method-assign]
    g = Nvml(module=fake).sample()[0]
    assert g.throttle == ()
    assert Snapshot(time=1.0, gpu_status="ok", gpus=(g,)).to_json()["gpus"][0]["throttle"] is None


def test_pcie_rate_from_32_bit_counters_across_a_wrap():
    fake, nv, clock = _setup()
    g = fake.gpus[0]
    g.pcie_tx_bytes = (1 << 32) - 10_000_000  # 10 MB below the wrap
    g.pcie_rx_bytes = 0
    nv.sample()
    clock.t += FIRST_DELTA_S
    g.pcie_tx_bytes += 50_000_000  # wraps
    g.pcie_rx_bytes += 5_000_000
    s = nv.sample()[0]
    assert s.pcie_tx_bytes_per_s == 100_000_000 and s.pcie_rx_bytes_per_s == 10_000_000


def test_pcie_point_sample_wins_where_a_32_bit_counter_may_have_wrapped_twice():
    fake, nv, clock = _setup()
    g = fake.gpus[0]
    g.pcie_tx_kbs = 2_000_000  # ~2 GB/s point sample: 1 GB per 0.5 s ... below half the wrap
    nv.sample()
    clock.t += FIRST_DELTA_S
    g.pcie_tx_bytes += 1_000_000_000
    assert nv.sample()[0].pcie_tx_bytes_per_s == 2_000_000_000
    g.pcie_tx_kbs = 25_000_000  # 25 GB/s: 12.8 GB between reads, the counter wrapped thrice
    clock.t += 100.0  # the point sample and the counters are both due
    g.pcie_tx_bytes += 7 << 30  # what the counter shows is the wrapped remainder
    s = nv.sample()[0]
    assert s.pcie_tx_bytes_per_s == 25_000_000 * 1024


def test_64_bit_pcie_counters_replace_the_point_sample():
    fake, nv, clock = _setup()
    fake.gpus[0].pcie_counter_bits = 64
    s = nv.sample()[0]  # the first tick has no delta yet: the point sample, read once
    assert s.pcie_tx_bytes_per_s == 1000 * 1024
    assert fake.calls["nvmlDeviceGetPcieThroughput"] == 2
    clock.t += FIRST_DELTA_S
    fake.gpus[0].pcie_rx_bytes += 1 << 30
    s = nv.sample()[0]
    assert s.pcie_rx_bytes_per_s == 2 << 30 and s.pcie_rx_kbs is None
    for _ in range(20):
        clock.t += 1.0
        nv.sample()
    assert fake.calls["nvmlDeviceGetPcieThroughput"] == 2


def test_pcie_counters_missing_fall_back_to_throughput():
    fake, nv, clock = _setup()
    fake.gpus[0].unsupported |= {"field:pcie_tx", "field:pcie_rx"}
    nv.sample()
    clock.t += FIRST_DELTA_S
    s = nv.sample()[0]
    assert s.pcie_tx_bytes_per_s == 1000 * 1024 and s.pcie_rx_bytes_per_s == 2000 * 1024


def test_link_now_and_max_and_unsupported():
    fake = FakePynvml(gpus=2)
    fake.gpus[0].link_gen, fake.gpus[0].link_width = 1, 8
    fake.gpus[1].unsupported |= {"link_gen", "link_width_max"}
    a, b = Nvml(module=fake).sample()
    assert (a.pcie_link_gen, a.pcie_link_gen_max, a.pcie_link_width, a.pcie_link_width_max) == (1, 5, 8, 16)
    assert b.pcie_link_gen is None and b.pcie_link_width_max is None and b.pcie_link_width == 16
    pcie = Snapshot(time=1.0, gpu_status="ok", gpus=(a,)).to_json()["gpus"][0]["pcie"]
    assert pcie == {"rx_bytes_per_s": 2000 * 1024, "tx_bytes_per_s": 1000 * 1024, "link_gen": 1,
                    "link_gen_max": 5, "link_width": 8, "link_width_max": 16}
    json.dumps(Snapshot(time=1.0, gpu_status="ok", gpus=(a, b)).to_json())


def test_cpu_affinity_words_become_a_cpulist(monkeypatch):
    monkeypatch.setattr(nvml_mod.os, "cpu_count", lambda: 128)
    fake = FakePynvml(gpus=2)
    fake.gpus[0].cpus_near = tuple(range(0, 32)) + tuple(range(64, 96))
    fake.gpus[1].cpus_near = (32, 33, 127)
    fake.gpus[1].unsupported.add("numa_node")
    a, b = Nvml(module=fake).sample()
    assert a.cpu_affinity == "0-31,64-95" and a.numa_node == 0
    assert b.cpu_affinity == "32-33,127" and b.numa_node is None


def test_sm_clock_max_and_lost_gpu_resets_counters():
    fake, nv, clock = _setup()
    assert nv.sample()[0].sm_clock_max_mhz == 1980
    fake.gpus[0].lost = True
    clock.t += 1.0
    assert nv.sample()[0].error
    fake.gpus[0].lost = False
    clock.t += 1.0
    fake.gpus[0].counters["power"] += 100 * S  # while lost: no share spans the gap
    assert all(v is None for v in nv.sample()[0].throttle_shares().values())
