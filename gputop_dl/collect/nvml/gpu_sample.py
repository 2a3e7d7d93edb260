"""Each GPU's figures of one tick as a `GpuSample`: memory, use, temperature, power, energy, clocks, PCIe.

`GpuSampleReads` is a part of `collect/nvml/gpus.py`'s `Nvml` (a mixin: `Nvml` opens NVML, looks
up the functions and sets the attributes declared here). Every read goes through
`NvmlBase._read`: a field NVML says it will never answer is not asked for again, a lost GPU
is a sample with `error`. Throttle-reason bitmasks are decoded once per distinct mask; PCIe
throughput (two ~20 ms calls on real hardware) is read at most every `PCIE_INTERVAL_S` per
device, staggered across devices, and cached in between; the cumulative counters
(`collect/nvml/counters.py`) every `COUNTER_INTERVAL_S`. The fields that change only with
those slow reads are kept per device (`NvmlDevice.slow`) and copied into each tick's sample.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from gputop_dl.collect.nvml.base import (
    F_CLOCK, F_ENERGY, F_MEM, F_MEM_V2, F_PCIE, F_POWER, F_REASONS, F_TEMP, F_UTIL, GpuGone,
    NvmlDevice)
from gputop_dl.collect.nvml.counters import COUNTER_INTERVAL_S, CounterReads
from gputop_dl.snapshot import GpuSample

__all__ = ["PCIE_INTERVAL_S", "REASON_LABELS", "GpuSampleReads"]

PCIE_INTERVAL_S = 5.0  # PCIe throughput is re-read at most this often per device

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

_SAMPLE_DEFAULTS = dict(GpuSample(0).__dict__)
_new_sample = object.__new__


class GpuSampleReads(CounterReads):
    """The per-tick reads of `Nvml` (a mixin: `Nvml` sets the attributes declared here)."""

    _devices: tuple[NvmlDevice, ...]
    _clock: Callable[[], float]
    _fn_mem: Callable[..., Any] | None
    _fn_mem_v2: Callable[..., Any] | None
    _fn_util: Callable[..., Any] | None
    _fn_temp: Callable[..., Any] | None
    _fn_power: Callable[..., Any] | None
    _fn_energy: Callable[..., Any] | None
    _fn_clock: Callable[..., Any] | None
    _fn_reasons: Callable[..., Any] | None
    _fn_pcie: Callable[..., Any] | None
    _temp_sensor: Any
    _clock_sm: Any
    _pcie_tx_counter: Any
    _pcie_rx_counter: Any
    _reason_bits: tuple[tuple[int, str], ...]
    _reason_cache: dict[int, tuple[str, ...]]

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

    def _reason_table(self, m: Any) -> tuple[tuple[int, str], ...]:
        bits: list[tuple[int, str]] = []
        for suffix, label, fallback in _REASONS:
            bit = getattr(m, "nvmlClocksEventReason" + suffix,
                          getattr(m, "nvmlClocksThrottleReason" + suffix, fallback))
            if isinstance(bit, int) and bit > 0 and all(bit != b for b, _ in bits):
                bits.append((bit, label))
        return tuple(bits)
