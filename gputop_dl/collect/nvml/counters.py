"""NVML's cumulative counters: clock-event (throttle) time per reason and PCIe bytes, as shares and rates.

GPU clocks and PCIe: NVML's cumulative counters (clock-event / violation time per
reason, in ns, and PCIe bytes) are read in one `nvmlDeviceGetFieldValues` call per device (about
1.3-1.6 ms on an H100 with driver 580), on the first tick, again `FIRST_DELTA_S` later (so a
one-shot snapshot has a first share) and then every `COUNTER_INTERVAL_S`, with the PCIe reads'
stagger; in between the last shares are reported. Field ids are looked up by name in the module
(a name it lacks = that counter is not read); a field the device refuses is never asked again,
and a throttle reason with no field falls back to `nvmlDeviceGetViolationStatus` by policy. The
link's current generation and width are read with the counters. `CounterReads` is a part of
`collect/nvml/gpus.py`'s `Nvml`.
"""

from __future__ import annotations

from typing import Any, Callable

from gputop_dl.collect.nvml.base import F_FIELDS, F_LINK_GEN, F_LINK_WIDTH, GpuGone, NvmlBase, NvmlDevice

__all__ = ["COUNTER_INTERVAL_S", "CounterReads", "FIRST_DELTA_S", "THROTTLE_LABELS"]

COUNTER_INTERVAL_S = 5.0  # clock-event and PCIe counters and the link state, per device
FIRST_DELTA_S = 0.5  # the counters' second read comes this soon (a first share for --once)

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


class CounterReads(NvmlBase):
    """The counter reads of `Nvml` (a mixin: `Nvml` sets the attributes declared here)."""

    _fn_fields: Callable[..., Any] | None
    _fn_violation: Callable[..., Any] | None
    _fn_link_gen: Callable[..., Any] | None
    _fn_link_width: Callable[..., Any] | None
    _ok_code: Any
    _invalid_arg: Any
    _violation_policies: dict[str, int]

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

    def _read_counters(self, d: NvmlDevice, h: Any, now: float) -> None:
        """The cumulative counters: throttle shares and PCIe bytes/s since the previous read."""
        d.ctr_reads += 1
        d.ctr_next = now + (FIRST_DELTA_S if d.ctr_reads == 1 else
                            COUNTER_INTERVAL_S + (d.pcie_phase if d.ctr_reads == 2 else 0.0))
        now_us = int(now * 1_000_000)
        new: dict[str, tuple[int, int, int]] = {}
        if d.fields:
            vals = self._read(d, F_FIELDS, self._fn_fields, h, list(d.fields))
            if vals is not None:
                for v in vals:
                    self._field(d, v, now_us, new)
            elif d.unsupported & F_FIELDS:  # no field values on this device: policies only
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
                    raise GpuGone(self._lost_codes[code]) from None
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
        gen = self._read(d, F_LINK_GEN, self._fn_link_gen, h)
        width = self._read(d, F_LINK_WIDTH, self._fn_link_width, h)
        d.link_gen = int(gen) if isinstance(gen, int) and gen > 0 else None
        d.link_width = int(width) if isinstance(width, int) and width > 0 else None

    def _field(self, d: NvmlDevice, v: Any, now_us: int, new: dict[str, tuple[int, int, int]]) -> None:
        """One nvmlFieldValue_t into `new` (name -> value, timestamp µs, bits); a field the device
        refuses for good is dropped (a throttle reason then falls back to its policy)."""
        label = d.fields.get(v.fieldId)
        if label is None:
            return
        ret = v.nvmlReturn
        if ret != self._ok_code:
            if ret in self._lost_codes:
                raise GpuGone(self._lost_codes[ret])
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
