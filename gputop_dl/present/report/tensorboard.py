"""`gputop-dl export DIR --tensorboard`: a recorded session as TensorBoard event files, one run per job.

Layout: `DIR/<session id>/<job>/events.out.tfevents.*` (the co-run, or the only phase of a
found job), `DIR/<session id>/<job>.solo/` for a solo baseline, so `tensorboard --logdir DIR`
lists one run per job and phase, and several sessions exported into one DIR side by side.
Every scalar carries the global step (the job's training steps counted from 1 in that phase)
and the wall time it was measured at:

- per step (launched jobs): `step/time_s`, `step/samples_per_s`, `step/data_stall`;
- per epoch: `epoch/time_s`, `epoch/loss` (the built-in trainer), `epoch/samples_per_s`,
  at the step the epoch ended;
- per tick: `job/cpu_cores`, `job/rss_bytes`, `job/gpu_memory_bytes`, and `gpu/util`,
  `gpu/memory_used_bytes` of the job's GPUs (mean over them); a job gputop-dl did not launch
  has no step events, so its ticks also give `step/time_s`, `step/samples_per_s` and
  `step/data_stall` where py-spy measured them, and the global step is the tick's index;
- per tick, where recorded: `job/cpu_wait` (share of the job's threads' runnable time spent
  waiting for a CPU), `job/cpu_wait_trainer`, `job/cpu_wait_workers`, `job/cpu_throttled`;
  `job/io_read_bytes_per_s` (from storage), `job/io_wait` (share of the live verdict's window
  blocked on I/O) and `job/major_faults_per_s`.

The session's verdict over time is its own run, `DIR/<session id>/_verdict` (a job's folder
never starts with `_`), where the session recorded its verdict changes (docs/contracts.md),
against the change's wall time; the global step counts the changes from 1:

- `verdict/change`, a text (TensorBoard's Text tab) per change: the new kind, the old one, the
  time since the session started, its worst slowdown and the first line of its reason;
- `verdict/worst_slowdown` at each change whose new verdict had a slowdown (estimated live);
- `verdict/is/<kind>`, per kind the session had, 1 while the verdict was of that kind and 0
  otherwise: two points per change at its time (before, after) and one at the session's end,
  so that on the Wall axis each kind is a step that starts and ends where the verdict changed.

The writer is TensorBoard's own `EventFileWriter` (the one `torch.utils.tensorboard` uses),
from the `tensorboard` package: the export needs no torch. tensorboardX was the other
candidate; it imports torch at import time whenever torch is installed (2.4 s here), which the
torch-free export must not. Without `tensorboard`, one line says what to install.
"""

from __future__ import annotations

import bisect
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

from gputop_dl.present.report.errors import ExportUsageError
from gputop_dl.record.store import Store

INSTALL_HINT = ("--tensorboard needs the tensorboard package: pip install 'gputop-dl[tensorboard]' "
                "(or pip install tensorboard)")
PHASE_SUFFIX = {"baseline": ".solo"}  # other phases: the job's own name
VERDICT_RUN = "_verdict"  # the session's verdict changes: `_run_dir` never names a job so


def _writer_api() -> tuple[Any, Any, Any]:
    """TensorBoard's event writer and protobuf modules (untyped: tensorboard ships no types)."""
    try:
        from tensorboard.compat.proto import event_pb2, summary_pb2
        from tensorboard.summary.writer.event_file_writer import EventFileWriter
    except ImportError:
        raise ExportUsageError(INSTALL_HINT) from None
    return EventFileWriter, event_pb2, summary_pb2


def _gpu_indices(job: Mapping[str, Any]) -> list[int]:
    """The physical GPUs of a job: a launched job's configured `gpus` (its own `cuda:0` is the
    first of them), a found job's device 'gpu0,2' -> [0, 2]; none for the CPU."""
    config, device = job.get("config") or {}, job.get("device") or ""
    if device == "cpu":
        return []
    if config.get("gpus"):
        return [int(g) for g in config["gpus"]]
    if device.startswith("gpu"):
        return [int(x) for x in re.findall(r"\d+", device)]
    return []


