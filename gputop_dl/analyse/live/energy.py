"""A job's energy: its GPUs' joules tick by tick, a shared GPU's split by time share, and its
joules per step, per epoch and samples per joule.

`EnergyLedger.update` takes each tick's GPU samples (their `energy_j`, collect/nvml/energy.py),
the processes NVML lists on each GPU and the jobs' process ids, and adds to each job the GPU's
joules since the last tick: all of them where the job's processes are the only ones on it, else
its share of the GPU's time: time-sliced contexts take turns, so the owners computing on it share
it equally (an owner NVML saw idle there gets none), with the processes of no job as one more
owner; the job's figure is then **an estimate**. NVML's per-process SM shares are not the split:
two identical processes read 57 % and 19 % (docs/validation.md). `JobEnergy` is a job's result:
joules over its run, its power over its last `WINDOW_S` seconds on its GPUs, and from that its
joules per step (x its step time), per epoch (x its epoch time, else x steps per epoch) and
samples per joule (its samples/s over the power). A job on no GPU, or on a box whose GPUs give no energy,
has None and the reason, never 0 J. A launch's phases' means are kept for its verdict
(`note_phase`; the comparison itself is analyse/recorded/energy_phases.py). Pure: no reading, no clock.
"""

from __future__ import annotations

import statistics
from collections import deque
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from gputop_dl.analyse.recorded.energy_phases import PhaseEnergy
from gputop_dl.snapshot import GpuProcess, GpuSample, JobSample, Snapshot, evolve

__all__ = ["EnergyLedger", "JobEnergy", "WINDOW_S", "job_keys", "once", "split_shares",
           "with_energy"]

WINDOW_S = 10.0  # a job's power: its joules over about this many seconds
# ... and not over fewer than these: the counter's differences come in steps of its update
# period (up to 100 ms), so a shorter span could read several times the true power
MIN_POWER_S = 0.5
_OTHERS = ("", -1)  # the owner of a GPU process that is no job's
MODULE_NOTE = ("module power: on a Grace superchip NVML's power and energy include its CPU and "
               "memory")


class JobEnergy(NamedTuple):
    """A job's energy so far (None: unknown, `note` says why); a NamedTuple: one a job a tick."""

    joules: float | None = None  # over its run, on its GPUs (its share of shared ones)
    power_w: float | None = None  # over the last WINDOW_S
    per_step_j: float | None = None
    per_epoch_j: float | None = None
    samples_per_joule: float | None = None
    estimate: bool | None = None  # True: a GPU it shared was split by time share
    source: str | None = None  # counter | power-integral | mixed (its GPUs' sources)
    note: str | None = None


def split_shares(procs: Iterable[GpuProcess], owner: dict[int, tuple[str, int]]
                 ) -> dict[int, dict[tuple[str, int], float]]:
    """GPU index -> {owner: share 0..1 of the GPU's time this tick}; a process no job owns
    counts for "others". Time-sliced contexts take turns, so the owners computing share the
    time equally; an owner whose processes NVML saw idle (SM share 0 while another's was
    above 0) gets none. NVML's SM shares themselves are not used as the split: they read
    57 %/19 % for two identical processes (docs/validation.md)."""
    active: dict[int, dict[tuple[str, int], bool]] = {}  # owner -> some SM share above 0 or unknown
    for p in procs:
        who = owner.get(p.pid, _OTHERS)
        per = active.setdefault(p.gpu_index, {})
        per[who] = per.get(who, False) or p.sm_util is None or p.sm_util > 0
    out: dict[int, dict[tuple[str, int], float]] = {}
    for gpu, owners in active.items():
        turns = [who for who, computing in owners.items() if computing] or list(owners)
        out[gpu] = {who: (1.0 / len(turns) if who in turns else 0.0) for who in owners}
    return out


class _Job:
    __slots__ = ("joules", "sources", "estimate", "window", "gpus", "module")

    def __init__(self) -> None:
        self.joules: float | None = None
        self.sources: set[str] = set()
        self.estimate = False
        self.window: deque[tuple[float, float]] = deque()  # (time, joules)
        self.gpus: set[int] = set()
        self.module = False  # some joules of it are a Grace module's (its CPU and memory too)


