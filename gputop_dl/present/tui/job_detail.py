"""The job details text: a job's live numbers, identity, processes, step phases, epoch times,
its config without the defaults, and its stderr tail (the job details screen's body)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from textual.content import Content

from gputop_dl.present.energy_text import energy_line
from gputop_dl.present.limited_text import limited_lines
from gputop_dl.present.stuck_text import stuck_details
from gputop_dl.present.tui.phase_bar import phase_lines
from gputop_dl.present.verdict_text import figure_text, provenance_text
from gputop_dl.snapshot import JobSample
from gputop_dl.text.fmt import (DASH, dash, duration, num, pct, progress, rank_list, rate, secs,
                                 size)
from gputop_dl.text.safe import clean


ALWAYS_SHOWN = ("name", "model", "dataset", "batch_size", "epochs", "gpus")


def _is_default(key: str, value: Any) -> bool:
    """Whether a workload config value is the Workload dataclass default."""
    from dataclasses import MISSING, fields

    from gputop_dl.workload import Workload

    for f in fields(Workload):
        if f.name == key:
            default = f.default if f.default is not MISSING else (
                f.default_factory() if f.default_factory is not MISSING else MISSING)
            if isinstance(default, tuple):
                default = list(default)
            return default is not MISSING and value == default
    return False


def _distributed_rows(j: JobSample) -> list[tuple[str, str]]:
    """A distributed job's run and its ranks on this node (none for other jobs)."""
    d = j.distributed
    if d is None:
        return []
    return [("run", f"{dash(d.run_id)} · node {dash(d.group_rank)} of {dash(d.nnodes)} · "
                    f"world size {dash(d.world_size)}"),
            ("ranks here", rank_list(asdict(r) for r in d.ranks))]


def job_detail_lines(j: JobSample | None, config: Mapping[str, Any] | None, extra: dict[str, str] | None = None) -> Content:
    """The job details text: live numbers, config, epoch times, stderr tail."""
    out: list[Content] = []
    if j is not None:
        rows = [
            ("status", (f"{j.status}: {j.failure}" if j.failure else j.status)
             + (f" ({j.phase})" if j.phase else "")),
            ("pid", f"{j.pid or DASH}" + (f"  (tree: {', '.join(map(str, j.pids))})" if j.pids else "")),
            *_distributed_rows(j),
            ("device", j.device or DASH), ("model", j.model or DASH),
            ("batch", DASH if j.batch_size is None else str(j.batch_size)),
            ("progress", progress(j.epoch, j.epochs, j.step, j.steps_per_epoch) + f"  ETA {secs(j.eta_s)}"),
            ("step", (f"over {secs(j.step_time_over_s)}" if j.step_time_s is None
                      and j.step_time_over_s is not None else secs(j.step_time_s))
             + f"  solo {secs(j.solo_step_time_s)}  slowdown {figure_text(j.slowdown, j.slowdown_at_least)}"
             + (f"  (step time {DASH}: {j.step_time_note})" if j.step_time_note else "")),
            ("throughput", f"{num(j.samples_per_s, '.1f')} samples/s"),
            ("data-wait", f"{pct(j.stall_fraction)}" + (f" (from {j.stall_source})" if j.stall_source else "")
             + (f" ({j.stall_note})" if j.stall_fraction is None and j.stall_note else "")),
            ("CPU", f"{num(j.cpu_cores, '.2f')} cores · {j.threads or DASH} threads · RSS {size(j.rss)}"),
            ("GPU", f"memory {size(j.gpu_mem)} · SM {pct(j.gpu_sm)}"),
            *_storage_rows(j),
            *[("energy", e) for e in (energy_line(j),) if e],
            *_identity_rows(j),
        ]
        if not j.launched:  # a found job: what only a launch knows is left out, not shown as "–"
            known = {"device": j.device, "model": j.model, "batch": j.batch_size, "progress": j.epoch,
                     "step": j.step_time_s if j.step_time_s is not None else (
                         j.slowdown if j.slowdown is not None else
                         j.slowdown_at_least if j.slowdown_at_least is not None else j.step_time_note),
                     "throughput": j.samples_per_s}
            rows = [(k, v) for k, v in rows if k not in known or known[k] is not None]
        out += [Content.assemble((f"{k:<11}", "bold"), clean(v)) for k, v in rows]
        if j.stuck is not None:  # where it hangs, the evidence, its main stack, the fix
            out += [Content(""), Content.styled("STUCK", "bold $text-error")]
            out += [Content(clean(f"  {line}")) for line in stuck_details(j.stuck)]
        out += _process_tree(j)
        out += phase_lines(j)  # step phases, solo against now; ranks (present/tui/phase_bar.py)
        out += [Content(""), Content.styled("epoch times", "bold $text-accent")]
        if j.epoch_times:
            out += [Content(f"  epoch {i}: {secs(t)}") for i, t in enumerate(j.epoch_times, 1)]
        else:
            out.append(Content.styled("  none finished yet", "$text-muted"))
    width = max([11] + [len(k) + 1 for k in extra or {}])  # a long label still gets a gap
    for k, v in (extra or {}).items():
        out.append(Content.assemble((f"{k:<{width}}", "bold"), clean(v)))
    if config:
        out += [Content(""), Content.styled("config (defaults left out)", "bold $text-accent")]
        for k, v in config.items():
            if k not in ALWAYS_SHOWN and (v in (None, (), [], {}, "") or k == "cpu_fallback_applied"
                                          or _is_default(k, v)):
                continue
            out.append(Content(clean(f"  {k} = {v!r}")))
        if config.get("cpu_fallback_applied"):
            out.append(Content.styled(f"  (no CUDA: cpu_fallback applied to {', '.join(config['cpu_fallback_applied'])})",
                                      "$text-warning"))
    if j is not None:
        out += [Content(""), Content.styled("stderr (last lines)", "bold $text-accent")]
        if j.stderr_tail:
            out += [Content.styled(clean(f"  {line}"), "$text-muted") for line in j.stderr_tail[-40:]]
        else:
            out.append(Content.styled("  (none yet: shown when the job ends)", "$text-muted"))
    return Content("\n").join(out)


