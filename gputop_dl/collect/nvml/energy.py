"""A GPU's energy since the monitor first read it: NVML's energy counter, else power x time.

`nvmlDeviceGetTotalEnergyConsumption` gives the board's energy in millijoules since the driver
loaded (Volta and newer). `EnergyMeter` keeps one GPU's joules as the sum of the counter's
differences between ticks. The counter is updated every 20-100 ms, so two reads closer than
that differ by 0: a zero difference is not "stuck"; only a counter that has not moved for
`STUCK_S` seconds while NVML read the GPU drawing power is given up, and that span and every
later one are the power integral (trapezoids of `nvmlDeviceGetPowerUsage`, itself a 1-second
average on Ampere and newer). A counter that goes back (the driver reloaded; a 64-bit count of
mJ does not wrap) restarts from its new value, that interval bridged by the power integral.
Where NVML refuses the counter (NOT_SUPPORTED: older GPUs, some virtual GPUs) the meter is the
power integral from the start. `source` says which: "counter" or "power-integral".

On a Grace superchip (GH200, GB200) NVML's power is the module's, CPU and memory included:
`scope` says "module" and `note` says so. Pure state and arithmetic: `collect/nvml/gpu_sample.py`
reads NVML and hands the readings in.
"""

from __future__ import annotations

__all__ = ["COUNTER", "EnergyMeter", "POWER_INTEGRAL", "STUCK_S", "power_scope"]

COUNTER = "counter"
POWER_INTEGRAL = "power-integral"
STUCK_S = 3.0  # a counter still at one value this long while the GPU draws power is given up
_MODULE_NAMES = ("GH200", "GB200", "GB300", "GRACE")


def power_scope(name: str | None) -> str:
    """"module" for a Grace superchip's GPU (NVML's power includes the CPU and memory), else
    "gpu"."""
    upper = (name or "").upper()
    return "module" if any(n in upper for n in _MODULE_NAMES) else "gpu"


def _trapezoid(p0: float | None, p1: float | None, dt: float) -> float | None:
    """Joules over `dt` seconds between two power readings (W); one missing: the other."""
    if p0 is None and p1 is None:
        return None
    if p0 is None:
        p0 = p1
    elif p1 is None:
        p1 = p0
    return (p0 + p1) / 2.0 * dt  # type: ignore[operator]


class EnergyMeter:
    """One GPU's joules since its first reading (see the module docstring)."""

    __slots__ = ("joules", "since", "source", "scope", "note", "_t", "_power", "_ctr",
                 "_moved_t", "_pending", "_counter_ok")

    def __init__(self, scope: str = "gpu", counter: bool = True):
        """`counter`: whether to try NVML's counter at all (False: it is known to be missing)."""
        self.joules: float | None = None  # None until an interval has closed
        self.since: float | None = None  # time of the first reading
        self.source: str | None = None
        self.scope = scope
        self.note: str | None = None
        self._t: float | None = None
        self._power: float | None = None
        self._ctr: int | None = None
        self._moved_t = 0.0
        self._pending = 0.0  # power integral since the counter last moved
        self._counter_ok = counter

    @property
    def counter_wanted(self) -> bool:
        """Whether the next tick should read the counter (False once it is given up)."""
        return self._counter_ok

    def shown_note(self) -> str | None:
        """Its note, with the module's scope said first."""
        if self.scope != "module":
            return self.note
        scope = "module power: NVML's power and energy of a Grace superchip include its CPU and memory"
        return scope if self.note is None else f"{scope}; {self.note}"

    def refuse_counter(self) -> None:
        """NVML refused the counter for good (NOT_SUPPORTED): power x time from now on."""
        self._counter_ok = False
        self._ctr = None

    def gap(self) -> None:
        """The GPU was lost this tick: the next reading starts a new interval (the lost span
        is not guessed), the joules so far kept."""
        self._t = None
        self._ctr = None
        self._pending = 0.0

    def read(self, now: float, counter_mj: int | None, power_w: float | None) -> None:
        """One tick's readings: the counter (mJ; None: not read or refused) and power (W)."""
        if self._t is None:
            self._t, self._power, self._moved_t = now, power_w, now
            if self.since is None:
                self.since = now
            if counter_mj is not None and self._counter_ok:
                self._ctr = counter_mj
            return
        dt = now - self._t
        if dt <= 0:
            return
        integral = _trapezoid(self._power, power_w, dt)
        self._t, self._power = now, power_w
        if self._counter_ok and self._ctr is not None:
            if counter_mj is None:  # a missed read: the next difference covers this interval
                self._still(now, integral, power_w)
            else:
                self._from_counter(now, counter_mj, integral, power_w)
        elif self._counter_ok and counter_mj is not None:  # the counter's first reading
            self._ctr, self._moved_t, self._pending = counter_mj, now, 0.0
            self._add(integral, self.source or POWER_INTEGRAL)
        else:
            self._add(integral, POWER_INTEGRAL)
            if integral is None and self.joules is None:
                self.note = "NVML gives neither the energy counter nor the power of this GPU"

    def _from_counter(self, now: float, value: int, integral: float | None,
                      power_w: float | None) -> None:
        delta = value - (self._ctr or 0)
        if delta > 0:
            self._ctr, self._moved_t, self._pending = value, now, 0.0
            self._add(delta / 1000.0, COUNTER)
        elif delta < 0:  # went back: the driver reloaded; this interval from power
            self._ctr, self._moved_t, self._pending = value, now, 0.0
            self._add(integral, self.source or COUNTER)
            self.note = "the energy counter went back (driver reloaded?): one interval from power"
        else:
            self._still(now, integral, power_w)

    def _still(self, now: float, integral: float | None, power_w: float | None) -> None:
        """The counter did not move (or was not read) this interval: nothing is added while it
        may still catch up; after `STUCK_S` with the GPU drawing power it is given up and the
        span since it last moved is the power integral."""
        self._pending += integral or 0.0
        if now - self._moved_t >= STUCK_S and (power_w or 0.0) > 0.0:
            self._counter_ok = False
            self._ctr = None
            self._add(self._pending, POWER_INTEGRAL)
            self.note = (f"the energy counter did not move for {now - self._moved_t:.0f} s "
                         f"while the GPU drew {power_w:.0f} W: power x time from then on")
            self._pending = 0.0

    def _add(self, joules: float | None, source: str) -> None:
        if joules is None:
            return
        self.joules = (self.joules or 0.0) + joules
        self.source = source