class EnergyLedger:
    """Each job's joules from tick to tick (see the module docstring)."""

    def __init__(self) -> None:
        self._last: dict[int, tuple[float | None, float, float]] = {}  # GPU -> (since, J, t)
        self._jobs: dict[tuple[str, int], _Job] = {}
        self._no_energy: str | None = None
        # (job, phase) -> (sum of samples/J, ticks, any estimate): a launch's rows past warm-up
        self._phases: dict[tuple[str, str], tuple[float, int, bool]] = {}

    def note_phase(self, js: JobSample) -> None:
        """A launched row of this tick, with its figures: its phase's mean samples per joule
        (ticks with a step time only: past the warm-up) for the verdict's energy evidence."""
        if js.phase is None or js.samples_per_joule is None or js.step_time_s is None:
            return
        key = (js.name, js.phase)
        total, n, est = self._phases.get(key, (0.0, 0, False))
        self._phases[key] = (total + js.samples_per_joule, n + 1,
                             est or bool(js.energy_estimate))

    def phases(self) -> dict[str, tuple[PhaseEnergy, ...]]:
        """Each launched job's phases as `PhaseEnergy`s (mean samples per joule; no joules:
        0.0 there, not read), for `corun_energy`."""
        out: dict[str, list[PhaseEnergy]] = {}
        for (name, phase), (total, n, est) in self._phases.items():
            out.setdefault(name, []).append(PhaseEnergy(
                phase=phase, joules=0.0, power_w=None, per_step_j=None, per_epoch_j=None,
                samples_per_joule=total / n, estimate=est, samples=n))
        return {k: tuple(v) for k, v in out.items()}

    def update(self, now: float, gpu_status: str, gpus: Sequence[GpuSample],
               procs: Sequence[GpuProcess], jobs: Iterable[tuple[str, int, Sequence[int]]]) -> None:
        """One tick: `jobs` as (name, root pid, its process ids); jobs not named are dropped."""
        deltas: dict[int, tuple[float, str | None, float]] = {}  # GPU -> (J, source, from)
        module = set()  # the GPUs whose power is a Grace module's
        for g in gpus:
            if g.energy_j is None:
                continue
            if g.energy_scope == "module":
                module.add(g.index)
            last = self._last.get(g.index)
            if last is not None and last[0] == g.energy_since and g.energy_j == last[1]:
                continue  # not moved (a tick shorter than its update period): the next covers it
            if last is None and g.energy_since is not None:  # its joules since its first read
                if g.energy_j <= 0.0:
                    continue  # a first interval shorter than its update period: wait for one
                deltas[g.index] = (g.energy_j, g.energy_source, g.energy_since)
            elif last is not None and last[0] == g.energy_since and g.energy_j > last[1]:
                deltas[g.index] = (g.energy_j - last[1], g.energy_source, last[2])
            self._last[g.index] = (g.energy_since, g.energy_j, now)
        self._no_energy = _why_no_energy(gpu_status, gpus)
        owner: dict[int, tuple[str, int]] = {}
        keys = []
        for name, root, pids in jobs:
            key = (name, root)
            keys.append(key)
            for pid in pids:
                owner[pid] = key
        old = self._jobs
        self._jobs = {k: old.get(k) or _Job() for k in keys}
        if not deltas and self._no_energy is not None:
            return  # no GPU gives energy: nothing to split
        fed: set[tuple[str, int]] = set()  # the jobs given joules this tick
        for gpu, shares in split_shares(procs, owner).items():
            delta = deltas.get(gpu)
            for key, share in shares.items():
                job = self._jobs.get(key)
                if job is None:
                    continue
                job.gpus.add(gpu)
                if delta is None:
                    continue
                if job.joules is None:  # its first interval: the power window opens there
                    job.window.append((delta[2], 0.0))
                job.joules = (job.joules or 0.0) + delta[0] * share
                fed.add(key)
                job.module = job.module or gpu in module
                if delta[1]:
                    job.sources.add(delta[1])
                if share < 1.0:
                    job.estimate = True
        for key in fed:  # a job off its GPUs (ended, or between ticks of an unmoved counter)
            job = self._jobs[key]  # keeps the power of its last seconds on them
            job.window.append((now, job.joules or 0.0))
            while len(job.window) > 2 and now - job.window[1][0] >= WINDOW_S:
                job.window.popleft()

    def result(self, name: str, root: int | None, step_time_s: float | None = None,
               samples_per_s: float | None = None, epoch_times: Sequence[float] = (),
               steps_per_epoch: int | None = None) -> JobEnergy:
        """A job's energy, with its step time, samples/s and epochs for the per-step figures."""
        job = self._jobs.get((name, root if root is not None else -1))
        if job is None or job.joules is None:
            return JobEnergy(note=self._no_energy or _why_not(job))
        power = None
        if len(job.window) >= 2:
            (t0, j0), (t1, j1) = job.window[0], job.window[-1]
            if t1 - t0 >= MIN_POWER_S:
                power = (j1 - j0) / (t1 - t0)
        per_step = power * step_time_s if power is not None and step_time_s else None
        epoch_s = statistics.median(epoch_times) if epoch_times else None
        per_epoch = (power * epoch_s if power is not None and epoch_s else
                     per_step * steps_per_epoch if per_step is not None and steps_per_epoch else None)
        per_j = samples_per_s / power if samples_per_s and power else None
        source = (next(iter(job.sources)) if len(job.sources) == 1 else
                  "mixed" if job.sources else None)
        notes = (["a GPU it shares split by time share (equal turns of the owners computing): "
                  "an estimate"] if job.estimate else []) + ([MODULE_NOTE] if job.module else [])
        note = "; ".join(notes) or None
        return JobEnergy(joules=job.joules, power_w=power, per_step_j=per_step,
                         per_epoch_j=per_epoch, samples_per_joule=per_j, estimate=job.estimate,
                         source=source, note=note)


