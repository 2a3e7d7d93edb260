"""A fake `pynvml` module for tests and benchmarks (no GPU, no driver needed).

Build one and hand it to `gputop_dl.collect.nvml.gpus.Nvml(module=...)`:

    from tests.fakes.nvml import FakeGpu, FakeProcess, FakePynvml

    fake = FakePynvml(gpus=2)                          # two healthy H100s with default readings
    fake.gpus[0].processes = [FakeProcess(pid=4242, used_memory=3 << 30)]
    fake.gpus[0].add_util_sample(pid=4242, sm=87)      # per-process SM util, percent
    fake.gpus[1].unsupported.add("power")              # this field raises NVMLError_NotSupported
    fake.gpus[1].lost = True                           # every per-device call raises GPU_IS_LOST
    fake.gpus[0].raise_in["temperature"] = RuntimeError("boom")   # any exception from a field

    FakePynvml(gpus=0)                                 # NVML works, no devices
    FakePynvml(init_error=FakePynvml.NVML_ERROR_LIBRARY_NOT_FOUND)   # libnvidia-ml.so.1 missing
    FakePynvml(init_error=FakePynvml.NVML_ERROR_DRIVER_NOT_LOADED)
    FakePynvml(event_reasons=False)                    # old pynvml: only ...ThrottleReasons
    FakePynvml(field_ids=False)                        # a pynvml that names no counter field id
    fake.gpus[0].counters["power"] += 2_000_000_000    # 2 s more held down by the power cap (ns)
    fake.gpus[0].pcie_tx_bytes += 5 << 20              # cumulative PCIe bytes (32-bit, wraps)
    fake.gpus[0].unsupported.add("field:hw_thermal")   # that field id answers NOT_SUPPORTED
    fake.clock = clk                                   # timestamps (field values, violations,
                                                       # the energy counter's growth)
    fake.gpus[0].energy_frozen = True                  # the energy counter answers, never moves
    missing_pynvml()                                   # an importer that raises ImportError

Field keys (for `unsupported` / `raise_in`): name, uuid, memory, utilization, temperature, power,
power_limit, sm_clock, clock_reasons, pcie, processes, graphics_processes, process_util,
sm_clock_max, field_values (the whole call), field:<counter> (one field: power, thermal,
sync_boost, board_limit, low_util, reliability, sw_thermal, hw_thermal, hw_power_brake, pcie_tx,
pcie_rx), violation:<reason> (nvmlDeviceGetViolationStatus for one policy), link_gen,
link_width, link_gen_max, link_width_max, cpu_affinity, numa_node, energy.
`fake.calls` counts calls per pynvml function name. The fake is self-contained: it does not need
the real pynvml. Readings are plain attributes on `FakeGpu`; change them between ticks.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from types import SimpleNamespace

GiB = 1 << 30


class NVMLError(Exception):
    """Like pynvml.NVMLError: carries the NVML return code in `.value`."""

    _strings = {
        1: "Uninitialized",
        2: "Invalid Argument",
        3: "Not Supported",
        4: "Insufficient Permissions",
        6: "Not Found",
        9: "Driver Not Loaded",
        12: "NVML Shared Library Not Found",
        13: "Function Not Found",
        15: "GPU is lost",
        16: "GPU requires restart",
        999: "Unknown Error",
    }

    def __init__(self, value: int):
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return self._strings.get(self.value, f"NVML Error with code {self.value}")


class NVMLError_NotSupported(NVMLError):  # noqa: N801 - pynvml's spelling
    def __init__(self, value: int = 3):
        super().__init__(value)


class NVMLError_LibraryNotFound(NVMLError):  # noqa: N801
    def __init__(self, value: int = 12):
        super().__init__(value)


class NVMLError_DriverNotLoaded(NVMLError):  # noqa: N801
    def __init__(self, value: int = 9):
        super().__init__(value)


class NVMLError_GpuIsLost(NVMLError):  # noqa: N801
    def __init__(self, value: int = 15):
        super().__init__(value)


class NVMLError_NotFound(NVMLError):  # noqa: N801
    def __init__(self, value: int = 6):
        super().__init__(value)


_ERROR_CLASSES = {
    3: NVMLError_NotSupported,
    6: NVMLError_NotFound,
    9: NVMLError_DriverNotLoaded,
    12: NVMLError_LibraryNotFound,
    15: NVMLError_GpuIsLost,
}


def nvml_error(code: int) -> NVMLError:
    """The exception real pynvml raises for `code` (a subclass where one exists)."""
    cls = _ERROR_CLASSES.get(code)
    return cls() if cls else NVMLError(code)


@dataclass
class FakeProcess:
    pid: int
    used_memory: int | None = 1 * GiB  # bytes; None = NVML could not tell (WDDM-style)


@dataclass
class FakeGpu:
    """One fake GPU's readings, in NVML's own units."""

    name: str = "NVIDIA H100 80GB HBM3"
    uuid: str = "GPU-00000000-0000-0000-0000-000000000000"
    mem_total: int = 80 * GiB  # bytes
    mem_used: int = 10 * GiB  # bytes, as nvidia-smi shows them (processes' memory)
    # the driver's own reservation: the v1 memory call counts it as used, v2 apart (on an
    # idle H100 with driver 580: 480 MiB, which nvidia-smi does not show as used)
    mem_reserved: int = 0
    util: int = 50  # percent
    mem_util: int = 20  # percent
    temp_c: int = 60
    power_mw: int = 300_000
    power_limit_mw: int = 700_000
    sm_clock_mhz: int = 1980
    clock_reasons: int = 0  # bitmask, nvmlClocksEventReason*
    pcie_tx_kbs: int = 1000  # KB/s
    pcie_rx_kbs: int = 2000  # KB/s
    # GPU clocks and PCIe: cumulative counters in NVML's units (ns held down per
    # reason; bytes, 32-bit like driver 580's, so they wrap at 4 GiB), the link, the CPUs near it
    sm_clock_max_mhz: int = 1980
    counters: dict[str, int] = field(default_factory=lambda: dict.fromkeys(
        ("power", "thermal", "sync_boost", "board_limit", "low_util", "reliability",
         "sw_thermal", "hw_thermal", "hw_power_brake"), 0))
    pcie_tx_bytes: int = 0
    pcie_rx_bytes: int = 0
    pcie_counter_bits: int = 32
    link_gen: int = 5
    link_gen_max: int = 5
    link_width: int = 16
    link_width_max: int = 16
    cpus_near: tuple[int, ...] = tuple(range(16))  # nvmlDeviceGetCpuAffinity's bits
    numa_node: int = 0
    # energy: NVML's counter (mJ since the driver loaded) with its real semantics: it grows by
    # power_mw x the fake clock's seconds between reads, and shows a new value only once per
    # `energy_period_s` (a read sooner gives the last one); `energy_frozen`: a counter that
    # answers but never moves (some virtual GPUs); set `energy_mj` lower for a driver reload;
    # "energy" in `unsupported`: NOT_SUPPORTED (before Volta)
    energy_mj: int = 987_654_321
    energy_period_s: float = 0.1
    energy_frozen: bool = False
    energy_read_t: float | None = None
    energy_shown: tuple[float, int] | None = None  # (clock time, value) of the last update
    processes: list[FakeProcess] = field(default_factory=list)  # compute
    graphics_processes: list[FakeProcess] = field(default_factory=list)
    util_samples: list[SimpleNamespace] = field(default_factory=list)
    unsupported: set[str] = field(default_factory=set)
    raise_in: dict[str, BaseException] = field(default_factory=dict)
    lost: bool = False

    def add_util_sample(self, pid: int, sm: int, mem: int = 0, ts_us: int | None = None) -> None:
        """Queue a per-process utilization sample (percent); ts defaults to now (µs since epoch)."""
        if ts_us is None:
            ts_us = int(time.time() * 1e6)
        self.util_samples.append(
            SimpleNamespace(pid=pid, timeStamp=ts_us, smUtil=sm, memUtil=mem, encUtil=0, decUtil=0)
        )


class _Handle:
    __slots__ = ("index",)

    def __init__(self, index: int):
        self.index = index

    def __repr__(self) -> str:
        return f"<fake nvmlDevice {self.index}>"


class FakePynvml:
    """Module-like object exposing the subset of pynvml that `Nvml` uses."""

    # --- constants (same values as nvidia-ml-py) ---
    NVML_SUCCESS = 0
    NVML_ERROR_UNINITIALIZED = 1
    NVML_ERROR_INVALID_ARGUMENT = 2
    NVML_ERROR_NOT_SUPPORTED = 3
    NVML_ERROR_NO_PERMISSION = 4
    NVML_ERROR_NOT_FOUND = 6
    NVML_ERROR_DRIVER_NOT_LOADED = 9
    NVML_ERROR_LIBRARY_NOT_FOUND = 12
    NVML_ERROR_FUNCTION_NOT_FOUND = 13
    NVML_ERROR_GPU_IS_LOST = 15
    NVML_ERROR_RESET_REQUIRED = 16
    NVML_ERROR_UNKNOWN = 999
    NVML_TEMPERATURE_GPU = 0
    NVML_CLOCK_SM = 1
    NVML_PCIE_UTIL_TX_BYTES = 0
    NVML_PCIE_UTIL_RX_BYTES = 1
    NVML_VALUE_TYPE_DOUBLE = 0
    NVML_VALUE_TYPE_UNSIGNED_INT = 1
    NVML_VALUE_TYPE_UNSIGNED_LONG_LONG = 3
    NVML_PERF_POLICY_POWER = 0
    NVML_PERF_POLICY_THERMAL = 1
    NVML_PERF_POLICY_SYNC_BOOST = 2
    NVML_PERF_POLICY_BOARD_LIMIT = 3
    NVML_PERF_POLICY_LOW_UTILIZATION = 4
    NVML_PERF_POLICY_RELIABILITY = 5
    nvmlMemory_v2 = 0x02000028  # sizeof(c_nvmlMemory_v2_t) | 2 << 24, as nvidia-ml-py has it

    nvmlClocksThrottleReasonGpuIdle = 0x1
    nvmlClocksThrottleReasonApplicationsClocksSetting = 0x2
    nvmlClocksThrottleReasonSwPowerCap = 0x4
    nvmlClocksThrottleReasonHwSlowdown = 0x8
    nvmlClocksThrottleReasonSyncBoost = 0x10
    nvmlClocksThrottleReasonSwThermalSlowdown = 0x20
    nvmlClocksThrottleReasonHwThermalSlowdown = 0x40
    nvmlClocksThrottleReasonHwPowerBrakeSlowdown = 0x80
    nvmlClocksThrottleReasonDisplayClockSetting = 0x100

    NVMLError = NVMLError
    NVMLError_NotSupported = NVMLError_NotSupported
    NVMLError_NotFound = NVMLError_NotFound
    NVMLError_LibraryNotFound = NVMLError_LibraryNotFound
    NVMLError_DriverNotLoaded = NVMLError_DriverNotLoaded
    NVMLError_GpuIsLost = NVMLError_GpuIsLost

    def __init__(
        self,
        gpus: int | list[FakeGpu] = 2,
        *,
        init_error: int | BaseException | None = None,
        driver_version: str = "550.54.15",
        cuda_version: int = 12040,
        event_reasons: bool = True,
        field_ids: bool = True,
    ):
        if isinstance(gpus, int):
            gpus = [
                FakeGpu(uuid=f"GPU-fake-{i:04d}-0000-0000-0000-000000000000") for i in range(gpus)
            ]
        self.gpus: list[FakeGpu] = list(gpus)
        self.init_error = init_error
        self.driver_version = driver_version
        self.cuda_version = cuda_version
        self.initialized = False
        self.init_calls = 0
        self.shutdown_calls = 0
        self.calls: Counter[str] = Counter()
        self.clock = time.time  # timestamps of field values and violation times
        if field_ids:  # nvidia-ml-py's names and ids (its thermal ids: 269-271)
            for name, fid in _FIELD_IDS.items():
                setattr(self, name, fid)
        self._handles = [_Handle(i) for i in range(len(self.gpus))]
        if event_reasons:
            for suffix in (
                "GpuIdle", "ApplicationsClocksSetting", "SwPowerCap", "HwSlowdown", "SyncBoost",
                "SwThermalSlowdown", "HwThermalSlowdown", "HwPowerBrakeSlowdown",
                "DisplayClockSetting",
            ):
                setattr(self, "nvmlClocksEventReason" + suffix,
                        getattr(self, "nvmlClocksThrottleReason" + suffix))
            self.nvmlDeviceGetCurrentClocksEventReasons = self._clock_reasons

    # --- helpers ---
    def _gpu(self, handle: _Handle, key: str, fn: str) -> FakeGpu:
        self.calls[fn] += 1
        if not self.initialized:
            raise nvml_error(self.NVML_ERROR_UNINITIALIZED)
        gpu = self.gpus[handle.index]
        if gpu.lost:
            raise nvml_error(self.NVML_ERROR_GPU_IS_LOST)
        if key in gpu.raise_in:
            raise gpu.raise_in[key]
        if key in gpu.unsupported:
            raise nvml_error(self.NVML_ERROR_NOT_SUPPORTED)
        return gpu

    # --- library ---
    def nvmlInit(self) -> None:
        self.calls["nvmlInit"] += 1
        self.init_calls += 1
        if self.init_error is not None:
            if isinstance(self.init_error, BaseException):
                raise self.init_error
            raise nvml_error(self.init_error)
        self.initialized = True

    def nvmlShutdown(self) -> None:
        self.calls["nvmlShutdown"] += 1
        if not self.initialized:
            raise nvml_error(self.NVML_ERROR_UNINITIALIZED)
        self.shutdown_calls += 1
        self.initialized = False

    def nvmlSystemGetDriverVersion(self) -> str:
        self.calls["nvmlSystemGetDriverVersion"] += 1
        return self.driver_version

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        self.calls["nvmlSystemGetCudaDriverVersion"] += 1
        return self.cuda_version

    def nvmlDeviceGetCount(self) -> int:
        self.calls["nvmlDeviceGetCount"] += 1
        if not self.initialized:
            raise nvml_error(self.NVML_ERROR_UNINITIALIZED)
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> _Handle:
        self.calls["nvmlDeviceGetHandleByIndex"] += 1
        if index >= len(self.gpus):
            raise nvml_error(self.NVML_ERROR_INVALID_ARGUMENT)
        if self.gpus[index].lost:
            raise nvml_error(self.NVML_ERROR_GPU_IS_LOST)
        return self._handles[index]

    # --- static info ---
    def nvmlDeviceGetName(self, h: _Handle) -> str:
        return self._gpu(h, "name", "nvmlDeviceGetName").name

    def nvmlDeviceGetUUID(self, h: _Handle) -> str:
        return self._gpu(h, "uuid", "nvmlDeviceGetUUID").uuid

    def nvmlDeviceGetEnforcedPowerLimit(self, h: _Handle) -> int:
        return self._gpu(h, "power_limit", "nvmlDeviceGetEnforcedPowerLimit").power_limit_mw

    def nvmlDeviceGetPowerManagementLimit(self, h: _Handle) -> int:
        return self._gpu(h, "power_limit", "nvmlDeviceGetPowerManagementLimit").power_limit_mw

    # --- per-tick readings ---
    def nvmlDeviceGetMemoryInfo(self, h: _Handle, version=None):
        """v1 (no version): `used` includes the driver's reservation; v2: apart, as `reserved`
        (field key "memory_v2" makes only the v2 call unsupported, as on an old driver)."""
        if version:
            if version != self.nvmlMemory_v2:
                raise nvml_error(self.NVML_ERROR_INVALID_ARGUMENT)
            g = self._gpu(h, "memory_v2", "nvmlDeviceGetMemoryInfo_v2")
            if "memory" in g.raise_in:
                raise g.raise_in["memory"]
            if "memory" in g.unsupported:
                raise nvml_error(self.NVML_ERROR_NOT_SUPPORTED)
            free = g.mem_total - g.mem_used - g.mem_reserved
            return SimpleNamespace(version=version, total=g.mem_total, reserved=g.mem_reserved,
                                   used=g.mem_used, free=free)
        g = self._gpu(h, "memory", "nvmlDeviceGetMemoryInfo")
        used = g.mem_used + g.mem_reserved
        return SimpleNamespace(total=g.mem_total, used=used, free=g.mem_total - used)

    def nvmlDeviceGetUtilizationRates(self, h: _Handle):
        g = self._gpu(h, "utilization", "nvmlDeviceGetUtilizationRates")
        return SimpleNamespace(gpu=g.util, memory=g.mem_util)

    def nvmlDeviceGetTemperature(self, h: _Handle, sensor: int) -> int:
        return self._gpu(h, "temperature", "nvmlDeviceGetTemperature").temp_c

    def nvmlDeviceGetPowerUsage(self, h: _Handle) -> int:
        return self._gpu(h, "power", "nvmlDeviceGetPowerUsage").power_mw

    def nvmlDeviceGetTotalEnergyConsumption(self, h: _Handle) -> int:
        """mJ since the driver loaded; the value of the last update (every energy_period_s)."""
        g = self._gpu(h, "energy", "nvmlDeviceGetTotalEnergyConsumption")
        t = self.clock()
        if g.energy_read_t is not None and not g.energy_frozen and t > g.energy_read_t:
            g.energy_mj += int(g.power_mw * (t - g.energy_read_t))
        g.energy_read_t = t
        if g.energy_frozen and g.energy_shown is not None:
            return g.energy_shown[1]
        if g.energy_shown is None or t - g.energy_shown[0] >= g.energy_period_s \
                or g.energy_mj < g.energy_shown[1]:
            g.energy_shown = (t, g.energy_mj)
        return g.energy_shown[1]

    def nvmlDeviceGetClockInfo(self, h: _Handle, clock_type: int) -> int:
        return self._gpu(h, "sm_clock", "nvmlDeviceGetClockInfo").sm_clock_mhz

    def _clock_reasons(self, h: _Handle) -> int:
        return self._gpu(h, "clock_reasons", "nvmlDeviceGetCurrentClocksEventReasons").clock_reasons

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, h: _Handle) -> int:
        return self._gpu(
            h, "clock_reasons", "nvmlDeviceGetCurrentClocksThrottleReasons"
        ).clock_reasons

    def nvmlDeviceGetPcieThroughput(self, h: _Handle, counter: int) -> int:
        g = self._gpu(h, "pcie", "nvmlDeviceGetPcieThroughput")
        return g.pcie_tx_kbs if counter == self.NVML_PCIE_UTIL_TX_BYTES else g.pcie_rx_kbs

    # --- GPU clocks, PCIe and NUMA ---
    def nvmlDeviceGetMaxClockInfo(self, h: _Handle, clock_type: int) -> int:
        return self._gpu(h, "sm_clock_max", "nvmlDeviceGetMaxClockInfo").sm_clock_max_mhz

    def nvmlDeviceGetFieldValues(self, h: _Handle, field_ids):
        """One nvmlFieldValue_t-like object per id, each with its own nvmlReturn."""
        g = self._gpu(h, "field_values", "nvmlDeviceGetFieldValues")
        ts = int(self.clock() * 1e6)
        out = []
        for fid in field_ids:
            label = _FIELD_LABELS.get(fid)
            ret, vtype, val = self.NVML_SUCCESS, self.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG, 0
            if label is None or f"field:{label}" in g.unsupported:
                ret = self.NVML_ERROR_NOT_SUPPORTED
            elif label in ("pcie_tx", "pcie_rx"):
                raw = g.pcie_tx_bytes if label == "pcie_tx" else g.pcie_rx_bytes
                val = raw % (1 << g.pcie_counter_bits)
                if g.pcie_counter_bits == 32:
                    vtype = self.NVML_VALUE_TYPE_UNSIGNED_INT
            else:
                val = g.counters.get(label, 0)
            value = SimpleNamespace(dVal=float(val), uiVal=val, ulVal=val, ullVal=val, sllVal=val,
                                    siVal=val, usVal=val)
            out.append(SimpleNamespace(fieldId=fid, scopeId=0, timestamp=ts, latencyUsec=0,
                                       valueType=vtype, nvmlReturn=ret, value=value))
        return out

    def nvmlDeviceGetViolationStatus(self, h: _Handle, policy: int):
        label = _POLICY_LABELS.get(policy, "?")
        g = self._gpu(h, f"violation:{label}", "nvmlDeviceGetViolationStatus")
        if label not in g.counters:
            raise nvml_error(self.NVML_ERROR_INVALID_ARGUMENT)
        return SimpleNamespace(referenceTime=int(self.clock() * 1e6), violationTime=g.counters[label])

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h: _Handle) -> int:
        return self._gpu(h, "link_gen", "nvmlDeviceGetCurrPcieLinkGeneration").link_gen

    def nvmlDeviceGetCurrPcieLinkWidth(self, h: _Handle) -> int:
        return self._gpu(h, "link_width", "nvmlDeviceGetCurrPcieLinkWidth").link_width

    def nvmlDeviceGetMaxPcieLinkGeneration(self, h: _Handle) -> int:
        return self._gpu(h, "link_gen_max", "nvmlDeviceGetMaxPcieLinkGeneration").link_gen_max

    def nvmlDeviceGetMaxPcieLinkWidth(self, h: _Handle) -> int:
        return self._gpu(h, "link_width_max", "nvmlDeviceGetMaxPcieLinkWidth").link_width_max

    def nvmlDeviceGetCpuAffinity(self, h: _Handle, cpu_set_size: int):
        """An array of `cpu_set_size` 64-bit words, CPU 0 in bit 0 of word 0."""
        g = self._gpu(h, "cpu_affinity", "nvmlDeviceGetCpuAffinity")
        words = [0] * cpu_set_size
        for c in g.cpus_near:
            if c // 64 < cpu_set_size:
                words[c // 64] |= 1 << (c % 64)
        return words

    def nvmlDeviceGetNumaNodeId(self, h: _Handle) -> int:
        return self._gpu(h, "numa_node", "nvmlDeviceGetNumaNodeId").numa_node

    # --- processes ---
    @staticmethod
    def _proc_objs(procs: list[FakeProcess]) -> list[SimpleNamespace]:
        return [
            SimpleNamespace(pid=p.pid, usedGpuMemory=p.used_memory, gpuInstanceId=0xFFFFFFFF,
                            computeInstanceId=0xFFFFFFFF)
            for p in procs
        ]

    def nvmlDeviceGetComputeRunningProcesses(self, h: _Handle):
        return self._proc_objs(
            self._gpu(h, "processes", "nvmlDeviceGetComputeRunningProcesses").processes
        )

    def nvmlDeviceGetGraphicsRunningProcesses(self, h: _Handle):
        return self._proc_objs(
            self._gpu(h, "graphics_processes", "nvmlDeviceGetGraphicsRunningProcesses")
            .graphics_processes
        )

    def nvmlDeviceGetProcessUtilization(self, h: _Handle, last_seen_ts: int):
        """Samples newer than `last_seen_ts`; NVML_ERROR_NOT_FOUND when there are none."""
        g = self._gpu(h, "process_util", "nvmlDeviceGetProcessUtilization")
        out = [s for s in g.util_samples if s.timeStamp > last_seen_ts]
        if not out:
            raise nvml_error(self.NVML_ERROR_NOT_FOUND)
        return out


# nvidia-ml-py's field ids (SW_POWER_CAP and SYNC_BOOST are the POWER and SYNC_BOOST policies')
_FIELD_IDS = {
    "NVML_FI_DEV_PERF_POLICY_POWER": 74,
    "NVML_FI_DEV_PERF_POLICY_THERMAL": 75,
    "NVML_FI_DEV_PERF_POLICY_SYNC_BOOST": 76,
    "NVML_FI_DEV_PERF_POLICY_BOARD_LIMIT": 77,
    "NVML_FI_DEV_PERF_POLICY_LOW_UTILIZATION": 78,
    "NVML_FI_DEV_PERF_POLICY_RELIABILITY": 79,
    "NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_POWER_CAP": 74,
    "NVML_FI_DEV_CLOCKS_EVENT_REASON_SYNC_BOOST": 76,
    "NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_THERM_SLOWDOWN": 269,
    "NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_THERM_SLOWDOWN": 270,
    "NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_POWER_BRAKE_SLOWDOWN": 271,
    "NVML_FI_DEV_PCIE_COUNT_TX_BYTES": 197,
    "NVML_FI_DEV_PCIE_COUNT_RX_BYTES": 198,
}
_FIELD_LABELS = {74: "power", 75: "thermal", 76: "sync_boost", 77: "board_limit", 78: "low_util",
                 79: "reliability", 269: "sw_thermal", 270: "hw_thermal", 271: "hw_power_brake",
                 197: "pcie_tx", 198: "pcie_rx"}
_POLICY_LABELS = {0: "power", 1: "thermal", 2: "sync_boost", 3: "board_limit", 4: "low_util",
                  5: "reliability"}


def missing_pynvml():
    """An importer for `Nvml(importer=...)` that behaves as if nvidia-ml-py is not installed."""
    raise ModuleNotFoundError("No module named 'pynvml'", name="pynvml")
