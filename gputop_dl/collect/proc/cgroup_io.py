"""Disk I/O of a job's cgroup on cgroup v2: bytes read and written per second (`io.stat`) and its I/O pressure (`io.pressure`).

A job's `/proc/PID/io` is readable by its user and root only; its cgroup's `io.stat` and
`io.pressure` (cgroup v2, under /sys/fs/cgroup) are readable by every user. So for another
user's job, without root, the cgroup is where its disk reads can be seen, as the cgroup's: a
group holds the job and whatever else runs in it (a systemd session scope holds the user's
whole login), and the figure says which group it is.

`io.stat` has one line per device, `MAJ:MIN rbytes=.. wbytes=.. rios=.. wios=.. dbytes=..
dios=..`; the rates are summed over the devices, less the stacked ones (device-mapper, md:
majors 253 and 9), whose I/O the disks under them count again. `io.pressure` is PSI's "some"
and "full" lines. The group comes from `/proc/PID/cgroup`'s `0::/path` line (cgroup v2 only: a
v1 host has no such files and the reader answers None).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from gputop_dl.collect.proc.memory import parse_cgroup
from gputop_dl.collect.proc.procfs import CGROUP_ROOT, ProcFiles

__all__ = ["CgroupIO", "CgroupIOReading", "parse_io_stat", "parse_pressure"]

STACKED_MAJORS = frozenset((9, 253))  # md, device-mapper: their I/O is counted on the disks below


@dataclass(frozen=True)
class CgroupIOReading:
    """One reading of a job's cgroup I/O (None: not known yet, or not read)."""

    cgroup: str  # the group's path below the v2 root ("/user.slice/...")
    read_bytes_per_s: float | None = None
    write_bytes_per_s: float | None = None
    pressure_some10: float | None = None  # 0..1: a share of the last 10 s
    pressure_full10: float | None = None


def parse_io_stat(data: bytes) -> tuple[int, int]:
    """(bytes read, bytes written) summed over the devices of an `io.stat`, the stacked ones
    (md, device-mapper) left out."""
    rbytes = wbytes = 0
    for line in data.split(b"\n"):
        parts = line.split()
        if not parts or b":" not in parts[0]:
            continue
        try:
            if int(parts[0].split(b":")[0]) in STACKED_MAJORS:
                continue
        except ValueError:
            continue
        for kv in parts[1:]:
            k, _, v = kv.partition(b"=")
            if k in (b"rbytes", b"wbytes") and v.isdigit():
                if k == b"rbytes":
                    rbytes += int(v)
                else:
                    wbytes += int(v)
    return rbytes, wbytes


def parse_pressure(data: bytes) -> tuple[float | None, float | None]:
    """("some avg10", "full avg10") of a PSI file as fractions (None: the line is missing)."""
    out: dict[bytes, float] = {}
    for line in data.split(b"\n"):
        parts = line.split()
        if parts and parts[0] in (b"some", b"full"):
            for p in parts[1:]:
                if p.startswith(b"avg10="):
                    try:
                        out[parts[0]] = float(p[6:]) / 100
                    except ValueError:
                        pass
    return out.get(b"some"), out.get(b"full")


class CgroupIO:
    """The I/O of one job's v2 cgroup across ticks; touched by one thread."""

    def __init__(self, pid: int, proc: str = "/proc", root: str = CGROUP_ROOT) -> None:
        self._files = ProcFiles()
        self.folder: str | None = None
        self.cgroup: str | None = None
        try:
            with open(f"{proc}/{pid}/cgroup", "rb") as f:
                v2, _ = parse_cgroup(f.read())
        except OSError:
            v2 = None
        if v2 is not None:
            folder = os.path.join(root, *[p for p in v2.split("/") if p])
            if os.path.exists(os.path.join(folder, "io.stat")):
                self.folder, self.cgroup = folder, v2
        self._last: tuple[float, int, int] | None = None

    def read(self, now: float) -> CgroupIOReading | None:
        """This tick's reading (rates from the last one); None where the group has no
        `io.stat` (cgroup v1, no io controller, the file gone)."""
        if self.folder is None or self.cgroup is None:
            return None
        try:
            rb, wb = parse_io_stat(self._files.read(os.path.join(self.folder, "io.stat")))
        except OSError:
            self.folder = None
            self._files.close()
            return None
        try:
            some, full = parse_pressure(self._files.read(os.path.join(self.folder, "io.pressure")))
        except OSError:  # a kernel without PSI
            some = full = None
        last, self._last = self._last, (now, rb, wb)
        if last is None or now <= last[0]:
            return CgroupIOReading(self.cgroup, pressure_some10=some, pressure_full10=full)
        dt = now - last[0]
        return CgroupIOReading(self.cgroup, read_bytes_per_s=max(0, rb - last[1]) / dt,
                               write_bytes_per_s=max(0, wb - last[2]) / dt,
                               pressure_some10=some, pressure_full10=full)

    def close(self) -> None:
        self._files.close()
