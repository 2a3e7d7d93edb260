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

The cumulative clock-event and PCIe counters are `collect/nvml/counters.py`, the processes on
each GPU `collect/nvml/gpu_procs.py`, the per-device state both share `collect/nvml/base.py`. The
link's maximum generation and width, the SM clock's maximum, the CPUs near the GPU
(`nvmlDeviceGetCpuAffinity`) and its NUMA node are read once, at init.

Summing `processes()` per PID for the job rows is `collect/nvml/gpu_use.py`'s `GpuUse`.
"""

from __future__ import annotations

import functools
import importlib
import os
import time
from typing import Any, Callable

from gputop_dl.collect.nvml.base import (
    F_CLOCK, F_ENERGY, F_MEM, F_MEM_V2, F_PCIE, F_POWER, F_REASONS, F_TEMP, F_UTIL, GpuGone,
    NvmlDevice)
from gputop_dl.collect.nvml.counters import (
    COUNTER_INTERVAL_S, CounterReads)
from gputop_dl.collect.nvml.energy import EnergyMeter, power_scope
from gputop_dl.collect.nvml.gpu_procs import ProcessReads
from gputop_dl.snapshot import GpuSample
from gputop_dl.text.cpulist import format_cpulist, mask_words_to_cpus

__all__ = ["Nvml", "PCIE_INTERVAL_S", "REASON_LABELS"]

PCIE_INTERVAL_S = 5.0  # PCIe throughput is re-read at most this often per device

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


class _NeverRaised(Exception):
    """Stands in for NVMLError when the module has none, so `except` clauses stay valid."""



def _text(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return str(v)


_SAMPLE_DEFAULTS = dict(GpuSample(0).__dict__)
_new_sample = object.__new__


def _import_pynvml() -> Any:
    return importlib.import_module("pynvml")




class Nvml(CounterReads, ProcessReads):
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
        self._devices: tuple[NvmlDevice, ...] = ()
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
        def f(name: str) -> Callable[..., Any] | None:
            fn: Callable[..., Any] | None = getattr(m, name, None)
            return fn
        self._fn_mem = f("nvmlDeviceGetMemoryInfo")
        # v2 keeps the driver's reservation out of `used`, as nvidia-smi does (the v1 call
        # counts it: 480 MiB "used" on an idle H100 with driver 580); v1 where v2 is missing
        v2 = getattr(m, "nvmlMemory_v2", None)
        self._fn_mem_v2 = (None if self._fn_mem is None or v2 is None
                           else functools.partial(self._fn_mem, version=v2))
        self._fn_util = f("nvmlDeviceGetUtilizationRates")
        self._fn_temp = f("nvmlDeviceGetTemperature")
        self._fn_power = f("nvmlDeviceGetPowerUsage")
        self._fn_energy = f("nvmlDeviceGetTotalEnergyConsumption")
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
            d = NvmlDevice(i)
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
        bits: list[tuple[int, str]] = []
        for suffix, label, fallback in _REASONS:
            bit = getattr(m, "nvmlClocksEventReason" + suffix,
                          getattr(m, "nvmlClocksThrottleReason" + suffix, fallback))
            if isinstance(bit, int) and bit > 0 and all(bit != b for b, _ in bits):
                bits.append((bit, label))
        return tuple(bits)

    def _init_links(self, d: NvmlDevice, h: Any) -> None:
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

    def _init_device(self, d: NvmlDevice) -> None:
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
            d.energy = EnergyMeter(power_scope(d.name), counter=self._fn_energy is not None)
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
    def _sample_one(self, d: NvmlDevice, now: float) -> GpuSample:
        h = d.handle
        if h is None:
            return d.failed  # type: ignore[return-value]
        read = self._read
        try:
            mem_used = None
            mem_total = d.mem_total
            mem = read(d, F_MEM_V2, self._fn_mem_v2, h)
            if mem is None:
                mem = read(d, F_MEM, self._fn_mem, h)
            if mem is not None:
                mem_used = int(mem.used)
                mem_total = int(mem.total)

            util = mem_util = None
            u = read(d, F_UTIL, self._fn_util, h)
            if u is not None:
                util = u.gpu / 100.0
                mem_util = u.memory / 100.0

            temp = read(d, F_TEMP, self._fn_temp, h, self._temp_sensor)
            power = read(d, F_POWER, self._fn_power, h)
            power_w = power / 1000.0 if power is not None else None
            meter = d.energy
            mj = None
            if meter.counter_wanted:
                mj = read(d, F_ENERGY, self._fn_energy, h)
                if d.unsupported & F_ENERGY:
                    meter.refuse_counter()
            meter.read(now, mj, power_w)
            clock = read(d, F_CLOCK, self._fn_clock, h, self._clock_sm)

            reasons: tuple[str, ...] = ()
            mask = read(d, F_REASONS, self._fn_reasons, h)
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
            f["power_w"] = power_w
            f["sm_clock_mhz"] = int(clock) if clock is not None else None
            f["throttle_reasons"] = reasons
            f["energy_j"] = meter.joules
            f["energy_since"] = meter.since
            f["energy_source"] = meter.source
            f["energy_scope"] = meter.scope
            f["energy_note"] = meter.note if meter.scope == "gpu" else meter.shown_note()
            return out
        except GpuGone as e:
            d.pcie_tx = d.pcie_rx = d.pcie_tx_bps = d.pcie_rx_bps = None
            d.ctr_last, d.throttle, d.ctr_next, d.ctr_reads, d.slow = {}, (), 0.0, 0, {}
            d.energy.gap()
            return GpuSample(d.index, d.name, d.uuid, error=str(e))
        except Exception as e:  # noqa: BLE001 - never raise out of sample()
            return GpuSample(d.index, d.name, d.uuid, error=f"{type(e).__name__}: {e}")

    @staticmethod
    def _refresh_slow(d: NvmlDevice) -> None:
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

    def _read_pcie(self, d: NvmlDevice, h: Any, now: float) -> None:
        first = d.pcie_next == 0.0
        d.pcie_next = now + PCIE_INTERVAL_S + (d.pcie_phase if first else 0.0)
        fn = self._fn_pcie
        tx = self._read(d, F_PCIE, fn, h, self._pcie_tx_counter)
        rx = self._read(d, F_PCIE, fn, h, self._pcie_rx_counter)
        d.pcie_tx = int(tx) if tx is not None else None
        d.pcie_rx = int(rx) if rx is not None else None

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
