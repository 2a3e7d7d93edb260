"""Stored pace references: found jobs' readings alone, kept in the session database across runs.

A found job's own pace (analyse/slowdown/pace.py) needs its readings while it ran alone, or a running
twin's. A job started at the same moment as the others has neither; nor has any job when
gputop-dl starts after them. What a copy of its command read alone in an earlier gputop-dl run
on this machine is its pace alone as well, if nothing it depends on changed: the monitor stores
each reference alone it reads (`OwnPace.references`) by the job's fingerprint
(collect/jobs/fingerprint.py `found_fingerprint`: its command line but for the options twins may
differ in, its directory, user and container, the interpreter it runs, the size and mtime of
the files it names, the machine): its loader's cores and write calls a second, its step
times and its loop counter's pairs of dumps alone (name, steps, seconds). It lends a stored one
(`OwnPace.lend_stored`) to a new job of the same fingerprint that has neither its own nor a
running twin's, up to STORED_MAX_AGE_S after that reference's last reading. The evidence says so, with its age.

Only a recording monitor stores or reads them (`Recorder.enabled`: tests and benchmarks, which
do not record, never see a user's stored runs). A reference is written at most every
SAVE_EVERY_S and when the monitor stops, committed with the tick.
"""

from __future__ import annotations

import math
import shlex
import socket
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from gputop_dl.analyse.slowdown import twins
from gputop_dl.analyse.slowdown.pace_tracks import STORED_MAX_AGE_S, OwnPace, Reference
from gputop_dl.collect.jobs.fingerprint import found_fingerprint
from gputop_dl.snapshot import JobSample

if TYPE_CHECKING:
    from gputop_dl.engine.recorder import Recorder

SAVE_EVERY_S = 30.0  # a growing reference is written this often (and when the monitor stops)
FPS_KEPT = 512  # fingerprints kept by PID (a gone job's reference is still saved after it)
READINGS = ("cores", "writes", "steps")  # a stored reference's data: these lists of numbers
# (and "loop": its loop counter's name and pairs of dumps alone, where it had one)


def machine_ident(env: Mapping[str, Any]) -> dict[str, object]:
    """What of the machine a stored reference depends on: host, CPU model and count, memory,
    GPUs (from the engine's environment table)."""
    return {"host": socket.gethostname(), "cpu_model": env.get("cpu_model"),
            "cpus_logical": env.get("cpus_logical"), "mem_total": env.get("mem_total"),
            "gpus": env.get("gpus")}


def to_data(ref: Reference) -> dict[str, object]:
    data: dict[str, object] = {"cores": list(ref.cores), "writes": list(ref.writes),
                               "steps": list(ref.steps)}
    if ref.loop and ref.loop_pairs:  # its loop counter alone: its name, each pair of dumps
        data["loop"] = {"name": ref.loop, "steps": [k for k, _ in ref.loop_pairs],
                        "seconds": [s for _, s in ref.loop_pairs]}
    return data


def from_data(until: object, command: object, data: object) -> Reference | None:
    """A stored row as a reference; None where it is not one (another version's shape, or a
    damaged row): it is skipped, never a wrong pace."""
    if (not isinstance(data, dict) or not isinstance(command, str)
            or not isinstance(until, (int, float)) or not math.isfinite(until)):
        return None
    lists = [data.get(k, []) for k in READINGS]
    if not all(isinstance(xs, list) and all(isinstance(x, (int, float)) and math.isfinite(x)
                                            and x >= 0 for x in xs) for xs in lists):
        return None
    cores, writes, steps = (tuple(float(x) for x in xs) for xs in lists)
    loop, pairs = _loop(data.get("loop"))
    ref = Reference(command, float(until), cores, writes, steps, loop=loop, loop_pairs=pairs)
    return ref if ref.usable() else None