def _run_dir(out: str, sid: str, job: str, phase: str | None, n: int = 1) -> str:
    """The job's run folder; `n` > 1: the n-th job whose name cleans to the same folder."""
    safe = (re.sub(r"[^\w.()+-]+", "_", job).strip("._") or "job") + (f"-{n}" if n > 1 else "")
    return os.path.join(out, sid, safe + PHASE_SUFFIX.get(phase or "", ""))


class _Run:
    """One event file: scalars at (global step, wall time)."""

    def __init__(self, path: str, api: tuple[Any, Any, Any]):
        writer_cls, self._event_pb2, self._summary_pb2 = api
        os.makedirs(path, exist_ok=True)
        self.path = path
        self.count = 0
        self._w = writer_cls(path, max_queue_size=1000, flush_secs=3600)

    def scalar(self, tag: str, value: float | None, step: int, wall: float | None) -> None:
        if value is None or wall is None:  # not recorded: no point
            return
        summary = self._summary_pb2.Summary(value=[self._summary_pb2.Summary.Value(
            tag=tag, simple_value=float(value))])
        self._w.add_event(self._event_pb2.Event(wall_time=wall, step=step, summary=summary))
        self.count += 1

    def text(self, tag: str, value: str, step: int, wall: float) -> None:
        """A text summary (TensorBoard's Text tab renders it as Markdown)."""
        from tensorboard.compat.proto import tensor_pb2, tensor_shape_pb2, types_pb2
        from tensorboard.plugins.text.metadata import create_summary_metadata

        tensor = tensor_pb2.TensorProto(dtype=types_pb2.DT_STRING, string_val=[value.encode()],
                                        tensor_shape=tensor_shape_pb2.TensorShapeProto())
        summary = self._summary_pb2.Summary(value=[self._summary_pb2.Summary.Value(
            tag=tag, metadata=create_summary_metadata("", ""), tensor=tensor)])
        self._w.add_event(self._event_pb2.Event(wall_time=wall, step=step, summary=summary))
        self.count += 1

    def close(self) -> None:
        self._w.close()


def export_tensorboard(store: Store, sid: str, out: str) -> list[tuple[str, int]]:
    """Write session `sid` under `out`; returns (run folder, scalars written) per run."""
    api = _writer_api()
    gpu_rows = store.gpu_samples(sid)  # (t, gpu, util, mem_used, mem_total, temp, power, thr)
    by_t: dict[float, dict[int, tuple[Any, Any]]] = {}  # t -> GPU -> (util, mem_used)
    for t, g, util, mem, *_ in gpu_rows:
        by_t.setdefault(t, {})[g] = (util, mem)
    written = []
    taken: dict[str, str] = {}  # run folder -> the job it is for: every job keeps its own
    samples_seen: list[tuple[Any, ...]] = []  # each job's last sample (the session's last tick)
    for job in store.jobs(sid):
        name, gpus = job["name"], _gpu_indices(job)
        samples = store.job_samples(sid, name)  # (t, job, phase, cores, rss, nprocs, gmem, ...)
        samples_seen += samples[-1:]
        phases = list(dict.fromkeys(r[2] for r in samples))
        phases += [p for p in ("baseline", "co-run") if p not in phases
                   and store.step_count(sid, name, p)]
        for phase in phases:
            path, n = _run_dir(out, sid, name, phase), 1
            while taken.setdefault(path, name) != name:  # "a b" and "a_b", or "." and ".."
                n += 1
                path = _run_dir(out, sid, name, phase, n)
            run = _Run(path, api)
            try:
                _write_phase(run, store, sid, name, phase, gpus,
                             [r for r in samples if r[2] == phase], by_t)
            finally:
                run.close()
            written.append((run.path, run.count))
    last = max([t for t in by_t] + [r[0] for r in samples_seen], default=None)
    verdict = _write_verdict_changes(store, sid, out, api, last)
    return written + ([verdict] if verdict else [])