def _storage_rows(j: JobSample) -> list[tuple[str, str]]:
    """Its reads from storage and the wait on them, and its page cache's domain with that
    domain's re-reads; rows only where read (a job on another box's figures has neither)."""
    rows = []
    if j.io_read_bytes_per_s is not None:
        rows.append(("disk", f"{rate(j.io_read_bytes_per_s)} from storage"
                     + (f" on {j.io_device_label}" if j.io_device_label else "")
                     + (f" · waits on I/O {pct(j.io_wait_fraction)}"
                        if j.io_wait_fraction is not None else "")))
    if j.mem_cgroup is None:
        if j.mem_note:
            rows.append(("memory", j.mem_note))
        return rows
    where = (f"page cache of cgroup {j.mem_domain} (its memory limit) · re-reads there "
             if j.mem_domain else f"page cache of the host (no memory limit above its cgroup "
             f"{j.mem_cgroup}) · re-reads in its cgroup ")
    rows.append(("memory", where + rate(j.mem_refault_bytes_per_s)
                 + (f" · waits on them {pct(j.memory_wait_fraction)}"
                    if j.memory_wait_fraction else "")))
    return rows


FOUND_BY = {"maps": "torch or a GPU in its memory maps",
            "nvml": "NVML's GPU process list (its memory maps are not readable)",
            "cmdline": "its command line, workers and CPU (its memory maps are not readable)"}


def _identity_rows(j: JobSample) -> list[tuple[str, str]]:
    """Who, since when, what and where, and the CPU wait and the slowdown's source."""
    rows = []
    if j.cpu_wait_fraction is not None or j.cpu_wait_note:
        rows.append(("CPU wait", pct(j.cpu_wait_fraction)
                     + (f" (trainer {pct(j.cpu_wait_trainer)}, workers {pct(j.cpu_wait_workers)})"
                        if j.cpu_wait_trainer is not None or j.cpu_wait_workers is not None else "")
                     + (f" · throttled {pct(j.cpu_throttled_fraction)}" if j.cpu_throttled_fraction else "")
                     + (f" · {j.cpu_wait_note}" if j.cpu_wait_note else "")))
    if j.slowdown_source:
        rows.append(("slowdown", provenance_text(j.slowdown, j.slowdown_source,
                                                 j.slowdown_method, j.slowdown_reference,
                                                 j.slowdown_at_least)
                     + (f" (confidence {pct(j.slowdown_confidence)})" if j.slowdown_confidence is not None else "")
                     + (f" · {j.slowdown_doubt}" if j.slowdown_doubt else "")))
    if j.user or j.elapsed_s is not None:
        rows.append(("user", f"{j.user or DASH} · running for {duration(j.elapsed_s)}"))
    cmd = j.cmdline or j.command
    if cmd:
        rows.append(("command", cmd))
    if j.found_by:  # how it was told a job, and what could not be read (collect/jobs/privilege.py)
        rows.append(("found by", FOUND_BY.get(j.found_by, j.found_by)))
    for lim in limited_lines([j]):
        rows.append(("unreadable", lim.split(": ", 1)[1]))
    if j.cwd:
        rows.append(("directory", j.cwd))
    if j.slurm:
        s = j.slurm
        rows.append(("slurm", f"job {s.job_id} · user {s.user or DASH} · partition "
                              f"{s.partition or DASH} · account {s.account or DASH}"))
    if j.container:
        rows.append(("container", j.container))
    if j.launched_by:
        rows.append(("launched by", f"gputop-dl session {j.launched_by}"))
    if j.identity_note:
        rows.append(("not known", j.identity_note))
    return rows


def _process_tree(j: JobSample) -> list[Content]:
    """The job's processes (trainer, ranks, loader workers) with CPU, RSS, state, GPU."""
    if not j.procs:
        return []
    gpu = any(p.gpu_mem is not None or p.gpu_sm is not None for p in j.procs)
    head = f"  {'pid':<16} {'role':<8} {'CPU':>5} {'RSS':>9} state" + ("  GPU mem    SM" if gpu else "")
    out = [Content(""), Content.styled(f"processes ({len(j.procs)})", "bold $text-accent"),
           Content.styled(head, "$text-muted")]
    for p in j.procs:
        pid = ("  " * p.depth + ("└ " if p.depth else "") + str(p.pid))
        line = (f"  {pid:<16} {p.role:<8} {num(p.cpu_cores, '.2f'):>5} {size(p.rss):>9} "
                f"{STATES.get(p.state or '', p.state or DASH):<5}")
        if gpu:
            line += f"  {size(p.gpu_mem):>7} {pct(p.gpu_sm):>5}"
        out.append(Content(line))
    return out


STATES = {"R": "run", "S": "sleep", "D": "disk", "T": "stop", "t": "trace", "I": "idle"}
