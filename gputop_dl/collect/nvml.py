"""A thin wrapper over nvidia-ml-py (`pynvml`) in which every NVML failure is a value, not an exception.

`Nvml` never raises out of its public methods: a missing library, a missing driver, an unsupported
field or a lost GPU become `status`/`status_detail`, a `None` field, or `GpuSample.error`. UI code
needs no try/except. This module must not import torch or textual.

    nvml = Nvml()                 # or Nvml(module=fake) in tests
    if nvml.status != "ok":
        print(nvml.status_detail)
    gpus = nvml.sample()          # tuple[GpuSample, ...]; () unless status is "ok"
    procs = nvml.processes()      # tuple[GpuProcess, ...]
    nvml.close()

Cost model: `sample()` runs every second for hours. Handles, static info (name, uuid, memory
total, power limit), bound functions and NVML constants are looked up once at init; a field that
NVML reports as not supported is never asked for again; throttle-reason bitmasks are decoded once
per distinct mask; PCIe throughput (two ~20 ms calls on real hardware) is read at most every
`PCIE_INTERVAL_S` per device, staggered across devices, and cached in between.

GPU clocks and PCIe (issue 32): NVML's cumulative counters (clock-event / violation time per
reason, in ns, and PCIe bytes) are read in one `nvmlDeviceGetFieldValues` call per device (about
1.3-1.6 ms on an H100 with driver 580), on the first tick, again `FIRST_DELTA_S` later (so a
one-shot snapshot has a first share) and then every `COUNTER_INTERVAL_S`, with the PCIe reads'
stagger; in between the last shares are reported. Field ids are looked up by name in the module
(a name it lacks = that counter is not read); a field the device refuses is never asked again,
and a throttle reason with no field falls back to `nvmlDeviceGetViolationStatus` by policy. The
link's current generation and width are read with the counters; its maximum, the SM clock's
maximum, the CPUs near the GPU (`nvmlDeviceGetCpuAffinity`) and its NUMA node once, at init.

Summing `processes()` per PID for the job rows is `collect/gpu_use.py`'s `GpuUse`.
"""

from __future__ import annotations

import functools
import importlib
import os
import time
from typing import Any, Callable

from gputop_dl.snapshot import GpuProcess, GpuSample
from gputop_dl.text.cpulist import format_cpulist, mask_words_to_cpus

__all__ = ["COUNTER_INTERVAL_S", "Nvml", "PCIE_INTERVAL_S", "PROC_UTIL_WINDOW_S",
           "REASON_LABELS", "THROTTLE_LABELS"]

PCIE_INTERVAL_S = 5.0  # PCIe throughput is re-read at most this often per device
COUNTER_INTERVAL_S = 5.0  # clock-event and PCIe counters and the link state, per device
FIRST_DELTA_S = 0.5  # the counters' second read comes this soon (a first share for --once)
PROC_UTIL_WINDOW_S = 2.0  # per-process SM samples older than this count as "idle" (0.0)

# NVML return codes from nvml.h; used only where the module lacks the constant (a minimal fake).
_DEFAULT_CODES = {
    "NVML_SUCCESS": 0,
    "NVML_ERROR_UNINITIALIZED": 1,
    "NVML_ERROR_NOT_SUPPORTED": 3,
    "NVML_ERROR_NOT_FOUND": 6,
    "NVML_ERROR_DRIVER_NOT_LOADED": 9,
    "NVML_ERROR_LIBRARY_NOT_FOUND": 12,
    "NVML_ERROR_FUNCTION_NOT_FOUND": 13,
    "NVML_ERROR_GPU_IS_LOST": 15,
    "NVML_ERROR_RESET_REQUIRED": 16,
    "NVML_TEMPERATURE_GPU": 0,
    "NVML_CLOCK_SM": 1,
    "NVML_PCIE_UTIL_TX_BYTES": 0,
    "NVML_PCIE_UTIL_RX_BYTES": 1,
}

# Clock event ("throttle") reasons: (pynvml constant suffix, short label, bit if the module lacks it).
# Bits without a fallback are decoded only when the module defines them.
_REASONS: tuple[tuple[str, str, int | None], ...] = (
    ("GpuIdle", "idle", 0x1),
    ("ApplicationsClocksSetting", "app_clocks", 0x2),
    ("SwPowerCap", "sw_power_cap", 0x4),
    ("HwSlowdown", "hw_slowdown", 0x8),
    ("SyncBoost", "sync_boost", 0x10),
    ("SwThermalSlowdown", "sw_thermal_slowdown", 0x20),
    ("HwThermalSlowdown", "hw_thermal_slowdown", 0x40),
    ("HwPowerBrakeSlowdown", "power_brake", 0x80),
    ("DisplayClockSetting", "display_clocks", 0x100),
    ("BoardLimit", "board_limit", None),
    ("Reliability", "reliability", None),
)

REASON_LABELS = tuple(label for _, label, _ in _REASONS)  # every label `sample()` can report

