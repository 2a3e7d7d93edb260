"""Found jobs (training jobs gputop-dl did not start), as `JobSample` rows: discovery + process-tree sampling + py-spy stall.

One `FoundJobs` lives in a `MachineSampler` across ticks:

    cmap = fj.refresh()                                   # the tick's one /proc pass
    jobs, notes = fj.sample(GpuUse.of(gprocs), exclude={launched root PIDs}, taken={names in use})
    errors = fj.measure_stall(2.0)                        # one-shot: py-spy every job now, 2 s

`refresh()` returns the PPID -> children map, which the engine also hands to the samplers of its
launched jobs. `sample()` keeps one `TreeSampler` per found job's root (CPU cores, RSS, threads
need the previous tick's CPU times), sums NVML's per-PID GPU memory over the job's processes,
and, when `stall` is on, schedules background py-spy bursts (`StallSampler`) and reports the
last burst's data stall fraction (`stall_source="py-spy"`, with its sample count) and, only
when the sample order shows it unambiguously, the step time. Each root's identity (user, start,
working directory, Slurm job, container; collect/proc/identity.py) is read once, when it is first
found. Two jobs of one name are told apart by what differs between them (`tell_apart`: an
argument, the user, the Slurm job), the PID only where nothing else does. Everything unknown
stays None.

Without root, another user's job shows CPU, threads, CPU wait, state, user, age and command, not
what needs its maps, `/proc/PID/io`, environment or ptrace (collect/jobs/privilege.py): its row says
so (`limited`, and the stall and step notes), py-spy is never pointed at it, and one note
counts such jobs for the box. A job of one's own that Yama's ptrace rule closes to py-spy gets
one note with the three ways out. Another user's job is named with its user ("train.py
@bob"), so a verdict that names it as a competitor says whose it is.
"""

from __future__ import annotations

import os
import time
from collections.abc import Collection, Sequence

from gputop_dl.collect.pyspy import run as pyspy
from gputop_dl.collect.jobs.discover import Discoverer, Found, outside_note
from gputop_dl.collect.nvml.gpu_use import GpuUse
from gputop_dl.collect.proc.identity import Identity, read_identity
from gputop_dl.collect.jobs.privilege import WAYS_OUT, Access, box_line
from gputop_dl.collect.proc.procs import TreeSample, TreeSampler
from gputop_dl.collect.proc.proctree import proc_tree, ranks_of
from gputop_dl.collect.jobs.ranks import RankReader, rank_cpu
from gputop_dl.collect.proc.diskio import io_fields
from gputop_dl.collect.proc.memory import memory_fields
from gputop_dl.collect.proc.cpu_wait import trainer_pids, tree_wait, wait_fields
from gputop_dl.collect.pyspy.loop_counter import CounterSampler
from gputop_dl.collect.pyspy.stall_sampler import STALL_BUDGET, StallResult, StallSampler
from gputop_dl.snapshot import JobSample, JobSearch, evolve
from gputop_dl.workload import redact_args


# a job's first seconds are its imports and set-up: a py-spy burst then reads no step and costs
# about twice a later one (0.15 s of CPU against 0.08, the check included), which the budget
# then makes the job wait for (a minute at 0.25 % of a core)
SPY_AFTER_S = 10.0