def _loop(data: object) -> tuple[str | None, tuple[tuple[int, float], ...]]:
    """A stored loop counter: (its name, its pairs of dumps); (None, ()) where there is none or
    it is not one (whole steps, positive seconds, as many of each)."""
    if not isinstance(data, dict):
        return None, ()
    name, steps, secs = data.get("name"), data.get("steps"), data.get("seconds")
    if (not isinstance(name, str) or not name or not isinstance(steps, list)
            or not isinstance(secs, list) or len(steps) != len(secs)
            or not all(isinstance(k, int) and not isinstance(k, bool) and k >= 0 for k in steps)
            or not all(isinstance(x, (int, float)) and math.isfinite(x) and x > 0 for x in secs)):
        return None, ()
    return name, tuple((k, float(x)) for k, x in zip(steps, secs))


class PaceRefs:
    """Lends stored references to new found jobs and stores the references read here. Nothing
    is read before the first job is found (the store, the machine's identity): a monitor's
    start-up is not slower for them."""

    def __init__(self, store_path: str | None, ident: Callable[[], Mapping[str, object]]):
        self.store_path = store_path
        self._ident_of = ident
        self._ident: dict[str, object] | None = None  # the machine's, read at the first job
        self._loaded = False
        self._stored: dict[str, Reference] = {}  # fingerprint -> its stored reference
        self._fps: dict[int, str | None] = {}  # found PID -> its fingerprint (None: none)
        self._saved: dict[str, float] = {}  # fingerprint -> the last reading it was saved with
        self._last_save = -math.inf

    def load(self, now: float) -> None:
        """Read this host's stored references (read only; none where there is no store)."""
        from gputop_dl.record.paths import StoreError
        from gputop_dl.record.store import Store

        self._loaded = True
        try:
            st = Store(self.store_path, readonly=True)
        except StoreError:
            return
        try:
            rows = st.pace_refs(now - STORED_MAX_AGE_S)
        except sqlite3.Error:
            return  # a damaged database: no stored references, the monitor goes on
        finally:
            st.close()
        for fp, (until, command, data) in rows.items():
            ref = from_data(until, command, data)
            if ref is not None:
                self._stored[fp] = ref
                self._saved[fp] = ref.until

    def fingerprint(self, j: JobSample) -> str | None:
        """A found job's fingerprint, read once per PID (its files are stat'ed then)."""
        if j.pid is None or not j.command:
            return None
        if j.pid not in self._fps:
            try:
                argv: Sequence[str] = shlex.split(j.command)
            except ValueError:
                argv = j.command.split()
            if self._ident is None:
                self._ident = dict(self._ident_of())
            ident = dict(self._ident, user=j.user, container=j.container)
            self._fps[j.pid] = found_fingerprint(j.pid, twins.key(j.command), argv, ident)
            while len(self._fps) > FPS_KEPT:
                del self._fps[next(iter(self._fps))]
        return self._fps[j.pid]

    def lend(self, pace: OwnPace, jobs: Sequence[JobSample], now: float) -> None:
        """Read each new job's fingerprint; lend it its stored reference, where one has it
        (the stored ones are read when the first job is found)."""
        if jobs and not self._loaded:
            self.load(now)
        for j in jobs:
            if j.pid is None or j.pid in self._fps:
                continue
            fp = self.fingerprint(j)
            ref = self._stored.get(fp) if fp is not None else None
            if ref is not None:
                pace.lend_stored(j.pid, ref)

    def save(self, pace: OwnPace, recorder: Recorder, now: float, force: bool = False) -> int:
        """Store the references read here that grew since they were saved (every SAVE_EVERY_S,
        or now with `force`); how many were written. A job's fingerprint was read when `lend`
        first saw it, so a job gone since is still stored by it."""
        if not force and now - self._last_save < SAVE_EVERY_S:
            return 0
        self._last_save = now
        n = 0
        for ref in pace.references():
            fp = self._fps.get(ref.pid) if ref.pid is not None else None
            if fp is None or not ref.usable() or ref.until <= self._saved.get(fp, -math.inf):
                continue
            recorder.pace_ref(fp, ref.until, ref.command, to_data(ref))
            self._saved[fp] = ref.until
            self._stored[fp] = ref
            n += 1
        return n
