"""The stored machine profile of this host, read for the live verdict, the budget check and the queue.

`gputop-dl machine` stores its profiles in the session database (record/store.py,
`machine_profiles`); this reads the newest one of this host, read-only, and never measures
(`runner/machine.py` measures a quick one for `plan` where none is stored). `load_peaks` is what
the live verdict compares live rates with (analyse/live/box_peaks.py): `Peaks(None)` where there is
no profile, so the verdict says so instead of inventing a peak.
"""

from __future__ import annotations

import os
import socket
from typing import Any

from gputop_dl.analyse.live.box_peaks import Peaks, peaks_from_profile
from gputop_dl.sched.fit import capacities, gpu_pools

__all__ = ["box_capacity", "dev_of", "load_peaks", "load_profile"]


def load_profile(store_path: str | None = None) -> dict[str, Any] | None:
    """The newest stored machine profile of this host; None where there is none or no store."""
    from gputop_dl.record.paths import StoreError
    from gputop_dl.record.store import Store

    try:
        st = Store(store_path, readonly=True)
    except StoreError:
        return None
    try:
        return st.latest_machine(socket.gethostname())
    finally:
        st.close()


def dev_of(path: str) -> int | None:
    """The device number `path` is on now (None: it is not there, or cannot be looked at)."""
    try:
        return os.stat(path).st_dev
    except OSError:
        return None


def load_peaks(store_path: str | None = None) -> Peaks:
    """The peaks of the stored profile of this host (`Peaks(None)`: no profile)."""
    p = load_profile(store_path)
    return Peaks(None if p is None else peaks_from_profile(p, dev_of))


def box_capacity(profile: dict[str, Any] | None, cpus: float | None = None
                 ) -> tuple[dict[str, tuple[float | None, str]], dict[str, dict[int, float]]]:
    """What `plan` and the pre-launch check put the jobs against: the profile's capacities
    (sched/fit.py) with the memory available now (/proc/meminfo), and each GPU's own pools.
    No profile: the `cpus` given (the cores this process may use) and the memory now only."""
    from gputop_dl.collect.boxprofile.memory import meminfo

    avail = meminfo().get("MemAvailable")
    if profile is None:
        return ({"cores": (cpus, "usable CPUs"), "memory": (avail, "available now")}, {})
    return capacities(profile, None if avail is None else float(avail)), gpu_pools(profile)