class FoundJobs:
    """Found jobs with their samplers; touched only by the thread that ticks."""

    def __init__(self, *, stall: bool = True, discoverer: Discoverer | None = None,
                 stall_sampler: StallSampler | None = None, stall_budget: float = STALL_BUDGET,
                 counter_sampler: CounterSampler | None = None, access: Access | None = None):
        """`stall_budget`: the share of one core py-spy may use (0: no bursts, stall unknown;
        no loop counters either). `counter_sampler`: reads jobs' loop counters (by default
        where py-spy's bursts are on and no other stall sampler was given). `access`: this
        process's rights to trace (read from the machine by default)."""
        self.disc = discoverer or Discoverer()
        self.access = access or Access.read()
        # root -> (its owner's uid, why py-spy may not attach, what its row cannot show)
        self._limits: dict[tuple[int, int],
                           tuple[int | None, str | None, tuple[tuple[str, str], ...]]] = {}
        self.stall = stall_sampler or (StallSampler(cpu_budget=stall_budget) if stall and stall_budget > 0
                                       else None)
        self.counter = counter_sampler or (
            CounterSampler() if stall and stall_budget > 0 and stall_sampler is None else None)
        self.off_note = ("data stall of jobs found running is not measured (--stall-budget 0)"
                         if stall and stall_budget <= 0 and stall_sampler is None else None)
        self._trees: dict[tuple[int, int], TreeSampler] = {}
        self._ranks: dict[tuple[int, int], RankReader] = {}  # a torchrun job's ranks
        self._idents: dict[tuple[int, int], Identity] = {}  # read once per root
        # root -> (the other roots sharing its base name, the names to tell it apart)
        self._apart_names: dict[tuple[int, int], tuple[tuple[tuple[int, int], ...], list[str]]] = {}
        self.found: list[Found] = []
        self._measured: dict[tuple[int, int], StallResult] = {}  # by `measure_stall`
        # root -> its last row and the stall result it showed (a quiet tick reuses the row)
        self._rows: dict[tuple[int, int], tuple[JobSample, StallResult | None]] = {}
        self.seen: set[tuple[int, int]] = set()
        self.search: JobSearch | None = None  # where the last `sample()` looked

    def refresh(self) -> dict[int, list[int]] | None:
        """List /proc (new PIDs only); the PPID map, or None where /proc is missing."""
        if not self.disc.ok:
            return None
        return self.disc.refresh()

    def pids(self, proc: str) -> Collection[int] | None:
        """Every process of this tick's listing of `proc` (`refresh()` first); None where
        /proc is missing or the discovery lists another root (a test's fake one)."""
        return self.disc.ppid.keys() if self.disc.ok and self.disc.proc == proc else None

    def sample(self, gpu: GpuUse = GpuUse(), exclude: set[int] | frozenset[int] = frozenset(),
               taken: set[str] | frozenset[str] = frozenset()) -> tuple[list[JobSample], list[str]]:
        """This tick's found jobs and notes. Call `refresh()` first in the same tick."""
        found = self.disc.find(gpu.mem, exclude)
        self.found = found
        cmap = self.disc.job_cmap
        keys = set()
        jobs: list[JobSample] = []
        now = time.time()
        sampled = {}
        for f in found:
            key = (f.pid, f.start)
            keys.add(key)
            if key not in self._trees:
                self._trees[key] = TreeSampler(f.pid)
                self._ranks[key] = RankReader()
                self._idents[key] = read_identity(f.pid, f.start, self.disc.proc)
                uid = owner(f.pid, self.disc.proc)
                self._limits[key] = (uid, self.access.refusal(uid), self.access.limits(uid))
            ts = self._trees[key].sample(cmap)
            if ts is not None:  # else vanished since the listing
                sampled[key] = ts
        live = [f for f in found if (f.pid, f.start) in sampled]
        shown = self.names(live, taken)
        for f in live:
            key = (f.pid, f.start)
            tree, ts = self._trees[key], sampled[key]
            pids = ts.pids  # sorted, the root included
            mem, sm, gpus = gpu.of_pids(pids)
            res = self._measured.get(key) or (self.stall.result(key) if self.stall else None)
            ident = self._idents[key]
            name = shown[key]
            if ident.user and self.access.other(self._limits[key][0]) and "@" not in name:
                name += f" @{ident.user}"  # another user's: the verdict names whose it is
            kept = self._rows.get(key)
            if ts.quiet and kept is not None and kept[1] == res:  # (a new StallResult a call)
                js = quiet_row(kept[0], ts, name, mem, sm, gpus, ident.elapsed_s(now))
                if js is not None:
                    jobs.append(js)
                    self._rows[key] = (js, res)
                    continue
            dist = self._ranks[key].read(f.pid, cmap)
            command = self.disc.describe(f)
            counted = self.counter.result(key) if self.counter is not None else None
            _, closed, limited = self._limits[key]
            jobs.append(JobSample(
                name=name, pid=f.pid, launched=False, pids=pids, status="running",
                device=("gpu" + ",".join(map(str, gpus))) if gpus else None,
                cpu_cores=ts.cpu_cores, rss=ts.rss, threads=ts.threads,
                stall_fraction=res.fraction if res else None,
                stall_source="py-spy" if res else None,
                stall_samples=res.samples if res else None,
                stall_note=None if res else closed or self._stall_note(),
                step_time_s=res.step_time_s if res else None,
                step_time_note=res.step_note if res else closed,
                step_time_over_s=res.step_over_s if res else None,
                gpu_mem=mem, gpu_sm=sm,
                command=command, distributed=dist,
                rank_cpu_cores=rank_cpu(dist, ts, cmap),
                user=ident.user, elapsed_s=ident.elapsed_s(now), cmdline=command, cwd=ident.cwd,
                slurm=ident.slurm, container=ident.container, launched_by=ident.launched_by,
                identity_note=ident.note,
                procs=proc_tree(f.pid, cmap, tree.stats(), ts.cpu_by_pid, ranks_of(dist), gpu),
                **wait_fields(tree_wait(ts, f.pid, dist)),
                **io_fields(ts, trainer_pids(f.pid, dist)), **memory_fields(ts),
                autogroup=ts.autogroup,
                phase_shares=pyspy.phase_shares(dict(res.phases)) if res else (),
                phase_shares_samples=res.phase_samples if res else None,
                loop_counter=counted.name if counted else None,
                loop_steps=counted.steps if counted and counted.name else None,
                loop_span_s=counted.span_s if counted and counted.name else None,
                loop_read_t=counted.t if counted else None, found_by=f.found_by,
                limited=limited))
            self._rows[key] = (jobs[-1], res)
        for key in [k for k in self._trees if k not in keys]:
            self._trees.pop(key).close()
            del self._ranks[key]
            del self._idents[key]
            del self._limits[key]
            self._apart_names.pop(key, None)
            self._rows.pop(key, None)
        for key in [k for k in self._measured if k not in keys]:
            del self._measured[key]
        # py-spy only where it may attach, and past a job's start-up (its imports hold no step)
        spy = {(f.pid, f.start) for f in live if self._limits[(f.pid, f.start)][1] is None
               and ((age := self._idents[(f.pid, f.start)].elapsed_s(now)) is None
                    or age >= SPY_AFTER_S)}
        if self.stall is not None:
            self.stall.round([((f.pid, f.start), f.target) for f in live if (f.pid, f.start) in spy])
        if self.counter is not None:  # jobs whose loader's batches cannot pace them
            self.counter.round([((f.pid, f.start), f.target) for f, j in zip(live, jobs)
                                if (f.pid, f.start) in spy
                                and j.cpu_cores_workers is None and j.loader_writes_per_s is None])
        notes = []
        out = self.disc.outside
        if out:
            mems = [m for m in out.values() if m is not None]
            notes.append(outside_note(len(out), sum(mems) if mems else None))
        if self.stall is not None and self.stall.note:
            notes.append(self.stall.note)
        if self.off_note and found:
            notes.append(self.off_note)
        notes += self.access_notes(live)
        in_jobs = {p for j in jobs for p in j.pids}
        idle = [p for p in self.disc.unjudged() if p not in in_jobs]
        processes, unreadable, protected = self.disc.looked_at()
        self.search = (JobSearch(processes=processes, unreadable=unreadable,
                                 python_not_jobs=len(idle), protected=protected)
                       if self.disc.ok else None)
        if idle:  # never a silent table beside other users' Python processes
            notes.append(f"{len(idle)} Python process{'es' if len(idle) != 1 else ''} of other "
                         "users not shown as jobs: no forked workers and no busy thread pool "
                         "(a server or an idle kernel, or a job still importing)")
        return jobs, notes

    def access_notes(self, found: list[Found]) -> list[str]:
        """One line for the other users' jobs shown, one for own jobs closed to py-spy."""
        limits = [self._limits[(f.pid, f.start)] for f in found]
        others = sum(1 for uid, _, _ in limits if self.access.other(uid))
        closed = [(f.name, why) for f, (uid, why, _) in zip(found, limits)
                  if why and not self.access.other(uid)]
        notes = [box_line(others)] if others else []
        if closed:
            notes.append(f"data stall and step time of {', '.join(n for n, _ in closed)} "
                         f"unknown: {closed[0][1]}; {WAYS_OUT}")
        return notes

    def names(self, found: list[Found], taken: set[str] | frozenset[str] = frozenset()
              ) -> dict[tuple[int, int], str]:
        """Each job's name (by its key): its base name where it alone has it; where several
        share one, each is named by what tells it apart from all the others (`tell_apart`),
        not only from those named before it. `taken`: names in use already (launched jobs)."""
        named: dict[str, list[tuple[Found, Identity]]] = {}
        for f in found:
            named.setdefault(f.name, []).append((f, self._idents[(f.pid, f.start)]))
        names, out = set(taken), {}
        for f in found:
            key = (f.pid, f.start)
            others = [(g, i) for g, i in named[f.name] if g is not f]
            out[key] = (f.name if f.name not in names and not others
                        else self._apart(key, f, self._idents[key], others, names))
            names.add(out[key])
        return out

    def _apart(self, key: tuple[int, int], f: Found, ident: Identity,
               same: list[tuple[Found, Identity]], names: set[str]) -> str:
        """`tell_apart`, its candidates kept from the last tick while the same jobs share the
        name (every tick for hours otherwise, each job against each other)."""
        others = tuple((g.pid, g.start) for g, _ in same)
        kept = self._apart_names.get(key)
        if kept is None or kept[0] != others:
            kept = self._apart_names[key] = (others, apart_names(f, ident, same))
        return first_free(kept[1], names)

    def reading(self) -> bool:
        """Whether a found job read from storage at its last reading."""
        return any(tree.reading() for tree in self._trees.values())

    def peek_io(self, only_reading: bool = False) -> None:
        """One more look at each found job's process states (collect/proc/diskio.py `peek`)."""
        for tree in self._trees.values():
            tree.peek_io(only_reading)

    def _stall_note(self) -> str | None:
        """Why a found job's data stall is unknown (None: no reason to give)."""
        if self.stall is None:
            return self.off_note
        return self.stall.note or self.stall.pending_note(SPY_AFTER_S)

    def measure_stall(self, seconds: float, rate: int = 50) -> list[str]:
        """Sample every job found by the last `sample()` with py-spy for `seconds`, all at once,
        and wait; the next `sample()` reports these figures. Returns py-spy's errors."""
        ests, errors = pyspy.spy_all({(f.pid, f.start): f.target for f in self.found
                                      if self._limits.get((f.pid, f.start), (None, None))[1] is None},
                                     seconds, rate)
        for key, est in ests.items():
            if est.samples:
                self._measured[key] = StallResult(
                    est.fraction, est.samples, est.step_time_s, time.time(),
                    tuple((p, est.phases.get(p, 0)) for p in pyspy.PHASES) if est.phases else (),
                    step_note=None if est.step_time_s is not None else est.why)
        return errors

    def new_since_last(self) -> list[Found]:
        """Jobs found this tick that were not found before (for a log line)."""
        fresh = [f for f in self.found if (f.pid, f.start) not in self.seen]
        self.seen = {(f.pid, f.start) for f in self.found}
        return fresh