def with_energy(ledger: EnergyLedger, js: JobSample) -> JobSample:
    """The job's row with its energy figures (a row that has them already is returned as it
    is: a figure or a reason, one of them is always set)."""
    if js.energy_j is not None or js.energy_note is not None:
        return js
    e = ledger.result(js.name, js.pid, js.mean_step_time_s or js.step_time_s, js.samples_per_s,
                      js.epoch_times, js.steps_per_epoch)
    return evolve(js, energy_j=e.joules, energy_w=e.power_w, energy_per_step_j=e.per_step_j,
                  energy_per_epoch_j=e.per_epoch_j, samples_per_joule=e.samples_per_joule,
                  energy_estimate=e.estimate, energy_source=e.source, energy_note=e.note)


def job_keys(jobs: Iterable[JobSample]) -> list[tuple[str, int, Sequence[int]]]:
    """(name, root pid, process ids) of each job row, as `EnergyLedger.update` takes them."""
    return [(j.name, j.pid if j.pid is not None else -1, j.pids) for j in jobs]


def once(snap: Snapshot) -> Snapshot:
    """`--once`: the jobs' energy over the GPUs' one interval (their joules since the first
    read)."""
    ledger = EnergyLedger()
    ledger.update(snap.time, snap.gpu_status, snap.gpus, snap.gpu_processes, job_keys(snap.jobs))
    return evolve(snap, jobs=tuple(with_energy(ledger, j) for j in snap.jobs))


def _why_no_energy(gpu_status: str, gpus: Sequence[GpuSample]) -> str | None:
    """Why no job can have energy on this box (None: some GPU gives it)."""
    if gpu_status != "ok" or not gpus:
        return f"no GPU energy: NVML status {gpu_status}"
    if all(g.energy_j is None for g in gpus):
        notes = {g.energy_note for g in gpus if g.energy_note}
        return "no GPU energy yet" + (f" ({'; '.join(sorted(notes))})" if notes else "")
    return None


def _why_not(job: _Job | None) -> str:
    if job is None or not job.gpus:
        return "not on a GPU: NVML lists none of its processes"
    return "its GPUs give no energy yet"