# Cumulative throttle counters (ns): (reason, field-id constant names tried in order, violation
# policy constant of the fallback). SW_POWER_CAP and SYNC_BOOST are the POWER and SYNC_BOOST
# policies' ids; the thermal reasons' ids differ between headers (251-253 or 269-271): nvidia-ml-py's
# own names are used, and a device that refuses an id falls back to the policy, where there is one.
_THROTTLE: tuple[tuple[str, tuple[str, ...], str | None], ...] = (
    ("power", ("NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_POWER_CAP", "NVML_FI_DEV_PERF_POLICY_POWER"),
     "NVML_PERF_POLICY_POWER"),
    ("thermal", ("NVML_FI_DEV_PERF_POLICY_THERMAL",), "NVML_PERF_POLICY_THERMAL"),
    ("sync_boost", ("NVML_FI_DEV_CLOCKS_EVENT_REASON_SYNC_BOOST",
                    "NVML_FI_DEV_PERF_POLICY_SYNC_BOOST"), "NVML_PERF_POLICY_SYNC_BOOST"),
    ("board_limit", ("NVML_FI_DEV_PERF_POLICY_BOARD_LIMIT",), "NVML_PERF_POLICY_BOARD_LIMIT"),
    ("low_util", ("NVML_FI_DEV_PERF_POLICY_LOW_UTILIZATION",), "NVML_PERF_POLICY_LOW_UTILIZATION"),
    ("reliability", ("NVML_FI_DEV_PERF_POLICY_RELIABILITY",), "NVML_PERF_POLICY_RELIABILITY"),
    ("sw_thermal", ("NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_THERM_SLOWDOWN",), None),
    ("hw_thermal", ("NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_THERM_SLOWDOWN",), None),
    ("hw_power_brake", ("NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_POWER_BRAKE_SLOWDOWN",), None),
)
THROTTLE_LABELS = tuple(label for label, _, _ in _THROTTLE)
_PCIE_COUNTERS = (("pcie_tx", "NVML_FI_DEV_PCIE_COUNT_TX_BYTES"),
                  ("pcie_rx", "NVML_FI_DEV_PCIE_COUNT_RX_BYTES"))
# nvmlValueType_t -> how to read the union and the counter's width (for wrapping); driver 580 on
# an H100 gives the PCIe byte counters as 32-bit unsigned ints and the throttle ones as 64-bit
_VALUE_TYPES = {0: ("dVal", 0), 1: ("uiVal", 32), 2: ("ulVal", 64), 3: ("ullVal", 64),
                4: ("sllVal", 0), 5: ("siVal", 0), 6: ("usVal", 16)}

# Per-device field flags (a bitmask of fields NVML said it will never answer).
_F_MEM = 1 << 0
_F_UTIL = 1 << 1
_F_TEMP = 1 << 2
_F_POWER = 1 << 3
_F_CLOCK = 1 << 4
_F_REASONS = 1 << 5
_F_PCIE = 1 << 6
_F_PROCS = 1 << 7
_F_GPROCS = 1 << 8
_F_PUTIL = 1 << 9
_F_MEM_V2 = 1 << 10
_F_FIELDS = 1 << 11
_F_LINK_GEN = 1 << 12
_F_LINK_WIDTH = 1 << 13
_F_VIOLATION = 1 << 14


class _NeverRaised(Exception):
    """Stands in for NVMLError when the module has none, so `except` clauses stay valid."""


class _GpuGone(Exception):
    """Internal: the device is lost / needs a reset; abandon it for this tick."""


class _Device:
    __slots__ = (
        "index", "handle", "name", "uuid", "mem_total", "power_limit_w", "error",
        "unsupported", "pcie_next", "pcie_phase", "pcie_tx", "pcie_rx",
        "util_last_ts", "pid_util", "failed",
        "clock_max", "link_gen_max", "link_width_max", "cpu_affinity", "numa_node",
        "ctr_next", "ctr_reads", "fields", "violations", "ctr_last", "throttle", "link_gen", "link_width",
        "pcie_tx_bps", "pcie_rx_bps", "pcie_point", "slow",
    )

    def __init__(self, index: int):
        self.index = index
        self.handle: Any = None
        self.name: str | None = None
        self.uuid: str | None = None
        self.mem_total: int | None = None
        self.power_limit_w: float | None = None
        self.error: str | None = None
        self.unsupported = 0
        self.pcie_next = 0.0  # clock() time of the next PCIe read; 0 = read on the first tick
        self.pcie_phase = 0.0  # stagger offset so devices do not all read PCIe on the same tick
        self.pcie_tx: int | None = None
        self.pcie_rx: int | None = None
        self.util_last_ts = 0  # NVML last-seen timestamp (µs) for nvmlDeviceGetProcessUtilization
        self.pid_util: dict[int, tuple[float, int]] = {}  # pid -> (sm 0..1, newest sample ts µs)
        self.failed: GpuSample | None = None  # the sample to report when there is no handle
        self.clock_max: int | None = None  # static, read at init
        self.link_gen_max: int | None = None
        self.link_width_max: int | None = None
        self.cpu_affinity: str | None = None
        self.numa_node: int | None = None
        self.ctr_next = 0.0  # clock() time of the next counter read; 0 = on the first tick
        self.ctr_reads = 0
        self.fields: dict[int, str] = {}  # field id -> counter name, still asked for
        self.violations: dict[str, int] = {}  # reason -> policy, read by nvmlDeviceGetViolationStatus
        self.ctr_last: dict[str, tuple[int, int, int]] = {}  # name -> (value, timestamp µs, bits)
        self.throttle: tuple[tuple[str, float | None], ...] = ()
        self.link_gen: int | None = None
        self.link_width: int | None = None
        self.pcie_tx_bps: int | None = None  # from the byte counters
        self.pcie_rx_bps: int | None = None
        self.pcie_point = True  # read nvmlDeviceGetPcieThroughput (no 64-bit byte counters)
        self.slow: dict[str, Any] = {}  # GpuSample fields that change only on the slow reads


