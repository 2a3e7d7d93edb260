"""`gputop-dl --once`: one snapshot of this machine as Rich tables (collect.machine takes it)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from gputop_dl.analyse.live.gpu_clocks import pcie_text, throttle_text
from gputop_dl.text.fmt import DASH, joules, num, pct, rate, size
from gputop_dl.snapshot import GpuSample, Snapshot
from gputop_dl.text.console import console as text_console
from gputop_dl.text.safe import escape, text


def print_once(snap: Snapshot, console: Console | None = None) -> None:
    console = console or text_console()
    h = snap.host
    if h is not None:
        console.print(f"[bold]host[/]: {h.cpus} CPUs, {pct(h.cpu_busy)} busy, load "
                      f"{num(h.load1, '.2f')}, CPU pressure {pct(h.cpu_pressure_some10)}, "
                      + (f"I/O pressure {pct(h.io_pressure_some10)}, "
                         if h.io_pressure_some10 is not None else "")
                      + f"memory {size(h.mem_used)} / {size(h.mem_total)}"
                      + (f", memory pressure {pct(h.memory_pressure_some10)}"
                         if h.memory_pressure_some10 is not None else "")
                      + (f", page-cache refaults {rate(h.memory_refault_bytes_per_s)}"
                         if h.memory_refault_bytes_per_s else "")
                      + (f", CPU packages {num(h.cpu_power_w, '.0f', ' W')} (RAPL)"
                         if h.cpu_power_w is not None else ""))
    if not snap.gpus:
        console.print(f"[bold]GPUs[/]: none — {escape(snap.notes[0] if snap.notes else snap.gpu_status)}")
    else:
        t = Table(header_style="bold")
        for c in ("GPU", "name", "util", "memory", "temp", "power", "energy", "SM clock", "PCIe"):
            t.add_column(c)
        for g in snap.gpus:
            t.add_row(str(g.index), text(g.name or DASH), pct(g.util),
                      f"{size(g.mem_used)} / {size(g.mem_total)}", num(g.temp_c, ".0f", " °C"),
                      num(g.power_w, ".0f", " W") if not g.error else text(g.error),
                      _energy_cell(g), _clock_cell(g), escape(pcie_text(g)) or DASH)
        console.print(t)
        for g in snap.gpus:  # module scope, a counter given up: what its joules are
            if g.energy_note:
                console.print(f"[dim]note: GPU {g.index} energy: {escape(g.energy_note)}[/]")
    if snap.gpu_processes:
        t = Table(title="GPU processes", header_style="bold", title_justify="left")
        for c in ("GPU", "PID", "memory", "SM"):
            t.add_column(c)
        for p in snap.gpu_processes:
            t.add_row(str(p.gpu_index), str(p.pid), size(p.mem_used), pct(p.sm_util))
        console.print(t)
    if snap.jobs:
        from gputop_dl.present.headless import jobs_table

        console.print(jobs_table(snap, console.width, fit_names=True))
        from gputop_dl.present.limited_text import limited_lines

        for lim in limited_lines(snap.jobs):  # what could not be read, and why
            console.print(f"[dim]{escape(lim)}[/]")
    if any(j.stuck for j in snap.jobs):  # named before the verdict: it matters most
        from gputop_dl.present.headless import stuck_text_lines

        for said in stuck_text_lines(snap.jobs):
            console.print(said)
    if snap.verdict:  # the live verdict (estimated from the jobs' waits; nothing paused)
        from gputop_dl.present.headless import verdict_lines

        for line in verdict_lines(snap.verdict):
            console.print(line)
    for note in (snap.notes if snap.gpus else snap.notes[1:]):  # [0]: the GPU line said it
        console.print(f"[dim]note: {escape(note)}[/]")


def _clock_cell(g: GpuSample) -> str:
    """"1410 / 1980 MHz", and what held it down ("throttled: power 34%") where anything did."""
    if g.sm_clock_mhz is None:
        return DASH
    out = f"{g.sm_clock_mhz}" + (f" / {g.sm_clock_max_mhz}" if g.sm_clock_max_mhz else "") + " MHz"
    held = throttle_text(g)
    return out + (f" [yellow]{escape(held)}[/]" if held else "")


def _energy_cell(g: GpuSample) -> str:
    """The GPU's joules over --once's interval, "power × time" where NVML gave no counter."""
    if g.energy_j is None:
        return DASH
    return joules(g.energy_j) + (" (power × time)" if g.energy_source == "power-integral" else "")
