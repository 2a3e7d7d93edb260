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
total, power limit), bound functions and NVML constants are looked up once, here, at init; the
link's maximum generation and width, the SM clock's maximum, the CPUs near the GPU
(`nvmlDeviceGetCpuAffinity`) and its NUMA node too.

`Nvml` is made of parts: each tick's `GpuSample`s are `collect/nvml/gpu_sample.py`, the
cumulative clock-event and PCIe counters `collect/nvml/counters.py`, the processes on each GPU
`collect/nvml/gpu_procs.py`, the per-device state they share `collect/nvml/base.py`.

Summing `processes()` per PID for the job rows is `collect/nvml/gpu_use.py`'s `GpuUse`.
"""

from __future__ import annotations

import functools
import importlib
import os
import time
from typing import Any, Callable

from gputop_dl.collect.nvml.base import NvmlDevice
from gputop_dl.collect.nvml.energy import EnergyMeter, power_scope
from gputop_dl.collect.nvml.gpu_procs import ProcessReads
from gputop_dl.collect.nvml.gpu_sample import PCIE_INTERVAL_S, GpuSampleReads
from gputop_dl.snapshot import GpuSample
from gputop_dl.text.cpulist import format_cpulist, mask_words_to_cpus

__all__ = ["Nvml"]

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


class _NeverRaised(Exception):
    """Stands in for NVMLError when the module has none, so `except` clauses stay valid."""


def _text(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return str(v)


def _import_pynvml() -> Any:
    return importlib.import_module("pynvml")




class Nvml(GpuSampleReads, ProcessReads):
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

