"""The machine profile (`gputop-dl machine`): what this box can give, resource by resource.

`profile_machine()` reads the CPUs (cpus.py), memory (memory.py), the storage under the
dataset paths (storage.py) and the GPUs (gpus.py, copy rates by links.py), measuring where
the reading alone cannot say, and returns one JSON-ready dict of schema `gputop-dl.machine/1`
(docs/machine.md). Every part that cannot be read is a note line; the rest is still produced.
"""

from __future__ import annotations

import os
import socket
import time
from typing import Any, Callable

from gputop_dl.collect.boxprofile.part import Part

SCHEMA = "gputop-dl.machine/1"
# The profile and each of its parts are JSON objects built piece by piece (`Part`, in its own
# module so that the parts need not import this one); their shape is schemas/machine.json,
# which the tests validate every profile against.

# seconds per measurement and test-file size: the full run and --quick
FULL = {"mem_s": 2.0, "disk_s": 2.0, "file": 512 << 20}
QUICK = {"mem_s": 0.25, "disk_s": 0.25, "file": 16 << 20}


def profile_machine(data: list[str] | None = None, *, quick: bool = False,
                    nvml_factory: Callable[[], Any] | None = None,
                    link_worker: list[str] | None = None,
                    say: Callable[[str], None] = lambda s: None) -> Part:
    from gputop_dl.collect.boxprofile.cpus import read_cpus
    from gputop_dl.collect.boxprofile.gpus import read_gpus
    from gputop_dl.collect.boxprofile.links import measure_links
    from gputop_dl.collect.boxprofile.memory import measure_copy, read_memory
    from gputop_dl.collect.boxprofile.storage import profile_paths

    t0 = time.monotonic()
    knobs = QUICK if quick else FULL
    notes: list[str] = []
    cpus = read_cpus()
    notes += cpus.pop("notes")
    memory = read_memory(numa=cpus["numa"])
    say(f"memory: copying for {knobs['mem_s']:g} s, one process then {cpus['allowed_count']} at once")
    memory["copy"] = measure_copy(knobs["mem_s"], max(1, cpus["allowed_count"]))
    paths = list(data) if data else [os.getcwd()]
    say("storage: 128 KiB reads of " + ", ".join(paths))
    storage, more = profile_paths(paths, seconds=knobs["disk_s"], file_size=int(knobs["file"]))
    notes += more
    notes += [f"{', '.join(s['paths'])}: {s['note']}" for s in storage if s.get("note")]
    nvml = None
    try:
        if nvml_factory is None:
            from gputop_dl.collect.nvml.gpus import Nvml

            nvml_factory = Nvml
        nvml = nvml_factory()
        gpus, line = read_gpus(nvml)
    finally:
        if nvml is not None:
            nvml.close()
    if line:
        notes.append(line)
    if gpus and not quick:
        say(f"GPUs: copy rates of {len(gpus)} GPU(s) through a torch worker")
    notes += measure_links(gpus, cpus["numa"], quick=quick, worker=link_worker)
    return {"schema": SCHEMA, "created": time.time(), "host": socket.gethostname(),
            "quick": quick, "took_s": round(time.monotonic() - t0, 2), "cpus": cpus,
            "memory": memory, "storage": storage, "gpus": gpus, "notes": notes}