def owner(pid: int, proc: str = "/proc") -> int | None:
    """The uid a process runs as (its /proc directory's owner); None: gone."""
    try:
        return os.stat(f"{proc}/{pid}").st_uid
    except OSError:
        return None


def quiet_row(last: JobSample, ts: TreeSample, name: str, mem: int | None, sm: float | None,
              gpus: Sequence[int], elapsed_s: float | None) -> JobSample | None:
    """A quiet job's row (`TreeSample.quiet`: nothing of its tree moved since its last full
    reading, which found nothing moving): its last row, with this tick's age and CPU (0,
    measured: its CPU seconds stood still). Its CPU wait, disk and memory fields are its last
    full reading's: nothing ran, waited or read then, and nothing has run since. None where the
    row would differ otherwise (another name, other processes, memory, GPU figures): build it
    again."""
    device = ("gpu" + ",".join(map(str, gpus))) if gpus else None
    if (last.name != name or last.pids != ts.pids or last.rss != ts.rss
            or last.threads != ts.threads or last.gpu_mem != mem or last.gpu_sm != sm
            or last.device != device):
        return None
    return evolve(last, cpu_cores=0.0, elapsed_s=elapsed_s)


def _args(f: Found) -> list[str]:
    """The arguments after the job's script or module (all of them after the program else)."""
    args = redact_args(f.cmdline[1:])  # a name is shown and served: no secret in it
    for i, a in enumerate(args):
        if a.endswith(".py") or (i and args[i - 1] == "-m"):
            return args[i + 1:]
    return args


