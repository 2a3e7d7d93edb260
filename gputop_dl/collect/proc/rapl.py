"""The host's CPU package energy from RAPL (`/sys/class/powercap/intel-rapl:N/energy_uj`).

The powercap sysfs files give each CPU package's energy in microjoules, a counter that wraps at
`max_energy_range_uj` (AMD's packages use the same files). Since Linux 5.10 `energy_uj` is
readable by root only (CVE-2020-8694): another user gets no figure and a note that says so.
`RaplReader.read()` gives the joules summed over the packages since the first read and the power
over the last interval; it is host energy, never split per job. A machine without powercap (a
VM, another architecture) has none, with the reason.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

__all__ = ["POWERCAP", "RaplReader", "RaplReading"]

POWERCAP = "/sys/class/powercap"


@dataclass(frozen=True)
class RaplReading:
    """The packages' joules since the first read and watts over the last interval (None:
    unknown, `note` says why)."""

    joules: float | None = None
    power_w: float | None = None
    note: str | None = None


def _read_int(path: str) -> int:
    with open(path, "rb") as f:
        return int(f.read().strip())


class RaplReader:
    """Reads the package domains found at init; a domain that cannot be read is dropped."""

    def __init__(self, root: str = POWERCAP):
        self._zones: list[tuple[str, int]] = []  # (energy_uj path, wrap range)
        self._last: dict[str, int] = {}
        self._t: float | None = None
        self.joules: float | None = None
        self.note: str | None = None
        try:
            names = sorted(n for n in os.listdir(root) if n.startswith("intel-rapl:")
                           and n.count(":") == 1)  # packages, not their sub-zones (core, dram)
        except OSError:
            names = []
        for n in names:
            d = os.path.join(root, n)
            try:
                with open(os.path.join(d, "name"), encoding="ascii", errors="replace") as f:
                    if not f.read().startswith("package"):
                        continue
                wrap = _read_int(os.path.join(d, "max_energy_range_uj"))
            except (OSError, ValueError):
                continue
            self._zones.append((os.path.join(d, "energy_uj"), wrap))
        if not self._zones:
            self.note = "no RAPL package energy on this machine (no powercap intel-rapl zones)"

    def read(self, now: float) -> RaplReading:
        """One reading at `now` (monotonic seconds)."""
        if not self._zones:
            return RaplReading(note=self.note)
        got, total = {}, 0.0
        for path, wrap in self._zones:
            try:
                got[path] = _read_int(path)
            except PermissionError:
                self.note = ("RAPL energy_uj is readable by root only (Linux 5.10 and later): "
                             "host CPU energy unknown")
                self._zones = []
                return RaplReading(note=self.note)
            except (OSError, ValueError):
                continue
            old = self._last.get(path)
            if old is not None:
                delta = got[path] - old
                total += (delta if delta >= 0 else delta + wrap + 1) / 1e6
        first, dt = self._t is None, (now - self._t) if self._t is not None else 0.0
        self._last.update(got)
        self._t = now
        if first:
            return RaplReading(note=self.note)
        self.joules = (self.joules or 0.0) + total
        return RaplReading(joules=self.joules, power_w=total / dt if dt > 0 else None,
                           note=self.note)
