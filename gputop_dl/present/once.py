"""`gputop-dl --once`: take one snapshot of this machine and print it (Rich tables or JSON)."""

from __future__ import annotations

import time

from rich.console import Console
from rich.table import Table

from gputop_dl.present.fmt import DASH, num, pct, size
from gputop_dl.snapshot import Snapshot


def take_snapshot(settle_s: float = 0.5, nvml=None, stall_s: float = 0.0,
                  foreign=None) -> Snapshot:
    """Sample host, GPUs and the training jobs running here; CPU figures are averaged over
    `settle_s` seconds.

    Jobs not launched by gputop-dl are discovered (torch or GPU processes). Their data-stall
    needs a py-spy burst: with `stall_s` = 0 (the default) it is unknown (None); with
    `stall_s` > 0 every job's main thread is sampled for that long, all jobs at once, and the
    snapshot waits for it. `foreign`: a `ForeignJobs` (tests inject one)."""
    import threading

    from gputop_dl.collect import pyspy
    from gputop_dl.collect.foreign import ForeignJobs
    from gputop_dl.collect.host import HostSampler
    from gputop_dl.collect.nvml import GpuUse, Nvml
    from gputop_dl.collect.stall import StallResult

    nvml = nvml or Nvml()
    host = HostSampler()
    fj = foreign or ForeignJobs(stall=False)
    gprocs = nvml.processes()
    errors: list[str] = []
    threads = []
    try:
        fj.refresh()
        fj.sample(GpuUse.of(gprocs))  # first look: starts the CPU-time deltas

        def burst(key, pid: int) -> None:
            est, err = pyspy.record_stall(pid, stall_s, 50)
            if err:
                errors.append(err)
            elif est is not None and est.samples:
                fj.overrides[key] = StallResult(est.fraction, est.samples, est.step_time_s,
                                                time.time())

        if stall_s > 0:
            for f in fj.found:
                t = threading.Thread(target=burst, args=((f.pid, f.start), f.target), daemon=True)
                t.start()
                threads.append(t)
    except Exception as exc:  # noqa: BLE001 - a snapshot without jobs is still a snapshot
        errors.append(f"job discovery failed: {exc}")
        fj = None
    time.sleep(settle_s)
    for t in threads:
        t.join(stall_s + 25)
    notes = [] if nvml.status == "ok" else [nvml.status_detail]
    gprocs = nvml.processes()
    jobs: list = []
    if fj is not None:
        try:
            fj.refresh()
            jobs, more = fj.sample(GpuUse.of(gprocs))
            notes += more
        except Exception as exc:  # noqa: BLE001
            notes.append(f"job discovery failed: {exc}")
    if jobs and stall_s <= 0:
        notes.append("data-stall of jobs not launched here is unknown in a one-shot snapshot "
                     "(it needs a py-spy burst; the live monitor measures it)")
    perm = next((e for e in errors if pyspy.is_permission_error(e)), None)
    if perm:
        notes.append(f"data-stall unknown: py-spy may not attach ({perm}); {pyspy.PTRACE_HINT}")
    return Snapshot(time=time.time(), gpu_status=nvml.status, gpus=nvml.sample(),
                    host=host.sample(), jobs=tuple(jobs), gpu_processes=gprocs,
                    notes=tuple(notes))


def print_once(snap: Snapshot, console: Console | None = None) -> None:
    if console is None:
        console = Console()
        if not console.is_terminal:  # piped: full lines instead of 80 columns
            console = Console(width=160)
    h = snap.host
    if h is not None:
        console.print(f"[bold]host[/]: {h.cpus} CPUs, {pct(h.cpu_busy)} busy, load "
                      f"{num(h.load1, '.2f')}, CPU pressure {pct(h.cpu_pressure_some10)}, "
                      f"memory {size(h.mem_used)} / {size(h.mem_total)}")
    if not snap.gpus:
        console.print(f"[bold]GPUs[/]: none — {snap.notes[0] if snap.notes else snap.gpu_status}")
    else:
        t = Table(header_style="bold")
        for c in ("GPU", "name", "util", "memory", "temp", "power"):
            t.add_column(c)
        for g in snap.gpus:
            t.add_row(str(g.index), g.name or DASH, pct(g.util),
                      f"{size(g.mem_used)} / {size(g.mem_total)}", num(g.temp_c, ".0f", " °C"),
                      num(g.power_w, ".0f", " W") if not g.error else g.error)
        console.print(t)
    if snap.gpu_processes:
        t = Table(title="GPU processes", header_style="bold", title_justify="left")
        for c in ("GPU", "PID", "memory", "SM"):
            t.add_column(c)
        for p in snap.gpu_processes:
            t.add_row(str(p.gpu_index), str(p.pid), size(p.mem_used), pct(p.sm_util))
        console.print(t)
    if snap.jobs:
        from gputop_dl.present.headless import jobs_table

        console.print(jobs_table(snap))
    for note in (snap.notes if snap.gpus else snap.notes[1:]):  # [0]: the GPU line said it
        console.print(f"[dim]note: {note}[/]")