def _since(t: float, t0: float | None) -> str:
    if t0 is None or t < t0:
        return ""
    m, s = divmod(int(t - t0), 60)
    return f" ({m}:{s:02d} after the start)" if m < 60 else f" ({m // 60}:{m % 60:02d}:{s:02d} after the start)"


def _write_verdict_changes(store: Store, sid: str, out: str, api: tuple[Any, Any, Any],
                           last_sample: float | None) -> tuple[str, int] | None:
    """The `_verdict` run (module docstring); None when the session recorded no change (or
    not at all: a session from before they were kept). The last kind holds until the session
    ended (a session still running: its last sample)."""
    changes = store.verdict_changes(sid)
    if not changes:
        return None
    row = store.session(sid)
    t0 = row.started if row is not None else None
    ended = row.ended if row is not None else None
    end = max(c["t"] for c in changes)
    end = max(end, ended if ended is not None else last_sample if last_sample is not None else end)
    kinds = list(dict.fromkeys(k for c in changes for k in (c["from_"], c["to"]) if k))
    run = _Run(os.path.join(out, sid, VERDICT_RUN), api)
    try:
        kind: str | None = None
        for i, c in enumerate(changes, start=1):
            worst = c["worst_slowdown"]
            lines = [f"**{c['to']}** (was {c['from_'] or 'no verdict yet'})"
                     f"{_since(c['t'], t0)}"]
            if worst is not None:
                lines.append(f"worst slowdown {worst:.2f}×")
            if c["reason"]:
                lines.append(c["reason"])
            run.text("verdict/change", "  \n".join(lines), i, c["t"])
            run.scalar("verdict/worst_slowdown", worst, i, c["t"])
            for k in kinds:  # the step: the old kind's value, then the new one, at the change
                run.scalar(f"verdict/is/{k}", float(k == kind), 2 * i - 1, c["t"])
                run.scalar(f"verdict/is/{k}", float(k == c["to"]), 2 * i, c["t"])
            kind = c["to"]
        for k in kinds:  # the last kind holds until the session's end
            run.scalar(f"verdict/is/{k}", float(k == kind), 2 * len(changes) + 1, end)
    finally:
        run.close()
    return run.path, run.count


def _write_step_phases(run: _Run, store: Store, sid: str, name: str, phase: str | None) -> None:
    """Each step's phases in seconds (docs/phases.md): phase/data_s, h2d_s, forward_s,
    backward_s, optimizer_s, other_s; a phase not seen in a step has no point there."""
    for i, s in enumerate(store.phase_rows(sid, name, phase) if phase else [], start=1):
        ph = s.get("ph")
        if ph is None or s["t_step"] is None:
            continue
        run.scalar("phase/data_s", s["t_data"], i, s["t"])
        for p in ("h2d", "forward", "backward", "optimizer"):
            run.scalar(f"phase/{p}_s", ph.get(p), i, s["t"])
        run.scalar("phase/other_s", max(0.0, s["t_step"] - (s["t_data"] or 0.0)
                                        - sum(ph.values())), i, s["t"])


