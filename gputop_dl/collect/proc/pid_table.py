"""The machine's processes across ticks: each PID's parent and start time, read once per new PID.

One `PidTable` lives across ticks. Each tick, `refresh()` lists /proc and reads
`/proc/PID/stat` only for PIDs it has not seen before (PPID and start time); it also re-reads
the children of a PID that vanished, since only a parent's exit re-parents a process. The PPID
map it keeps (`cmap`: PPID -> children) is handed to the job samplers, so a tick still makes
one /proc pass. The listing itself is skipped while `/proc/loadavg` shows the same last PID and
task count (no process or thread created or reaped since), and a listing equal to the last one
(only threads came or went) is not compared PID by PID again. A zombie is not a process here
and is not read again until it is reaped; a PID that vanishes or denies access between the
listing and its read is left out, and the next tick lists again.

collect/jobs/discover.py tells which of these processes are training jobs.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import NamedTuple

from gputop_dl.collect.proc.procfs import ProcFiles
from gputop_dl.collect.proc.procs import GONE_STATES, stat_fields


class Changes(NamedTuple):
    """What one `refresh()` found changed since the last listing."""

    read: list[int]  # PIDs whose stat was read (new ones and re-parented ones), in reading order
    orphans: set[int]  # of them, the children of a PID that vanished, read again
    gone: set[int]  # PIDs no longer listed


class PidTable:
    """Each listed PID's parent and start time, kept across ticks (see the module docstring)."""

    def __init__(self, proc_root: str, read: Callable[[int, str], bytes]) -> None:
        """`read(pid, name)`: the bytes of /proc/PID/name (a `Discoverer`'s, which tests override)."""
        self.proc = proc_root
        self._read = read
        self.ppid: dict[int, int] = {}
        self.start: dict[int, int] = {}  # start time (clock ticks after boot)
        self.cmap: dict[int, list[int]] = {}  # PPID -> children
        self.gen = 0  # counts the changes of the PPID map
        self._zombies: set[int] = set()  # not re-read until they are reaped (leave the listing)
        self._last_zombie = False
        self._mark: bytes | None = None  # /proc/loadavg's "tasks last-PID" at the last listing
        self._listing: list[str] | None = None  # the last one (None: a PID was left unread)
        self._files = ProcFiles()

    def _stat(self, pid: int) -> tuple[int, int] | None:
        """(ppid, start time) or None when the PID is gone, a zombie, or unreadable."""
        self._last_zombie = False
        try:
            data = self._read(pid, "stat")
        except OSError:
            return None
        fields = stat_fields(data, 20)
        self._last_zombie = bool(fields) and fields[0] in GONE_STATES
        if len(fields) < 20 or self._last_zombie:
            return None
        try:
            return int(fields[1]), int(fields[19])
        except ValueError:
            return None

    def _listing_mark(self) -> bytes | None:
        """The task count and last PID of `/proc/loadavg` ("... 2/175 7500" -> b"175 7500"):
        unchanged, no process was created (a new PID) or reaped (one task fewer) in between.

        The count is the machine's, the PID this namespace's: a process reaped here while
        another namespace creates one is seen at the next change (its reads fail till then)."""
        try:
            data = self._files.read(f"{self.proc}/loadavg")
        except OSError:
            return None
        return data[data.find(b"/") + 1:]

    def refresh(self) -> Changes | None:
        """List /proc; stat the new PIDs and the re-parented ones. None: no process came or
        went since the last listing (or /proc could not be listed); `cmap` stands."""
        mark = self._listing_mark()  # read before the listing: a later change shows next tick
        if mark is not None and mark == self._mark:
            return None
        try:
            names = os.listdir(self.proc)
        except OSError:
            return None
        if names == self._listing:  # threads came or went, processes did not
            self._mark = mark
            return None
        pids = {int(n) for n in names if n.isdigit()}
        ppid, start = self.ppid, self.start
        gone = ppid.keys() - pids
        orphans: set[int] = set()
        if gone:
            for p in gone:
                del ppid[p]
                start.pop(p, None)
            orphans = {p for p, pp in ppid.items() if pp in gone}
        zombies = self._zombies
        if zombies:
            zombies &= pids
        todo = (pids - ppid.keys() - zombies) | orphans
        self._mark, self._listing = mark, names
        read: list[int] = []
        for p in todo:
            st = self._stat(p)
            if st is None:
                ppid.pop(p, None)
                start.pop(p, None)
                if self._last_zombie:
                    zombies.add(p)
                else:  # unread: list again next tick
                    self._mark = self._listing = None
                continue
            ppid[p], start[p] = st
            read.append(p)
        if todo or gone:
            cmap: dict[int, list[int]] = {}
            for p, pp in ppid.items():
                cmap.setdefault(pp, []).append(p)
            self.cmap = cmap
            self.gen += 1
        return Changes(read, orphans, gone)
