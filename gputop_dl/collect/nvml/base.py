"""The state `Nvml` keeps per GPU and its one NVML read that turns a failure into a value.

Shared by `collect/nvml/gpus.py` (opening NVML), `collect/nvml/gpu_sample.py` (the per-tick
sample), `collect/nvml/counters.py` (the cumulative clock-event and PCIe counters) and
`collect/nvml/gpu_procs.py` (the GPU processes):
`NvmlDevice`, the per-device field flags, `GpuGone` and `NvmlBase._read`.
"""

from __future__ import annotations

from typing import Any, Callable

from gputop_dl.collect.nvml.energy import EnergyMeter
from gputop_dl.snapshot import GpuSample

# Per-device field flags (a bitmask of fields NVML said it will never answer).
F_MEM = 1 << 0
F_UTIL = 1 << 1
F_TEMP = 1 << 2
F_POWER = 1 << 3
F_CLOCK = 1 << 4
F_REASONS = 1 << 5
F_PCIE = 1 << 6
F_PROCS = 1 << 7
F_GPROCS = 1 << 8
F_PUTIL = 1 << 9
F_MEM_V2 = 1 << 10
F_FIELDS = 1 << 11
F_LINK_GEN = 1 << 12
F_LINK_WIDTH = 1 << 13
F_VIOLATION = 1 << 14
F_ENERGY = 1 << 15


class GpuGone(Exception):
    """Internal: the device is lost / needs a reset; abandon it for this tick."""


class NvmlDevice:
    __slots__ = (
        "index", "handle", "name", "uuid", "mem_total", "power_limit_w", "error",
        "unsupported", "pcie_next", "pcie_phase", "pcie_tx", "pcie_rx",
        "util_last_ts", "pid_util", "failed",
        "clock_max", "link_gen_max", "link_width_max", "cpu_affinity", "numa_node",
        "ctr_next", "ctr_reads", "fields", "violations", "ctr_last", "throttle", "link_gen", "link_width",
        "pcie_tx_bps", "pcie_rx_bps", "pcie_point", "slow", "energy",
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
        self.energy = EnergyMeter()  # its joules (collect/nvml/energy.py), set up at init



class NvmlBase:
    """What the parts of `Nvml` share: the NVML error class and codes, and `_read`."""

    _nvml_error: type[BaseException]
    _lost_codes: dict[Any, str]
    _permanent_codes: frozenset[Any]

    def _read(self, d: NvmlDevice, flag: int, fn: Callable[..., Any] | None, *args: Any) -> Any:
        """One NVML field: None if unsupported/failed; raises GpuGone if the GPU is lost."""
        if fn is None or d.unsupported & flag:
            return None
        try:
            return fn(*args)
        except self._nvml_error as e:
            code = getattr(e, "value", None)
            lost = self._lost_codes.get(code)
            if lost is not None:
                raise GpuGone(lost) from None
            if code in self._permanent_codes:
                d.unsupported |= flag
            return None