def _write_phase(run: _Run, store: Store, sid: str, name: str, phase: str | None,
                 gpus: list[int], samples: Sequence[tuple[Any, ...]],
                 gpu_by_t: Mapping[float, Mapping[int, tuple[Any, Any]]]) -> None:
    steps = store.step_rows(sid, name, phase) if phase else []  # (t, t_step, t_data, samples)
    step_times = [r[0] for r in steps if r[0] is not None]  # the store writes a time with each
    for i, (t, t_step, t_data, n) in enumerate(steps, start=1):
        run.scalar("step/time_s", t_step, i, t)
        if t_step:
            run.scalar("step/samples_per_s", None if n is None else n / t_step, i, t)
            run.scalar("step/data_stall", None if t_data is None else t_data / t_step, i, t)
    _write_step_phases(run, store, sid, name, phase)
    for e in store.events(sid, job=name, ev="epoch", phase=phase):
        at = bisect.bisect_right(step_times, e["t"]) if steps else int(e.get("epoch") or 0)
        run.scalar("epoch/time_s", e.get("time_s"), at, e["t"])
        run.scalar("epoch/loss", e.get("loss"), at, e["t"])
        run.scalar("epoch/train_accuracy", e.get("accuracy"), at, e["t"])
        if e.get("samples") and e.get("time_s"):
            run.scalar("epoch/samples_per_s", e["samples"] / e["time_s"], at, e["t"])
    for k, (t, _job, _ph, cores, rss, _np, gmem, stall, step_t, sps) in enumerate(samples, 1):
        at = bisect.bisect_right(step_times, t) if steps else k
        run.scalar("job/cpu_cores", cores, at, t)
        run.scalar("job/rss_bytes", rss, at, t)
        run.scalar("job/gpu_memory_bytes", gmem, at, t)
        if not steps:
            run.scalar("step/time_s", step_t, at, t)
            run.scalar("step/samples_per_s", sps, at, t)
            run.scalar("step/data_stall", stall, at, t)
        on = [gpu_by_t.get(t, {}).get(g) for g in gpus]
        utils = [u for u, _ in filter(None, on) if u is not None]
        mems = [m for _, m in filter(None, on) if m is not None]
        if utils:
            run.scalar("gpu/util", sum(utils) / len(utils), at, t)
        if mems:
            run.scalar("gpu/memory_used_bytes", sum(mems), at, t)
    _write_cpu_wait(run, store, sid, name, samples, step_times)


# CPU wait: per tick, where it was recorded
CPU_WAIT_TAGS = ("job/cpu_wait", "job/cpu_wait_trainer", "job/cpu_wait_workers",
                 "job/cpu_throttled")


DISK_TAGS = ("job/io_read_bytes_per_s", "job/io_wait", "job/major_faults_per_s")
MEMORY_TAGS = ("job/refault_bytes_per_s", "job/memory_wait")
# GPU energy (docs/energy.md): joules since the run began, power, J/step, samples per joule
ENERGY_TAGS = ("job/energy_j", "job/power_w", "job/energy_per_step_j", "job/samples_per_joule")


def _write_cpu_wait(run: _Run, store: Store, sid: str, name: str,
                    samples: Sequence[tuple[Any, ...]],
                    step_times: list[float]) -> None:
    """`job/cpu_wait` (all threads), `_trainer`, `_workers` and `job/cpu_throttled`, 0..1, and
    the disk, memory and energy scalars (DISK_TAGS, MEMORY_TAGS, ENERGY_TAGS), at the same global steps as the tick's other scalars."""
    _write_per_tick(run, CPU_WAIT_TAGS, {r[0]: r[1:] for r in store.job_cpu_wait(sid, name)},
                    samples, step_times)
    _write_per_tick(run, DISK_TAGS, {r[0]: r[1:] for r in store.job_disk(sid, name)},
                    samples, step_times)
    _write_per_tick(run, MEMORY_TAGS, {r[0]: r[1:] for r in store.job_memory(sid, name)},
                    samples, step_times)
    _write_per_tick(run, ENERGY_TAGS, {r[0]: r[1:] for r in store.job_energy_ticks(sid, name)},
                    samples, step_times)


def _write_per_tick(run: _Run, tags: tuple[str, ...], waits: Mapping[float, Sequence[Any]],
                    samples: Sequence[tuple[Any, ...]],
                    step_times: list[float]) -> None:
    if not waits:
        return
    for k, row in enumerate(samples, 1):
        t = row[0]
        vals = waits.get(t)
        if vals is None:
            continue
        at = bisect.bisect_right(step_times, t) if step_times else k
        for tag, v in zip(tags, vals):
            run.scalar(tag, v, at, t)
