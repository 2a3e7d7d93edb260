"""A launched job's live state: its process, its trainer events, its process-tree samples.

`JobRun.poll()` reads the job's new events, notices its exit and samples its process tree;
`JobRun.sample()` turns that into the tick's `JobSample` row. A `JobRun` is also what the
verdict's evidence reads (it has the fields of `analyse.recorded.evidence.JobSeries`).
"""

from __future__ import annotations

import getpass
import os
import statistics
import time
from typing import Any

from gputop_dl.analyse.stats.jobstats import eta_s, step_stats
from gputop_dl.analyse.stats.phases import live_phases, live_ranks
from gputop_dl.injob.channel import EventReader
from gputop_dl.collect.nvml.gpu_use import GpuUse
from gputop_dl.collect.proc.oomkill import oom_killed, read_counts
from gputop_dl.collect.proc.procs import TreeSampler
from gputop_dl.collect.proc.proctree import proc_tree, ranks_of
from gputop_dl.collect.jobs.ranks import RankReader, rank_cpu
from gputop_dl.collect.proc.diskio import io_fields
from gputop_dl.collect.proc.memory import memory_fields
from gputop_dl.collect.proc.cpu_wait import trainer_pids, tree_wait, wait_fields
from gputop_dl.collect.proc.procs import TreeSample
from gputop_dl.control.launch import Job
from gputop_dl.control.stop import describe_exit
from gputop_dl.snapshot import Distributed, JobSample, ProcSample
from gputop_dl.workload import Workload, shown_command

# A trainer event as the job wrote it (injob/channel.py: one JSON object a line, "ev" its kind):
# read from the job's events file, so a JSON document from outside, checked where it is read
Event = dict[str, Any]
# A job's solo baseline (analyse/slowdown/solo.py, probe.py): step_time_s, samples_per_s,
# stall_fraction, steps, cpu_cores, cv, mean_step_time_s, device, solo_phases (+ note, cached).
# A JSON document: cached in the store across sessions and read back from it, and read by
# analyse's evidence (JobSeries.solo)
SoloBaseline = dict[str, Any]


