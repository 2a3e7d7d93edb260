"""A GPU's energy from NVML against the fake pynvml: the counter's differences (mJ), its update
period, a counter that is refused, missing, frozen or goes back, power x time in its place, a
lost GPU, and a Grace superchip's module scope."""

from __future__ import annotations

import pytest

from gputop_dl.collect.nvml.gpus import Nvml
from gputop_dl.collect.nvml.energy import COUNTER, POWER_INTEGRAL, STUCK_S, EnergyMeter, power_scope
from gputop_dl.snapshot import Snapshot

from tests.fakes.nvml import FakeGpu, FakePynvml


class Clock:
    def __init__(self, t: float = 1_000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


def _setup(gpus: int | list[FakeGpu] = 1) -> tuple[FakePynvml, Nvml, Clock]:
    clock = Clock()
    fake = FakePynvml(gpus=gpus)
    fake.clock = clock
    return fake, Nvml(module=fake, clock=clock), clock


def _ticks(nv: Nvml, clock: Clock, n: int, dt: float = 1.0):
    out = nv.sample()
    for _ in range(n):
        clock.t += dt
        out = nv.sample()
    return out


def test_counter_differences_in_millijoules_make_joules_since_the_first_read():
    fake, nv, clock = _setup(2)
    fake.gpus[1].power_mw = 120_000
    first = nv.sample()
    assert all(g.energy_j is None for g in first)  # no interval yet: unknown, not 0 J
    assert first[0].energy_since == clock.t
    gpus = _ticks(nv, clock, 3)
    assert gpus[0].energy_j == pytest.approx(3 * 300.0)  # 300 W for 3 s
    assert gpus[1].energy_j == pytest.approx(3 * 120.0)
    assert {g.energy_source for g in gpus} == {COUNTER}
    assert gpus[0].energy_scope == "gpu" and gpus[0].energy_note is None
    assert fake.calls["nvmlDeviceGetTotalEnergyConsumption"] == 10  # one call a GPU a tick


def test_a_window_shorter_than_the_update_period_reads_zero_and_is_not_stuck():
    fake, nv, clock = _setup()
    fake.gpus[0].energy_period_s = 0.1
    nv.sample()
    for _ in range(5):  # 5 reads 10 ms apart: the counter shows its last value
        clock.t += 0.01
        g = nv.sample()[0]
    assert g.energy_j is None and g.energy_source is None
    clock.t += 1.0
    g = nv.sample()[0]
    assert g.energy_source == COUNTER
    assert g.energy_j == pytest.approx(300.0 * 1.05, rel=1e-3)  # caught up, nothing lost


def test_refused_counter_is_power_times_time_and_not_asked_again():
    fake, nv, clock = _setup()
    fake.gpus[0].unsupported.add("energy")
    fake.gpus[0].power_mw = 100_000
    nv.sample()
    clock.t += 2.0
    fake.gpus[0].power_mw = 300_000
    g = nv.sample()[0]
    assert g.energy_source == POWER_INTEGRAL
    assert g.energy_j == pytest.approx((100 + 300) / 2 * 2.0)  # trapezoid over 2 s
    _ticks(nv, clock, 2)
    assert fake.calls["nvmlDeviceGetTotalEnergyConsumption"] == 1


def test_a_module_without_the_function_integrates_power():
    fake, nv, clock = _setup()
    fake.nvmlDeviceGetTotalEnergyConsumption = None  # an nvidia-ml-py without it
    nv = Nvml(module=fake, clock=clock)
    g = _ticks(nv, clock, 2)[0]
    assert g.energy_source == POWER_INTEGRAL and g.energy_j == pytest.approx(600.0)


def test_a_frozen_counter_is_given_up_and_its_span_filled_by_power():
    fake, nv, clock = _setup()
    fake.gpus[0].energy_frozen = True
    nv.sample()
    g = nv.sample()[0]
    for _ in range(int(STUCK_S) - 1):
        clock.t += 1.0
        g = nv.sample()[0]
        assert g.energy_j is None  # it may still catch up
    clock.t += 1.0
    g = nv.sample()[0]
    assert g.energy_source == POWER_INTEGRAL and g.energy_note
    assert g.energy_j == pytest.approx(300.0 * STUCK_S)  # the whole span, from power
    calls = fake.calls["nvmlDeviceGetTotalEnergyConsumption"]
    clock.t += 1.0
    assert nv.sample()[0].energy_j == pytest.approx(300.0 * (STUCK_S + 1))
    assert fake.calls["nvmlDeviceGetTotalEnergyConsumption"] == calls


def test_an_idle_gpu_reading_zero_power_keeps_its_counter():
    fake, nv, clock = _setup()
    fake.gpus[0].energy_frozen = True
    fake.gpus[0].power_mw = 0
    g = _ticks(nv, clock, int(STUCK_S) + 2)[0]
    assert g.energy_j is None and g.energy_source is None  # no power drawn: nothing to say


def test_a_counter_that_goes_back_is_bridged_by_power_for_one_interval():
    fake, nv, clock = _setup()
    _ticks(nv, clock, 2)
    fake.gpus[0].energy_mj = 5  # the driver reloaded
    clock.t += 1.0
    g = nv.sample()[0]
    assert g.energy_j == pytest.approx(900.0) and g.energy_note
    clock.t += 1.0
    g = nv.sample()[0]
    assert g.energy_j == pytest.approx(1200.0) and g.energy_source == COUNTER


def test_a_lost_gpu_keeps_its_joules_and_does_not_guess_the_gap():
    fake, nv, clock = _setup()
    _ticks(nv, clock, 2)
    fake.gpus[0].lost = True
    clock.t += 1.0
    lost = nv.sample()[0]
    assert lost.error and lost.energy_j is None  # a lost GPU's sample says nothing else
    fake.gpus[0].lost = False
    clock.t += 5.0
    nv.sample()  # a new interval starts here
    clock.t += 1.0
    assert nv.sample()[0].energy_j == pytest.approx(900.0)


def test_neither_counter_nor_power_is_unknown_with_a_reason():
    fake, nv, clock = _setup()
    fake.gpus[0].unsupported.update({"energy", "power"})
    g = _ticks(nv, clock, 2)[0]
    assert g.energy_j is None and g.energy_note and g.energy_source is None


def test_a_grace_superchip_says_its_power_is_the_module_s():
    fake, nv, clock = _setup([FakeGpu(name="NVIDIA GH200 480GB")])
    g = _ticks(nv, clock, 1)[0]
    assert g.energy_scope == "module" and "module" in (g.energy_note or "")
    assert power_scope("NVIDIA H100 80GB HBM3") == "gpu"


def test_energy_fields_reach_the_snapshot_json():
    fake, nv, clock = _setup()
    gpus = _ticks(nv, clock, 1)
    doc = Snapshot(time=clock.t, gpu_status="ok", gpus=gpus).to_json()
    g = doc["gpus"][0]
    assert g["energy_j"] == pytest.approx(300.0) and g["energy_source"] == COUNTER
    assert g["energy_scope"] == "gpu"


def test_meter_missed_counter_read_is_covered_by_the_next_difference():
    m = EnergyMeter()
    m.read(0.0, 1_000, 100.0)
    m.read(1.0, None, 100.0)  # a transient error: nothing added, nothing double counted
    m.read(2.0, 201_000, 100.0)
    assert m.joules == pytest.approx(200.0) and m.source == COUNTER