def tell_apart(f: Found, ident: Identity, same: Sequence[tuple[Found, Identity]],
               names: set[str]) -> str:
    """A name for `f` whose base name another job has: its first argument (with the option it
    belongs to) that the others lack, else its user, else its Slurm job, else its working
    directory's last part (one script run in two experiment folders), else its start time (two
    copies of one command, started by hand), else its PID."""
    return first_free(apart_names(f, ident, same), names)


def _items(args: list[str]) -> list[tuple[str, str]]:
    """Arguments as (compared, shown) items: an option with its value (`--compute-ms 60`,
    `--lr=0.1`), or one argument alone. A value that is a path is shown by its last part."""
    out, i = [], 0
    while i < len(args):
        a = args[i]
        if a.startswith("-") and "=" not in a and i + 1 < len(args) and not args[i + 1].startswith("-"):
            v = args[i + 1]
            out.append((f"{a} {v}", f"{a} {os.path.basename(v.rstrip('/')) or v}"))
            i += 2
            continue
        out.append((a, os.path.basename(a.rstrip("/")) or a if "/" in a else a))
        i += 1
    return out


def apart_names(f: Found, ident: Identity, same: Sequence[tuple[Found, Identity]]) -> list[str]:
    """The names `tell_apart` chooses from, in its order, the PID last; they depend on the jobs
    only, so a sampler keeps them while the same jobs share the base name. First the first
    argument (an option with its value) that no other job has, then each that some other job
    lacks: jobs whose commands differ are named by what differs; only identical commands fall
    to who, where and when."""
    mine = _items(_args(f))
    theirs = [{c for c, _ in _items(_args(g))} for g, _ in same]
    candidates: list[str] = []
    if theirs:
        unique = [shown for c, shown in mine if all(c not in t for t in theirs)]
        some = [shown for c, shown in mine if any(c not in t for t in theirs)]
        candidates += list(dict.fromkeys(unique[:1] + some))
    if ident.user and all(ident.user != o.user for _, o in same):
        candidates.append(f"@{ident.user}")
    if ident.slurm and all(o.slurm is None or o.slurm.job_id != ident.slurm.job_id for _, o in same):
        candidates.append(f"slurm {ident.slurm.job_id}")
    folder = os.path.basename(ident.cwd.rstrip("/")) if ident.cwd else ""
    if folder and all(o.cwd is not None and os.path.basename(o.cwd.rstrip("/")) != folder
                      for _, o in same):
        candidates.append(f"in {folder}")
    started = _clock(ident.started)
    if started and all(_clock(o.started) != started for _, o in same):
        candidates.append(started)  # "train.py 09:30:12": short enough for the job column
    return [f"{f.name} {c if len(c) <= 24 else c[:23] + '…'}" for c in candidates] \
        + [f"{f.name} ({f.pid})"]


def _clock(started: float | None) -> str | None:
    """A start time as the local wall clock to the second (None: not known)."""
    return None if started is None else time.strftime("%H:%M:%S", time.localtime(started))


def first_free(candidates: list[str], names: set[str]) -> str:
    """The first candidate no other job of this tick has taken; the last one (the PID) else."""
    return next((c for c in candidates if c not in names), candidates[-1])