class JobRun:
    """A launched job's live state; touched only by the engine thread."""

    def __init__(self, w: Workload, proc: Job, phase: str, solo: SoloBaseline | None = None):
        from gputop_dl.config import memory_cap_of  # here: not on the monitor's start-up

        self.w, self.proc, self.phase = w, proc, phase
        self.solo = solo  # the job's solo baseline (step time, stall, CPU), if one was measured
        self.config = w.to_dict(redact=True)
        self.reader = EventReader(proc.events_path)
        self.tree = TreeSampler(proc.pid) if proc.pid is not None else None  # None: not started
        # the kernel's OOM-kill counters at the start: a SIGKILL is blamed on it only if they rose
        self.oom_before = read_counts(proc.pid) if proc.pid is not None else None
        self.steps: list[Event] = []
        self.rank_steps: dict[int, list[Event]] = {}  # every rank's latest steps (docs/phases.md)
        self.epochs: list[Event] = []
        self.info: Event = {}  # its "started" event
        self.ready = False  # a script at the co-run's start barrier said "ready" (injob/channel.py)
        self.status = "starting"
        self.failure: str | None = getattr(proc, "reason", None)  # a job that never started
        self.exit_code: int | None = None
        self.stopped_by_us = False
        self.mem_cap = memory_cap_of(w.memory_limit)  # bytes of RSS (None: unknown host)
        self.capped = False  # stopped for crossing mem_cap: failed, with "memory cap" the cause
        self.ended: float | None = None
        self.tree_sample: TreeSample | None = None
        self.ranks = RankReader()
        self.distributed: Distributed | None = None  # its ranks on this node (kept after the job ended)
        self.rank_cpu: tuple[tuple[int, float], ...] = ()
        self.cpu_series: list[tuple[float, float]] = []  # (time, cores)
        # what the verdict's evidence reads (analyse.recorded.evidence.JobSeries) besides the above
        self.name = w.name
        self.device: str | None = None  # its "started" event's
        self.cpu = self.cpu_series  # the same list
        # the GPUs (NVML indexes) its processes were seen on: a command job declares none
        self.seen_gpus: set[int] = set()
        self.stderr_tail: tuple[str, ...] = ()
        self._tail_t = 0.0  # last live refresh of a command job's log tail
        # identity: who and what, once; the process tree from the tick's PPID map
        self._user = _user()
        self._cmdline = shown_command(proc.argv) if getattr(proc, "argv", None) else None
        self._cwd = w.cwd or os.getcwd()
        self._cmap: dict[int, list[int]] | None = None
        if proc.pid is None:  # never started (launch.NotStarted): ended from the first, so no
            # stop, pause or wait ever reaches it, not even before its first poll
            self.exit_code, self.ended, self.status = proc.poll(), proc.started, "failed"
            self.stderr_tail = tuple(proc.log_tail())

    def _take(self, evs: list[Event]) -> None:
        for e in evs:
            kind = e.get("ev")
            if kind == "step":
                self.steps.append(e)
                self._rank_step(e)
            elif kind == "rank_step":
                self._rank_step(e)
            elif kind == "epoch":
                self.epochs.append(e)
            elif kind == "ready":
                self.ready = True
            elif kind == "started":
                self.info = e
                self.device = e.get("device")
                self.status = "running"
            elif kind == "failed" and self.failure is None:  # the first cause wins (rank 0, not
                # the torchrun launcher that reports the rank's failure after it)
                self.failure = f"{e.get('cause', 'exception')}: {e.get('message', '')}".strip()

    def _rank_step(self, e: Event) -> None:
        rank = e.get("rank")
        if isinstance(rank, int):
            steps = self.rank_steps.setdefault(rank, [])
            steps.append(e)
            if len(steps) > 2000:  # the live view needs the latest few hundred only
                del steps[:1000]

    def poll(self, now: float, cmap: dict[int, list[int]] | None = None) -> list[Event]:
        self._cmap = cmap
        """Read new events, notice an exit, sample the process tree. Returns the new events."""
        evs = self.reader.read_new()
        self._take(evs)
        if self.exit_code is None:
            code = self.proc.poll()
            if code is not None:
                late = self.reader.read_new()
                self._take(late)
                evs += late
                self.exit_code, self.ended = code, now
                self.stderr_tail = tuple(self.proc.log_tail())
                if self.stopped_by_us:
                    self.status = "failed" if self.capped else "stopped"
                elif code == 0:
                    self.status = "done"
                else:
                    self.status = "failed"
                    if self.failure is None:
                        self.failure = describe_exit(code, False, self._oom_killed(code))
                self.tree_sample, self.rank_cpu = None, ()
                if self.tree is not None:
                    self.tree.close()
            else:
                if self.status == "starting" and self.w.is_command:
                    self.status = "running"
                if self.w.is_command and now - self._tail_t >= 2.0:  # its log, live
                    self._tail_t = now
                    self.stderr_tail = tuple(self.proc.log_tail())
                ts = self.tree.sample(cmap) if self.tree is not None else None
                self.tree_sample = ts
                if ts is not None and self.proc.pid is not None:
                    self.distributed = self.ranks.read(self.proc.pid, cmap) or self.distributed
                self.rank_cpu = rank_cpu(self.distributed, ts, cmap)
                if ts is not None and ts.cpu_cores is not None:
                    self.cpu_series.append((now, ts.cpu_cores))
        return evs

    def _oom_killed(self, code: int) -> bool | None:
        """Whether the OOM counters rose since the start (read only for a SIGKILL)."""
        if code != -9 or self.oom_before is None:
            return None
        after = read_counts(None, where=self.oom_before.cgroup_file)
        return oom_killed(self.oom_before, after)

    @property
    def alive(self) -> bool:
        return self.exit_code is None

    def rss_over_cap(self) -> int | None:
        """The RSS of the job's process tree at this tick's sample where it is over the job's
        cap, else None (the tree sampler's reading: nothing more is read for it)."""
        ts = self.tree_sample
        over = (self.mem_cap is not None and ts is not None and self.alive
                and not self.capped and ts.rss > self.mem_cap)
        return ts.rss if over and ts is not None else None

    def measured_cpu_cores(self) -> float | None:
        """Mean CPU cores after warm-up (from the time the warm-up steps were done)."""
        if (t0 := self.warm_at()) is not None:
            vals = [c for t, c in self.cpu_series if t >= t0]
        else:
            vals = [c for _, c in self.cpu_series]
        return statistics.fmean(vals) if vals else None

    def warm_at(self) -> float | None:
        """When its warm-up steps were done (the step event's own time; None: not yet)."""
        return self.steps[self.w.warmup_steps]["t"] if len(self.steps) > self.w.warmup_steps else None

    def sample(self, gpu: GpuUse) -> JobSample:
        """This tick's row for the job (after `poll`)."""
        w, solo = self.w, self.solo
        st = step_stats(self.steps, warmup=w.warmup_steps)
        ts = self.tree_sample
        pids = ts.pids if ts else ()
        mem, sm, on = gpu.of_pids(pids)
        self.seen_gpus.update(on)
        last = self.steps[-1] if self.steps else None
        cmd = w.is_command  # a command job's numbers come from the start-up hook, or nowhere
        spe = self.info.get("steps_per_epoch") or (None if cmd else w.steps_per_epoch)
        epochs = self.info.get("epochs") or (None if cmd else w.epochs)
        eta = None
        if last and spe and epochs and self.alive:
            done = (last["epoch"] - 1) * spe + last["step"]
            eta = eta_s(done, epochs * spe, st.step_time_s)
        solo_t = solo.get("step_time_s") if solo else None
        ranks, straggler = live_ranks(self.rank_steps, w.warmup_steps)
        return JobSample(
            name=w.name, pid=self.proc.pid, launched=True, pids=pids, status=self.status,
            failure=self.failure, device=self.info.get("device"),
            batch_size=self.info.get("batch_size") if cmd else w.batch_size,
            model=None if w.is_command else w.model,
            cpu_cores=ts.cpu_cores if ts else None, rss=ts.rss if ts else None,
            threads=ts.threads if ts else None, stall_fraction=st.stall_fraction,
            stall_source=("hook" if cmd else "trainer") if st.n else None,
            step_time_s=st.step_time_s, mean_step_time_s=st.mean_step_s,
            samples_per_s=st.samples_per_s,
            epoch=last["epoch"] if last else None,
            epochs=epochs, step=last["step"] if last else None, steps_per_epoch=spe, eta_s=eta,
            epoch_times=tuple(e["time_s"] for e in self.epochs), gpu_mem=mem, gpu_sm=sm,
            solo_step_time_s=solo_t, phase=self.phase,
            stderr_tail=self.stderr_tail, distributed=self.distributed,
            rank_cpu_cores=self.rank_cpu, **self._identity(ts, gpu),
            phases=live_phases(self.steps, w.warmup_steps, (solo or {}).get("solo_phases")),
            ranks=ranks, straggler=straggler,
            **wait_fields(tree_wait(ts, self.proc.pid, self.distributed)),
            **io_fields(ts, trainer_pids(self.proc.pid, self.distributed)), **memory_fields(ts),
            autogroup=ts.autogroup if ts is not None else None)

    def _identity(self, ts: TreeSample | None, gpu: GpuUse) -> dict[str, Any]:
        """The identity fields of JobSample for a job launched here."""
        started = getattr(self.proc, "started", None)
        end = self.ended if self.ended is not None else time.time()
        procs: tuple[ProcSample, ...] = ()
        if ts is not None and self.tree is not None and self._cmap is not None and self.proc.pid is not None:
            procs = proc_tree(self.proc.pid, self._cmap, self.tree.stats(), ts.cpu_by_pid,
                              ranks_of(self.distributed), gpu)
        return {"user": self._user, "elapsed_s": None if started is None else max(0.0, end - started),
                "cmdline": self._cmdline, "cwd": self._cwd, "procs": procs}


def _user() -> str | None:
    try:
        return getpass.getuser()
    except Exception:  # no name for this uid (a container without /etc/passwd entry)
        return None