def _text(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return str(v)


_SAMPLE_DEFAULTS = dict(GpuSample(0).__dict__)
_new_sample = object.__new__


def _rate(old: tuple[int, int, int] | None, new: tuple[int, int, int] | None, scale: float,
          clip: bool = True) -> float | None:
    """(new - old) * scale per second of the readings' timestamps (µs); a counter of `bits`
    bits wraps (modular delta); None on a first reading, a reset or no time passed. `clip`:
    a share, held to 0..1."""
    if old is None or new is None:
        return None
    dt_us = new[1] - old[1]
    if dt_us <= 0:
        return None
    delta = new[0] - old[0]
    if delta < 0:
        if new[2] not in (16, 32):
            return None  # a 64-bit counter that went back: reset (driver reload), not a wrap
        delta %= 1 << new[2]
    r = delta * scale / (dt_us / 1e6)
    return min(max(r, 0.0), 1.0) if clip else r


def _import_pynvml() -> Any:
    return importlib.import_module("pynvml")


class Nvml:
    """NVML, with every failure turned into a value. See the module docstring.

    Arguments:
      module:   a pynvml-like module or object (tests inject `tests.fakes.nvml.FakePynvml`).
                Default: `import pynvml` at construction.
      importer: zero-argument callable returning the module, used when `module` is None
                (tests pass one that raises ImportError to exercise "no-library").
      clock:    wall-clock seconds (default `time.time`); schedules PCIe reads and ages
                per-process utilization samples, whose NVML timestamps are wall-clock µs.
    """

    status: str
    status_detail: str
    driver_version: str | None
    cuda_driver_version: str | None

    def __init__(
        self,
        module: Any = None,
        *,
        importer: Callable[[], Any] | None = None,
        clock: Callable[[], float] = time.time,
    ):
        self.status = "error: not initialised"
        self.status_detail = "NVML was not initialised."
        self.driver_version = None
        self.cuda_driver_version = None
        self._m: Any = None
        self._devices: tuple[_Device, ...] = ()
        self._initialized = False
        self._clock = clock
        self._reason_cache: dict[int, tuple[str, ...]] = {}
        try:
            self._start(module, importer)
        except Exception as e:  # noqa: BLE001 - never raise out of the constructor
            self._fail(f"error: {type(e).__name__}: {e}",
                       f"NVML could not be started ({type(e).__name__}: {e}); GPU panels are empty.")

    # ------------------------------------------------------------------ init
    def _fail(self, status: str, detail: str) -> None:
        self.status = status
        self.status_detail = detail
        self._devices = ()

    def _start(self, module: Any, importer: Callable[[], Any] | None) -> None:
        if module is None:
            try:
                module = (importer or _import_pynvml)()
            except ImportError as e:
                self._fail(
                    "no-library",
                    "No GPU monitoring: the nvidia-ml-py package (pynvml) is not installed "
                    f"({e}); install it with `pip install nvidia-ml-py`.",
                )
                return
        m = self._m = module
        err = getattr(m, "NVMLError", None)
        self._nvml_error: type[BaseException] = (
            err if isinstance(err, type) and issubclass(err, BaseException) else _NeverRaised
        )

        def const(name: str) -> Any:
            return getattr(m, name, _DEFAULT_CODES[name])

        self._ok_code = const("NVML_SUCCESS")
        self._not_found = const("NVML_ERROR_NOT_FOUND")
        self._lost_codes = {
            const("NVML_ERROR_GPU_IS_LOST"): "GPU is lost",
            const("NVML_ERROR_RESET_REQUIRED"): "GPU requires a reset",
        }
        # Codes after which asking again is pointless: the field is gone for this device.
        self._permanent_codes = frozenset(
            (const("NVML_ERROR_NOT_SUPPORTED"), const("NVML_ERROR_FUNCTION_NOT_FOUND"))
        )
        no_driver_codes = {
            const("NVML_ERROR_LIBRARY_NOT_FOUND"): "libnvidia-ml.so.1 not found",
            const("NVML_ERROR_DRIVER_NOT_LOADED"): "the kernel driver is not running",
        }
        self._temp_sensor = const("NVML_TEMPERATURE_GPU")
        self._clock_sm = const("NVML_CLOCK_SM")
        self._pcie_tx_counter = const("NVML_PCIE_UTIL_TX_BYTES")
        self._pcie_rx_counter = const("NVML_PCIE_UTIL_RX_BYTES")

        try:
            m.nvmlInit()
        except self._nvml_error as e:
            code = getattr(e, "value", None)
            if code in no_driver_codes:
                self._fail(
                    "no-driver",
                    "No NVIDIA GPU: the NVIDIA driver is not loaded "
                    f"({no_driver_codes[code]}); workloads train on the CPU.",
                )
            else:
                self._fail(f"error: {e}", f"NVML failed to start ({e}); GPU panels are empty.")
            return
        self._initialized = True

        self.driver_version = _text(self._call_static(getattr(m, "nvmlSystemGetDriverVersion", None)))
        cuda = self._call_static(getattr(m, "nvmlSystemGetCudaDriverVersion", None))
        if isinstance(cuda, int) and cuda > 0:
            self.cuda_driver_version = f"{cuda // 1000}.{(cuda % 1000) // 10}"

        try:
            count = int(m.nvmlDeviceGetCount())
        except self._nvml_error as e:
            self._fail(f"error: {e}", f"NVML could not count GPUs ({e}); GPU panels are empty.")
            return
        if count <= 0:
            self._fail("no-devices", "No NVIDIA GPU: NVML found no devices; workloads train on the CPU.")
            self.close()
            return

        # Bound functions, looked up once. A missing function means the field is always None.
        f = lambda name: getattr(m, name, None)  # noqa: E731
        self._fn_mem = f("nvmlDeviceGetMemoryInfo")
        # v2 keeps the driver's reservation out of `used`, as nvidia-smi does (the v1 call
        # counts it: 480 MiB "used" on an idle H100 with driver 580); v1 where v2 is missing
        v2 = getattr(m, "nvmlMemory_v2", None)
        self._fn_mem_v2 = (None if self._fn_mem is None or v2 is None
                           else functools.partial(self._fn_mem, version=v2))
        self._fn_util = f("nvmlDeviceGetUtilizationRates")
        self._fn_temp = f("nvmlDeviceGetTemperature")
        self._fn_power = f("nvmlDeviceGetPowerUsage")
        self._fn_clock = f("nvmlDeviceGetClockInfo")
        self._fn_reasons = f("nvmlDeviceGetCurrentClocksEventReasons")
        self._fn_reasons_old = f("nvmlDeviceGetCurrentClocksThrottleReasons")
        if self._fn_reasons is None:
            self._fn_reasons, self._fn_reasons_old = self._fn_reasons_old, None
        self._fn_pcie = f("nvmlDeviceGetPcieThroughput")
        self._fn_cprocs = f("nvmlDeviceGetComputeRunningProcesses")
        self._fn_gprocs = f("nvmlDeviceGetGraphicsRunningProcesses")
        self._fn_putil = f("nvmlDeviceGetProcessUtilization")
        self._reason_bits = self._reason_table(m)
        self._fn_fields = f("nvmlDeviceGetFieldValues")
        self._fn_violation = f("nvmlDeviceGetViolationStatus")
        self._fn_link_gen = f("nvmlDeviceGetCurrPcieLinkGeneration")
        self._fn_link_width = f("nvmlDeviceGetCurrPcieLinkWidth")
        self._invalid_arg = getattr(m, "NVML_ERROR_INVALID_ARGUMENT", 2)
        self._field_ids, self._violation_policies = self._counter_table(m)

        devices = []
        for i in range(count):
            d = _Device(i)
            d.pcie_phase = PCIE_INTERVAL_S * i / count
            self._init_device(d)
            devices.append(d)
        self._devices = tuple(devices)

        self.status = "ok"
        names: dict[str, int] = {}
        for d in devices:
            key = d.name or "unknown GPU"
            names[key] = names.get(key, 0) + 1
        what = ", ".join(f"{n} x {name}" if n > 1 else name for name, n in names.items())
        extras = []
        if self.driver_version:
            extras.append(f"driver {self.driver_version}")
        if self.cuda_driver_version:
            extras.append(f"CUDA {self.cuda_driver_version}")
        self.status_detail = (
            f"{count} NVIDIA GPU{'s' if count != 1 else ''}: {what}"
            + (f" ({', '.join(extras)})" if extras else "")
            + "."
        )

    def _call_static(self, fn: Callable[..., Any] | None, *args: Any) -> Any:
        """Init-time read: any NVML error (or missing function) -> None."""
        if fn is None:
            return None
        try:
            return fn(*args)
        except self._nvml_error:
            return None

    def _reason_table(self, m: Any) -> tuple[tuple[int, str], ...]:
        bits = []
        for suffix, label, fallback in _REASONS:
            bit = getattr(m, "nvmlClocksEventReason" + suffix,
                          getattr(m, "nvmlClocksThrottleReason" + suffix, fallback))
            if isinstance(bit, int) and bit > 0 and all(bit != b for b, _ in bits):
                bits.append((bit, label))
        return tuple(bits)

    def _counter_table(self, m: Any) -> tuple[dict[int, str], dict[str, int]]:
        """Field id -> counter name for the ids the module names (first name found wins), and
        reason -> violation policy for the reasons with a policy constant."""
        fields: dict[int, str] = {}
        if self._fn_fields is not None:
            for label, names, _ in _THROTTLE:
                for name in names:
                    fid = getattr(m, name, None)
                    if isinstance(fid, int) and fid not in fields:
                        fields[fid] = label
                        break
            for label, name in _PCIE_COUNTERS:
                fid = getattr(m, name, None)
                if isinstance(fid, int) and fid not in fields:
                    fields[fid] = label
        policies: dict[str, int] = {}
        if self._fn_violation is not None:
            for label, _, policy in _THROTTLE:
                pid = getattr(m, policy, None) if policy else None
                if isinstance(pid, int):
                    policies[label] = pid
        return fields, policies

    def _init_links(self, d: _Device, h: Any) -> None:
        """Static per-device facts: the SM clock's and the PCIe link's maxima, the CPUs near it."""
        m = self._m
        clk = self._call_static(getattr(m, "nvmlDeviceGetMaxClockInfo", None), h, self._clock_sm)
        d.clock_max = int(clk) if isinstance(clk, int) and clk > 0 else None
        gen = self._call_static(getattr(m, "nvmlDeviceGetMaxPcieLinkGeneration", None), h)
        d.link_gen_max = int(gen) if isinstance(gen, int) and gen > 0 else None
        width = self._call_static(getattr(m, "nvmlDeviceGetMaxPcieLinkWidth", None), h)
        d.link_width_max = int(width) if isinstance(width, int) and width > 0 else None
        words = max(1, ((os.cpu_count() or 1) + 63) // 64)
        aff = self._call_static(getattr(m, "nvmlDeviceGetCpuAffinity", None), h, words)
        if aff is not None:
            try:
                cpus = mask_words_to_cpus(list(aff))
            except (TypeError, ValueError):
                cpus = frozenset()
            d.cpu_affinity = format_cpulist(cpus) or None
        node = self._call_static(getattr(m, "nvmlDeviceGetNumaNodeId", None), h)
        d.numa_node = int(node) if isinstance(node, int) and node >= 0 else None
        d.fields = dict(self._field_ids)
        d.violations = {r: p for r, p in self._violation_policies.items()
                        if r not in d.fields.values()}

    def _init_device(self, d: _Device) -> None:
        m = self._m
        try:
            h = m.nvmlDeviceGetHandleByIndex(d.index)
        except Exception as e:  # noqa: BLE001
            code = getattr(e, "value", None)
            d.error = self._lost_codes.get(code) or f"no handle: {e}"
            d.failed = GpuSample(d.index, error=d.error)
            return
        try:
            d.name = _text(self._call_static(getattr(m, "nvmlDeviceGetName", None), h))
            d.uuid = _text(self._call_static(getattr(m, "nvmlDeviceGetUUID", None), h))
            mem = self._call_static(self._fn_mem, h)
            if mem is not None:
                d.mem_total = int(mem.total)
            limit = self._call_static(getattr(m, "nvmlDeviceGetEnforcedPowerLimit", None), h)
            if limit is None:
                limit = self._call_static(getattr(m, "nvmlDeviceGetPowerManagementLimit", None), h)
            if limit is not None:
                d.power_limit_w = limit / 1000.0
            # Old drivers lack the "event reasons" entry point: fall back to "throttle reasons".
            if self._fn_reasons_old is not None and self._fn_reasons is not None:
                try:
                    self._fn_reasons(h)
                except self._nvml_error as e:
                    if getattr(e, "value", None) in self._permanent_codes:
                        self._fn_reasons, self._fn_reasons_old = self._fn_reasons_old, None
            self._init_links(d, h)
        except Exception as e:  # noqa: BLE001 - a broken device must not break the others
            d.error = f"{type(e).__name__}: {e}"
            d.failed = GpuSample(d.index, d.name, d.uuid, error=d.error)
            return
        d.handle = h

    # ------------------------------------------------------------------ public
    def device_count(self) -> int:
        """Number of GPUs NVML reported (0 unless status is "ok")."""
        return len(self._devices) if self.status == "ok" else 0

    def names(self) -> list[str]:
        """GPU names in index order ("GPU <i>" where NVML gave none)."""
        return [d.name or f"GPU {d.index}" for d in self._devices]

    def sample(self) -> tuple[GpuSample, ...]:
        """One GpuSample per GPU, in index order; () unless status is "ok". Never raises."""
        devices = self._devices
        if not devices:
            return ()
        try:
            now = self._clock()
        except Exception:  # noqa: BLE001
            now = time.time()
        one = self._sample_one
        return tuple([one(d, now) for d in devices])

    def processes(self) -> tuple[GpuProcess, ...]:
        """Compute and graphics processes on all GPUs, with per-process SM utilization (0..1)
        where NVML gives it. A process with no utilization sample in the last
        `PROC_UTIL_WINDOW_S` seconds on a GPU that reports them gets 0.0 (it did not run
        kernels); sm_util is None where the GPU does not report them. Never raises."""
        devices = self._devices
        if not devices:
            return ()
        try:
            now_us = int(self._clock() * 1_000_000)
        except Exception:  # noqa: BLE001
            now_us = int(time.time() * 1_000_000)
        out: list[GpuProcess] = []
        for d in devices:
            if d.handle is None:
                continue
            try:
                procs = self._processes_one(d, now_us)
            except Exception:  # noqa: BLE001 - lost GPU or anything else: skip this device
                continue
            if procs:
                out.extend(procs)
        return tuple(out)

    def close(self) -> None:
        """Shut NVML down (idempotent). Afterwards sample() and processes() return ()."""
        self._devices = ()
        if self._initialized:
            self._initialized = False
            try:
                self._m.nvmlShutdown()
            except Exception:  # noqa: BLE001
                pass

    def __enter__(self) -> Nvml:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Nvml status={self.status!r} devices={len(self._devices)}>"

    # ------------------------------------------------------------------ per tick
    def _read(self, d: _Device, flag: int, fn: Callable[..., Any] | None, *args: Any) -> Any:
        """One NVML field: None if unsupported/failed; raises _GpuGone if the GPU is lost."""
        if fn is None or d.unsupported & flag:
            return None
        try:
            return fn(*args)
        except self._nvml_error as e:
            code = getattr(e, "value", None)
            lost = self._lost_codes.get(code)
            if lost is not None:
                raise _GpuGone(lost) from None
            if code in self._permanent_codes:
                d.unsupported |= flag
            return None

    def _sample_one(self, d: _Device, now: float) -> GpuSample:
        h = d.handle
        if h is None:
            return d.failed  # type: ignore[return-value]
        read = self._read
        try:
            mem_used = None
            mem_total = d.mem_total
            mem = read(d, _F_MEM_V2, self._fn_mem_v2, h)
            if mem is None:
                mem = read(d, _F_MEM, self._fn_mem, h)
            if mem is not None:
                mem_used = int(mem.used)
                mem_total = int(mem.total)

            util = mem_util = None
            u = read(d, _F_UTIL, self._fn_util, h)
            if u is not None:
                util = u.gpu / 100.0
                mem_util = u.memory / 100.0

            temp = read(d, _F_TEMP, self._fn_temp, h, self._temp_sensor)
            power = read(d, _F_POWER, self._fn_power, h)
            clock = read(d, _F_CLOCK, self._fn_clock, h, self._clock_sm)

            reasons: tuple[str, ...] = ()
            mask = read(d, _F_REASONS, self._fn_reasons, h)
            if mask:
                reasons = self._reason_cache.get(mask) or self._decode_reasons(mask)

            slow = False
            if d.pcie_point and (now >= d.pcie_next or d.pcie_next - now > 3 * PCIE_INTERVAL_S):
                self._read_pcie(d, h, now)  # first: the counters' wrap check uses it
                slow = True
            if now >= d.ctr_next or d.ctr_next - now > 3 * COUNTER_INTERVAL_S:
                self._read_counters(d, h, now)
                slow = True
            if slow or not d.slow:
                self._refresh_slow(d)

            # the sample without __init__ (as snapshot.evolve): the fields that change only
            # when the slow reads run come from d.slow; ~1 µs a GPU less than the constructor
            out = _new_sample(GpuSample)
            f = out.__dict__
            f.update(d.slow)
            f["util"] = util
            f["mem_util"] = mem_util
            f["mem_used"] = mem_used
            f["mem_total"] = mem_total
            f["temp_c"] = float(temp) if temp is not None else None
            f["power_w"] = power / 1000.0 if power is not None else None
            f["sm_clock_mhz"] = int(clock) if clock is not None else None
            f["throttle_reasons"] = reasons
            return out
        except _GpuGone as e:
            d.pcie_tx = d.pcie_rx = d.pcie_tx_bps = d.pcie_rx_bps = None
            d.ctr_last, d.throttle, d.ctr_next, d.ctr_reads, d.slow = {}, (), 0.0, 0, {}
            return GpuSample(d.index, d.name, d.uuid, error=str(e))
        except Exception as e:  # noqa: BLE001 - never raise out of sample()
            return GpuSample(d.index, d.name, d.uuid, error=f"{type(e).__name__}: {e}")

    @staticmethod
    def _refresh_slow(d: _Device) -> None:
        """d.slow: every GpuSample field but the per-tick readings, after a slow read."""
        tx_bps, rx_bps = d.pcie_tx_bps, d.pcie_rx_bps
        if tx_bps is None and d.pcie_tx is not None:
            tx_bps = d.pcie_tx * 1024
        if rx_bps is None and d.pcie_rx is not None:
            rx_bps = d.pcie_rx * 1024
        d.slow = dict(
            _SAMPLE_DEFAULTS, index=d.index, name=d.name, uuid=d.uuid,
            power_limit_w=d.power_limit_w, pcie_tx_kbs=d.pcie_tx, pcie_rx_kbs=d.pcie_rx,
            sm_clock_max_mhz=d.clock_max, throttle=d.throttle, pcie_tx_bytes_per_s=tx_bps,
            pcie_rx_bytes_per_s=rx_bps, pcie_link_gen=d.link_gen,
            pcie_link_gen_max=d.link_gen_max, pcie_link_width=d.link_width,
            pcie_link_width_max=d.link_width_max, cpu_affinity=d.cpu_affinity,
            numa_node=d.numa_node)

    def _read_pcie(self, d: _Device, h: Any, now: float) -> None:
        first = d.pcie_next == 0.0
        d.pcie_next = now + PCIE_INTERVAL_S + (d.pcie_phase if first else 0.0)
        fn = self._fn_pcie
        tx = self._read(d, _F_PCIE, fn, h, self._pcie_tx_counter)
        rx = self._read(d, _F_PCIE, fn, h, self._pcie_rx_counter)
        d.pcie_tx = int(tx) if tx is not None else None
        d.pcie_rx = int(rx) if rx is not None else None

    def _read_counters(self, d: _Device, h: Any, now: float) -> None:
        """The cumulative counters: throttle shares and PCIe bytes/s since the previous read."""
        d.ctr_reads += 1
        d.ctr_next = now + (FIRST_DELTA_S if d.ctr_reads == 1 else
                            COUNTER_INTERVAL_S + (d.pcie_phase if d.ctr_reads == 2 else 0.0))
        now_us = int(now * 1_000_000)
        new: dict[str, tuple[int, int, int]] = {}
        if d.fields:
            vals = self._read(d, _F_FIELDS, self._fn_fields, h, list(d.fields))
            if vals is not None:
                for v in vals:
                    self._field(d, v, now_us, new)
            elif d.unsupported & _F_FIELDS:  # no field values on this device: policies only
                for label in d.fields.values():
                    if label in self._violation_policies:
                        d.violations[label] = self._violation_policies[label]
                d.fields = {}
        for label, policy in list(d.violations.items()):
            try:
                vt = self._fn_violation(h, policy) if self._fn_violation else None
            except self._nvml_error as e:
                code = getattr(e, "value", None)
                if code in self._lost_codes:
                    raise _GpuGone(self._lost_codes[code]) from None
                if code in self._permanent_codes or code == self._invalid_arg:
                    del d.violations[label]
                continue
            if vt is not None:
                ts = int(getattr(vt, "referenceTime", 0) or 0) or now_us
                new[label] = (int(vt.violationTime), ts, 64)
        old = d.ctr_last
        shares: list[tuple[str, float | None]] = []
        have = set(new).union(d.violations, d.fields.values())
        for label in THROTTLE_LABELS:
            if label in have:
                shares.append((label, _rate(old.get(label), new.get(label), 1e-9)))
        d.throttle = tuple(shares)
        for label in ("pcie_tx", "pcie_rx"):
            bps = _rate(old.get(label), new.get(label), 1.0, clip=False)
            point = d.pcie_tx if label == "pcie_tx" else d.pcie_rx
            o, n = old.get(label), new.get(label)
            if bps is not None and o is not None and n is not None and n[2] == 32 and point:
                # a 32-bit counter wraps every 4 GiB: where the point sample says more than
                # half of that passed since the last read, the wrapped delta cannot be trusted
                if point * 1024 * max(n[1] - o[1], 1) / 1e6 >= 2**31:
                    bps = point * 1024.0
            if label == "pcie_tx":
                d.pcie_tx_bps = None if bps is None else int(bps)
            else:
                d.pcie_rx_bps = None if bps is None else int(bps)
        bits = [new[k][2] for k in ("pcie_tx", "pcie_rx") if k in new]
        d.pcie_point = not (len(bits) == 2 and min(bits) >= 64)
        if not d.pcie_point and d.pcie_tx_bps is not None:
            d.pcie_tx = d.pcie_rx = None  # 64-bit counters: the point sample is not read again
        d.ctr_last = new
        gen = self._read(d, _F_LINK_GEN, self._fn_link_gen, h)
        width = self._read(d, _F_LINK_WIDTH, self._fn_link_width, h)
        d.link_gen = int(gen) if isinstance(gen, int) and gen > 0 else None
        d.link_width = int(width) if isinstance(width, int) and width > 0 else None

    def _field(self, d: _Device, v: Any, now_us: int, new: dict[str, tuple[int, int, int]]) -> None:
        """One nvmlFieldValue_t into `new` (name -> value, timestamp µs, bits); a field the device
        refuses for good is dropped (a throttle reason then falls back to its policy)."""
        label = d.fields.get(v.fieldId)
        if label is None:
            return
        ret = v.nvmlReturn
        if ret != self._ok_code:
            if ret in self._lost_codes:
                raise _GpuGone(self._lost_codes[ret])
            if ret in self._permanent_codes or ret == self._invalid_arg:
                del d.fields[v.fieldId]
                policy = self._violation_policies.get(label)
                if policy is not None and label not in d.fields.values():
                    d.violations[label] = policy
            return
        attr, bits = _VALUE_TYPES.get(v.valueType, ("ullVal", 64))
        if bits == 0:
            return  # a signed or floating value is no counter
        new[label] = (getattr(v.value, attr), v.timestamp or now_us, bits)

    def _decode_reasons(self, mask: int) -> tuple[str, ...]:
        labels = []
        rest = mask
        for bit, label in self._reason_bits:
            if mask & bit:
                labels.append(label)
                rest &= ~bit
        if rest:
            labels.append(f"other:{rest:#x}")
        out = tuple(labels)
        if len(self._reason_cache) < 4096:  # bounded even against garbage masks
            self._reason_cache[mask] = out
        return out

    def _processes_one(self, d: _Device, now_us: int) -> list[GpuProcess]:
        h = d.handle
        compute = self._read(d, _F_PROCS, self._fn_cprocs, h)
        graphics = self._read(d, _F_GPROCS, self._fn_gprocs, h)
        if not compute and not graphics:
            return []
        sm = self._process_util(d, h, now_us)
        cutoff = now_us - int(PROC_UTIL_WINDOW_S * 1_000_000)
        mem_by_pid: dict[int, int | None] = {}
        for group in (compute, graphics):
            for p in group or ():
                pid = int(p.pid)
                mem = getattr(p, "usedGpuMemory", None)
                mem = int(mem) if mem is not None else None
                if pid in mem_by_pid:
                    old = mem_by_pid[pid]
                    if mem is not None and (old is None or mem > old):
                        mem_by_pid[pid] = mem
                else:
                    mem_by_pid[pid] = mem
        out = []
        for pid, mem in mem_by_pid.items():
            util: float | None = None
            if sm is not None:
                entry = sm.get(pid)
                util = entry[0] if entry is not None and entry[1] >= cutoff else 0.0
            out.append(GpuProcess(gpu_index=d.index, pid=pid, mem_used=mem, sm_util=util))
        return out

    def _process_util(self, d: _Device, h: Any, now_us: int) -> dict[int, tuple[float, int]] | None:
        """Merge NVML per-process samples newer than the device's last-seen timestamp into
        d.pid_util (mean SM util of the new samples per pid). None = not available."""
        fn = self._fn_putil
        if fn is None or d.unsupported & _F_PUTIL:
            return None
        cutoff = now_us - int(PROC_UTIL_WINDOW_S * 1_000_000)
        since = d.util_last_ts if d.util_last_ts > cutoff else cutoff
        try:
            samples = fn(h, since)
        except self._nvml_error as e:
            code = getattr(e, "value", None)
            if code == self._not_found or code == self._ok_code:
                samples = ()  # no samples since `since`: nothing ran
            elif code in self._lost_codes:
                raise _GpuGone(self._lost_codes[code]) from None
            else:
                if code in self._permanent_codes:
                    d.unsupported |= _F_PUTIL
                return None
        pid_util = d.pid_util
        if samples:
            acc: dict[int, list[float]] = {}  # pid -> [sum, count, newest ts]
            newest = d.util_last_ts
            for s in samples:
                ts = int(s.timeStamp)
                if ts > newest:
                    newest = ts
                if ts <= since:
                    continue
                a = acc.get(s.pid)
                if a is None:
                    acc[s.pid] = [float(s.smUtil), 1.0, float(ts)]
                else:
                    a[0] += s.smUtil
                    a[1] += 1.0
                    if ts > a[2]:
                        a[2] = float(ts)
            d.util_last_ts = newest
            for pid, (total, n, ts) in acc.items():
                pid_util[int(pid)] = (min(max(total / n / 100.0, 0.0), 1.0), int(ts))
        if pid_util:
            stale = [pid for pid, (_, ts) in pid_util.items() if ts < cutoff]
            for pid in stale:
                del pid_util[pid]
        return pid_util
