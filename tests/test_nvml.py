"""gputop_dl.collect.nvml.gpus against a fake pynvml, plus the real pynvml on this (GPU-less) machine."""

from __future__ import annotations

import sys
import time

import pytest

from gputop_dl.collect.nvml.gpu_sample import PCIE_INTERVAL_S
from gputop_dl.collect.nvml.gpus import Nvml
from gputop_dl.collect.nvml.counters import THROTTLE_LABELS
from gputop_dl.snapshot import GpuProcess, GpuSample

from tests.fakes.nvml import GiB, FakeProcess, FakePynvml, missing_pynvml


class FakeClock:
    def __init__(self, t: float = 1_000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


# --------------------------------------------------------------------------- init / status


def test_library_missing():
    nv = Nvml(importer=missing_pynvml)
    assert nv.status == "no-library"
    assert "nvidia-ml-py" in nv.status_detail
    assert nv.device_count() == 0
    assert nv.names() == []
    assert nv.sample() == ()
    assert nv.processes() == ()
    assert nv.driver_version is None and nv.cuda_driver_version is None
    nv.close()  # harmless


@pytest.mark.parametrize(
    "code", [FakePynvml.NVML_ERROR_LIBRARY_NOT_FOUND, FakePynvml.NVML_ERROR_DRIVER_NOT_LOADED]
)
def test_driver_not_loaded(code):
    fake = FakePynvml(gpus=2, init_error=code)
    nv = Nvml(module=fake)
    assert nv.status == "no-driver"
    assert nv.status_detail.startswith("No NVIDIA GPU: the NVIDIA driver is not loaded")
    assert nv.status_detail.endswith("workloads train on the CPU.")
    if code == FakePynvml.NVML_ERROR_LIBRARY_NOT_FOUND:
        assert "libnvidia-ml.so.1 not found" in nv.status_detail
    assert nv.device_count() == 0
    assert nv.sample() == ()
    assert nv.processes() == ()
    nv.close()
    assert fake.shutdown_calls == 0  # never initialised, never shut down


def test_no_devices():
    fake = FakePynvml(gpus=0)
    nv = Nvml(module=fake)
    assert nv.status == "no-devices"
    assert "no devices" in nv.status_detail
    assert nv.device_count() == 0
    assert nv.sample() == ()
    assert nv.processes() == ()
    assert fake.shutdown_calls == 1  # nothing to watch: NVML released at once
    nv.close()
    assert fake.shutdown_calls == 1


def test_other_init_error_is_error_status():
    fake = FakePynvml(gpus=1, init_error=FakePynvml.NVML_ERROR_NO_PERMISSION)
    nv = Nvml(module=fake)
    assert nv.status == "error: Insufficient Permissions"
    assert "Insufficient Permissions" in nv.status_detail
    assert nv.sample() == () and nv.processes() == ()


def test_non_nvml_init_exception_does_not_escape():
    fake = FakePynvml(gpus=1, init_error=OSError("weird loader failure"))
    nv = Nvml(module=fake)
    assert nv.status.startswith("error: ")
    assert "weird loader failure" in nv.status
    assert nv.sample() == ()


def test_error_classification_uses_codes_not_classes():
    """A bare NVMLError carrying the code (no subclass) is classified the same way."""
    fake = FakePynvml(gpus=1, init_error=FakePynvml.NVMLError(FakePynvml.NVML_ERROR_LIBRARY_NOT_FOUND))
    assert Nvml(module=fake).status == "no-driver"


def test_ok_status_and_static_info():
    fake = FakePynvml(gpus=2, driver_version="550.54.15", cuda_version=12040)
    fake.gpus[1].name = "NVIDIA A100-SXM4-40GB"
    nv = Nvml(module=fake)
    assert nv.status == "ok"
    assert nv.driver_version == "550.54.15"
    assert nv.cuda_driver_version == "12.4"
    assert nv.device_count() == 2
    assert nv.names() == ["NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB"]
    assert "2 NVIDIA GPUs" in nv.status_detail and "driver 550.54.15" in nv.status_detail
    nv.close()
    assert fake.shutdown_calls == 1
    assert nv.sample() == () and nv.processes() == ()
    nv.close()
    assert fake.shutdown_calls == 1


def test_bytes_strings_are_decoded():
    fake = FakePynvml(gpus=1, driver_version=b"535.104.05")  # type: ignore[arg-type]
    fake.gpus[0].name = b"Tesla T4"  # type: ignore[assignment]
    nv = Nvml(module=fake)
    assert nv.driver_version == "535.104.05"
    assert nv.names() == ["Tesla T4"]
    assert nv.sample()[0].name == "Tesla T4"


# --------------------------------------------------------------------------- sample()


def test_two_gpu_sample_values_and_units():
    fake = FakePynvml(gpus=2)
    g = fake.gpus[0]
    g.util, g.mem_util = 87, 45
    g.mem_used, g.mem_total = 30 * GiB, 80 * GiB
    g.temp_c, g.power_mw, g.power_limit_mw = 71, 412_345, 700_000
    g.sm_clock_mhz = 1755
    g.clock_reasons = fake.nvmlClocksEventReasonSwPowerCap | fake.nvmlClocksEventReasonHwThermalSlowdown
    g.pcie_tx_kbs, g.pcie_rx_kbs = 123_456, 654_321
    nv = Nvml(module=fake)
    s0, s1 = nv.sample()
    assert isinstance(s0, GpuSample)
    assert s0 == GpuSample(
        index=0,
        name="NVIDIA H100 80GB HBM3",
        uuid="GPU-fake-0000-0000-0000-0000-000000000000",
        util=0.87,
        mem_util=0.45,
        mem_used=30 * GiB,
        mem_total=80 * GiB,
        temp_c=71.0,
        power_w=412.345,
        power_limit_w=700.0,
        sm_clock_mhz=1755,
        throttle_reasons=("sw_power_cap", "hw_thermal_slowdown"),
        pcie_tx_kbs=123_456,
        pcie_rx_kbs=654_321,
        error=None,
        sm_clock_max_mhz=1980,
        throttle=tuple((r, None) for r in THROTTLE_LABELS),  # a first reading: no delta yet
        pcie_tx_bytes_per_s=123_456 * 1024,  # the point sample until the counters have a delta
        pcie_rx_bytes_per_s=654_321 * 1024,
        pcie_link_gen=5, pcie_link_gen_max=5, pcie_link_width=16, pcie_link_width_max=16,
        cpu_affinity="0-15", numa_node=0,
        energy_since=s0.energy_since, energy_scope="gpu",  # a first reading: no joules yet
    )
    assert s0.energy_since is not None and s0.energy_j is None
    assert s1.index == 1 and s1.error is None
    assert s1.util == 0.5 and s1.mem_used == 10 * GiB and s1.power_w == 300.0
    assert s1.throttle_reasons == ()
    assert 0.0 <= s1.util <= 1.0 and 0.0 <= s1.mem_util <= 1.0


def test_readings_change_between_ticks():
    fake = FakePynvml(gpus=1)
    nv = Nvml(module=fake)
    assert nv.sample()[0].util == 0.5
    fake.gpus[0].util = 100
    fake.gpus[0].mem_used = 79 * GiB
    s = nv.sample()[0]
    assert s.util == 1.0 and s.mem_used == 79 * GiB


def test_memory_used_leaves_out_the_drivers_reservation():
    """Seen on an H100 (driver 580): idle, the v1 call said 480 MiB used where nvidia-smi said
    0; with a job, 2031 MiB against nvidia-smi's 1551. The v2 call keeps `reserved` apart."""
    MiB = 1 << 20
    fake = FakePynvml(gpus=1)
    g = fake.gpus[0]
    g.mem_used, g.mem_reserved, g.mem_total = 1551 * MiB, 480 * MiB, 81559 * MiB
    s = Nvml(module=fake).sample()[0]
    assert s.mem_used == 1551 * MiB and s.mem_total == 81559 * MiB
    assert fake.calls["nvmlDeviceGetMemoryInfo_v2"] == 1


def test_memory_falls_back_to_v1_where_v2_is_missing():
    MiB = 1 << 20
    fake = FakePynvml(gpus=1)
    g = fake.gpus[0]
    g.mem_used, g.mem_reserved = 1551 * MiB, 480 * MiB
    g.unsupported.add("memory_v2")  # an old driver: the v2 entry point is not there
    nv = Nvml(module=fake)
    assert nv.sample()[0].mem_used == 2031 * MiB  # v1 is all there is: reservation included
    nv.sample()
    assert fake.calls["nvmlDeviceGetMemoryInfo_v2"] == 1  # not asked again once unsupported


def test_throttle_reason_names():
    fake = FakePynvml(gpus=1)
    nv = Nvml(module=fake)
    cases = {
        0x1: ("idle",),
        0x4: ("sw_power_cap",),
        0x8: ("hw_slowdown",),
        0x20: ("sw_thermal_slowdown",),
        0x40: ("hw_thermal_slowdown",),
        0x80: ("power_brake",),
        0x8 | 0x80: ("hw_slowdown", "power_brake"),
        0x10000: ("other:0x10000",),
    }
    for mask, want in cases.items():
        fake.gpus[0].clock_reasons = mask
        assert nv.sample()[0].throttle_reasons == want


def test_old_pynvml_uses_throttle_reasons():
    fake = FakePynvml(gpus=1, event_reasons=False)
    assert not hasattr(fake, "nvmlDeviceGetCurrentClocksEventReasons")
    fake.gpus[0].clock_reasons = fake.nvmlClocksThrottleReasonSwThermalSlowdown
    nv = Nvml(module=fake)
    assert nv.sample()[0].throttle_reasons == ("sw_thermal_slowdown",)
    assert fake.calls["nvmlDeviceGetCurrentClocksThrottleReasons"] >= 1


def test_event_reasons_function_missing_in_driver_falls_back():
    """pynvml has ...EventReasons but the driver lacks the symbol (FUNCTION_NOT_FOUND)."""
    fake = FakePynvml(gpus=1)

    def no_symbol(h):
        raise fake.NVMLError(fake.NVML_ERROR_FUNCTION_NOT_FOUND)

    fake.nvmlDeviceGetCurrentClocksEventReasons = no_symbol
    fake.gpus[0].clock_reasons = fake.nvmlClocksThrottleReasonHwSlowdown
    nv = Nvml(module=fake)
    assert nv.sample()[0].throttle_reasons == ("hw_slowdown",)


@pytest.mark.parametrize(
    "key, attrs",
    [
        ("power", ("power_w",)),
        ("temperature", ("temp_c",)),
        ("utilization", ("util", "mem_util")),
        ("memory", ("mem_used",)),
        ("sm_clock", ("sm_clock_mhz",)),
        ("pcie", ("pcie_tx_kbs", "pcie_rx_kbs")),
    ],
)
def test_unsupported_field_is_none_others_present(key, attrs):
    fake = FakePynvml(gpus=2)
    fake.gpus[0].unsupported.add(key)
    nv = Nvml(module=fake)
    s0, s1 = nv.sample()
    assert s0.error is None
    for a in attrs:
        assert getattr(s0, a) is None, a
        assert getattr(s1, a) is not None, a
    for a in ("util", "mem_used", "temp_c", "power_w", "sm_clock_mhz", "pcie_tx_kbs"):
        if a not in attrs:
            assert getattr(s0, a) is not None, a


def test_unsupported_field_is_not_asked_again():
    fake = FakePynvml(gpus=1)
    fake.gpus[0].unsupported.add("power")
    nv = Nvml(module=fake)
    for _ in range(5):
        assert nv.sample()[0].power_w is None
    assert fake.calls["nvmlDeviceGetPowerUsage"] == 1
    assert fake.calls["nvmlDeviceGetTemperature"] == 5


def test_transient_nvml_error_is_retried():
    fake = FakePynvml(gpus=1)
    fake.gpus[0].raise_in["temperature"] = fake.NVMLError(fake.NVML_ERROR_UNKNOWN)
    nv = Nvml(module=fake)
    s = nv.sample()[0]
    assert s.temp_c is None and s.error is None and s.power_w == 300.0
    del fake.gpus[0].raise_in["temperature"]
    assert nv.sample()[0].temp_c == 60.0


def test_static_info_unsupported():
    fake = FakePynvml(gpus=1)
    fake.gpus[0].unsupported.update({"power_limit", "uuid"})
    nv = Nvml(module=fake)
    s = nv.sample()[0]
    assert s.power_limit_w is None and s.uuid is None
    assert s.power_w == 300.0 and s.name == "NVIDIA H100 80GB HBM3"


def test_lost_gpu_mid_run():
    fake = FakePynvml(gpus=2)
    fake.gpus[1].processes = [FakeProcess(pid=7, used_memory=GiB)]
    nv = Nvml(module=fake)
    assert all(s.error is None for s in nv.sample())
    fake.gpus[0].lost = True
    s0, s1 = nv.sample()
    assert s0 == GpuSample(0, "NVIDIA H100 80GB HBM3", s0.uuid, error="GPU is lost")
    assert s0.util is None and s0.mem_used is None
    assert s1.error is None and s1.util == 0.5
    assert [p.pid for p in nv.processes()] == [7]  # the lost GPU is skipped
    # keeps going, tick after tick
    for _ in range(3):
        assert nv.sample()[0].error == "GPU is lost"
    # and recovers if NVML answers again
    fake.gpus[0].lost = False
    assert nv.sample()[0].error is None


def test_gpu_lost_at_init_has_no_handle():
    fake = FakePynvml(gpus=2)
    fake.gpus[0].lost = True
    nv = Nvml(module=fake)
    assert nv.status == "ok" and nv.device_count() == 2
    s0, s1 = nv.sample()
    assert s0.index == 0 and s0.error == "GPU is lost"
    assert s1.error is None and s1.util == 0.5
    assert nv.processes() == ()


def test_random_exception_in_a_field_does_not_escape():
    fake = FakePynvml(gpus=2)
    fake.gpus[0].raise_in["temperature"] = RuntimeError("boom")
    fake.gpus[0].raise_in["processes"] = ZeroDivisionError("bad")
    fake.gpus[1].processes = [FakeProcess(pid=11)]
    nv = Nvml(module=fake)
    s0, s1 = nv.sample()
    assert s0.error is not None and "boom" in s0.error
    assert s1.error is None and s1.temp_c == 60.0
    assert [p.pid for p in nv.processes()] == [11]


def test_garbage_values_do_not_escape():
    fake = FakePynvml(gpus=1)
    fake.gpus[0].util = "n/a"  # type: ignore[assignment]  # a broken binding
    nv = Nvml(module=fake)
    (s,) = nv.sample()
    assert s.error is not None and s.index == 0


def test_clock_failure_does_not_escape():
    def bad_clock() -> float:
        raise OSError("no clock")

    nv = Nvml(module=FakePynvml(gpus=1), clock=bad_clock)
    assert nv.sample()[0].error is None
    assert nv.processes() == ()


# --------------------------------------------------------------------------- PCIe cadence


def test_pcie_read_at_most_every_interval_and_cached():
    clock = FakeClock()
    fake = FakePynvml(gpus=1)
    nv = Nvml(module=fake, clock=clock)
    assert nv.sample()[0].pcie_tx_kbs == 1000
    assert fake.calls["nvmlDeviceGetPcieThroughput"] == 2  # tx + rx
    fake.gpus[0].pcie_tx_kbs = 5000
    for _ in range(4):
        clock.t += 1.0
        s = nv.sample()[0]
        assert s.pcie_tx_kbs == 1000 and s.pcie_rx_kbs == 2000  # cached
    assert fake.calls["nvmlDeviceGetPcieThroughput"] == 2
    clock.t += PCIE_INTERVAL_S
    assert nv.sample()[0].pcie_tx_kbs == 5000
    assert fake.calls["nvmlDeviceGetPcieThroughput"] == 4


def test_pcie_reads_are_staggered_across_gpus():
    clock = FakeClock()
    fake = FakePynvml(gpus=8)
    nv = Nvml(module=fake, clock=clock)
    nv.sample()  # first tick reads all of them
    assert fake.calls["nvmlDeviceGetPcieThroughput"] == 16
    per_tick = []
    for _ in range(30):
        clock.t += 0.5
        before = fake.calls["nvmlDeviceGetPcieThroughput"]
        nv.sample()
        per_tick.append(fake.calls["nvmlDeviceGetPcieThroughput"] - before)
    assert max(per_tick) <= 4  # at most two GPUs (tx+rx each) per half-second tick
    assert sum(per_tick) >= 16  # each GPU re-read at least once in 15 s


def test_pcie_wall_clock_jump_back_reschedules():
    clock = FakeClock(10_000.0)
    fake = FakePynvml(gpus=1)
    nv = Nvml(module=fake, clock=clock)
    nv.sample()
    clock.t = 100.0  # wall clock stepped back by hours
    nv.sample()
    assert fake.calls["nvmlDeviceGetPcieThroughput"] == 4
    clock.t += 1.0
    nv.sample()
    assert fake.calls["nvmlDeviceGetPcieThroughput"] == 4


# --------------------------------------------------------------------------- processes()


def test_processes_memory_and_sm_util():
    fake = FakePynvml(gpus=2)
    g0, g1 = fake.gpus
    g0.processes = [FakeProcess(pid=100, used_memory=3 * GiB), FakeProcess(pid=101, used_memory=None)]
    g1.processes = [FakeProcess(pid=100, used_memory=2 * GiB)]
    g1.graphics_processes = [FakeProcess(pid=200, used_memory=GiB)]
    g0.add_util_sample(pid=100, sm=80)
    g0.add_util_sample(pid=100, sm=90)
    g1.add_util_sample(pid=200, sm=5)
    nv = Nvml(module=fake)
    procs = nv.processes()
    assert all(isinstance(p, GpuProcess) for p in procs)
    by_key = {(p.gpu_index, p.pid): p for p in procs}
    assert set(by_key) == {(0, 100), (0, 101), (1, 100), (1, 200)}
    assert by_key[(0, 100)].mem_used == 3 * GiB
    assert by_key[(0, 100)].sm_util == pytest.approx(0.85)  # mean of the new samples
    assert by_key[(0, 101)].mem_used is None
    assert by_key[(0, 101)].sm_util == 0.0  # GPU reports per-process util; 101 ran nothing
    assert by_key[(1, 100)].mem_used == 2 * GiB and by_key[(1, 100)].sm_util == 0.0
    assert by_key[(1, 200)].sm_util == pytest.approx(0.05)


def test_process_util_uses_last_seen_timestamp():
    fake = FakePynvml(gpus=1)
    g = fake.gpus[0]
    g.processes = [FakeProcess(pid=1)]
    now_us = int(time.time() * 1e6)
    g.add_util_sample(pid=1, sm=40, ts_us=now_us - 500_000)
    nv = Nvml(module=fake)
    assert nv.processes()[0].sm_util == pytest.approx(0.40)
    # no new samples: NVML raises NOT_FOUND; the recent value is kept
    assert nv.processes()[0].sm_util == pytest.approx(0.40)
    # a newer sample replaces it; the old one is not counted twice
    g.add_util_sample(pid=1, sm=100, ts_us=now_us - 100_000)
    assert nv.processes()[0].sm_util == pytest.approx(1.0)
    assert fake.calls["nvmlDeviceGetProcessUtilization"] == 3


def test_process_util_old_samples_ignored_and_age_out():
    clock = FakeClock(5_000.0)
    fake = FakePynvml(gpus=1)
    g = fake.gpus[0]
    g.processes = [FakeProcess(pid=1)]
    g.add_util_sample(pid=1, sm=99, ts_us=int((clock.t - 60) * 1e6))  # a minute old
    g.add_util_sample(pid=1, sm=30, ts_us=int((clock.t - 0.5) * 1e6))
    nv = Nvml(module=fake, clock=clock)
    assert nv.processes()[0].sm_util == pytest.approx(0.30)
    clock.t += 10  # nothing new for 10 s: the process is idle on the GPU
    assert nv.processes()[0].sm_util == 0.0


def test_process_util_unsupported_is_none():
    fake = FakePynvml(gpus=1)
    fake.gpus[0].processes = [FakeProcess(pid=9, used_memory=GiB)]
    fake.gpus[0].unsupported.add("process_util")
    nv = Nvml(module=fake)
    for _ in range(3):
        (p,) = nv.processes()
        assert p == GpuProcess(gpu_index=0, pid=9, mem_used=GiB, sm_util=None)
    assert fake.calls["nvmlDeviceGetProcessUtilization"] == 1


def test_process_in_compute_and_graphics_listed_once():
    fake = FakePynvml(gpus=1)
    fake.gpus[0].processes = [FakeProcess(pid=5, used_memory=None)]
    fake.gpus[0].graphics_processes = [FakeProcess(pid=5, used_memory=GiB)]
    (p,) = Nvml(module=fake).processes()
    assert p.pid == 5 and p.mem_used == GiB


def test_graphics_unsupported_still_lists_compute():
    fake = FakePynvml(gpus=1)
    fake.gpus[0].processes = [FakeProcess(pid=5)]
    fake.gpus[0].unsupported.add("graphics_processes")
    assert [p.pid for p in Nvml(module=fake).processes()] == [5]


def test_no_processes_is_empty_tuple():
    nv = Nvml(module=FakePynvml(gpus=2))
    assert nv.processes() == ()


def test_pid_util_cache_is_bounded():
    fake = FakePynvml(gpus=1)
    g = fake.gpus[0]
    nv = Nvml(module=fake, clock=FakeClock(10_000.0))
    for pid in range(50):
        g.processes = [FakeProcess(pid=pid)]
        g.add_util_sample(pid=pid, sm=10, ts_us=int(10_000.0 * 1e6) - 1000 + pid)
        nv.processes()
    nv._clock = FakeClock(10_100.0)  # type: ignore[assignment]
    nv.processes()
    assert len(nv._devices[0].pid_util) == 0


# --------------------------------------------------------------------------- real pynvml


def test_real_pynvml_on_this_machine():
    """The real nvidia-ml-py: on a GPU-less box this proves the no-GPU path end to end."""
    nv = Nvml()
    try:
        if nv.status == "ok":  # running on a real GPU machine
            samples = nv.sample()
            assert len(samples) == nv.device_count() > 0
            assert all(isinstance(s, GpuSample) for s in samples)
            assert isinstance(nv.processes(), tuple)
            return
        assert nv.status in ("no-driver", "no-library") or nv.status.startswith("error: ")
        assert nv.status_detail
        assert nv.device_count() == 0
        assert nv.names() == []
        assert nv.sample() == ()
        assert nv.processes() == ()
    finally:
        nv.close()


def test_module_does_not_import_torch_or_textual():
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    code = (
        "import sys; import gputop_dl.collect.nvml.gpus as m; m.Nvml().sample(); "
        "bad = [n for n in ('torch', 'textual') if n in sys.modules]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=root
    )
    assert r.returncode == 0, r.stdout + r.stderr
