"""Background py-spy bursts that measure the data stall of found jobs (not started by gputop-dl).

`StallSampler.round([(key, pid), ...])` is called every tick with the found jobs. At most
one burst is in flight (a daemon thread); the job whose last burst is oldest goes next, and a
job is re-sampled every `every_s` seconds or less often: py-spy's own CPU is held to a budget.
Each burst is `duration_s` of non-blocking sampling at `rate` Hz of the job's main thread
(`pyspy.record_stall`).

Why a CPU budget: py-spy costs about 0.7-0.8 ms of CPU per sample (mostly the kernel's
process_vm_readv, more for a process with more threads), so 2 s bursts at 50 Hz every 12 s on
three jobs cost 2.1 % of a core, four times the monitor itself. Each burst's real cost is read
from the kernel (wait4's rusage) and paid from a token bucket that refills at `cpu_budget` (a
share of one core, default 0.25 %) and holds at most `credit` CPU-seconds
(collect/pyspy/turns.py), so the first jobs seen get their numbers quickly and py-spy never uses
more than the credit plus the budget, whatever the number of jobs or their thread counts.
`result(key)` pools the job's last `pool` bursts (none older than `pool` sampling periods +
30 s): 4 bursts of ~50 samples; a single 100-sample burst scatters by ±5 points. The result carries its sample count.

Errors never raise: no py-spy, or no ptrace rights, become one line in `note` (the rest keeps
working); a job that ended mid-burst is simply sampled again next round.
"""

from __future__ import annotations

import functools
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Callable, Hashable

from gputop_dl.collect.pyspy.stall import (
    AGREE, FEW_STEPS, RESOLVES, StallEstimate, current_step_time, step_floor)
from gputop_dl.collect.pyspy.step_cycles import MIN_CYCLES

from gputop_dl.collect.pyspy import run as pyspy
from gputop_dl.collect.pyspy.turns import Turns
from gputop_dl.threadname import name_native_thread

STALL_BUDGET = 0.0025  # py-spy's default share of one core (`gputop-dl --stall-budget 0.25`, in %)
SAMPLE_CPU_S = 0.0008  # py-spy's CPU per sample where a burst's own cost is unknown (measured 0.7-0.8 ms)


@dataclass(frozen=True)
class StallResult:
    fraction: float | None
    samples: int
    step_time_s: float | None
    t: float  # wall time the burst ended
    phases: tuple[tuple[str, int], ...] = ()  # main-thread samples per step phase (pyspy.PHASES)
    step_note: str | None = None  # why `step_time_s` is None (the newest burst's reason)
    # the newest burst counted fewer than MIN_CYCLES steps: they are longer than this (s)
    step_over_s: float | None = None

    @property
    def phase_samples(self) -> int | None:
        """The samples behind the phase shares (None: no phase was classified)."""
        n = sum(c for _, c in self.phases)
        return n or None


# py-spy's burst: (pid, seconds, rate, its executable) -> (the estimate, or the error)
Record = Callable[[int, float, int, str | None], tuple[StallEstimate | None, str | None]]
# one burst kept: (clock, wall time, data samples, compute samples, (step time, cycles),
# samples per phase, why no step time, its seconds)
Burst = tuple[float, float, int, int, tuple[float | None, int], dict[str, int], str | None, float]
# a job whose burst saw fewer than MIN_CYCLES steps gets its next one LONGER_BY times as long at
# that fraction of the rate (the same samples, the same cost), at most LONGER times, the rate
# no lower than SLOWEST_HZ (twice the samples for the last): 2 s at 25 Hz, 8 s at 6, 32 s at
# 3, which counts steps up to 6.4 s (a job slowed 10-70x beside others: a word_language_model
# pair at 3.3 s a step, a dcgan pair at 4.8 s; dcgan alone at 1.1-1.5 s); and shorter again
# once the shorter burst would count the steps it reads. Four times, not twice: a pair of
# word_language_model copies at 3.4 s a step got 2, 4 and 8 s bursts in its first 4 minutes
# beside the other (a burst per job about every minute) and never reached the 32 s one. Where
# what a burst saw says the steps are too long for the next length too, it is skipped.
LONGER = 2
LONGER_BY = 4
SLOWEST_HZ = 3  # a GAN's backward lines (0.3-1.4 s a pair) still mark steps at 3 Hz, not at 1
# the check burst (pyspy/stall.py: checked) costs py-spy about as much again as the burst it checks;
# a job whose step a check confirmed, long enough for the main rate to time (RESOLVES of its
# intervals), gets its next bursts unchecked while they read that step within AGREE; any other
# reading is held back ("changed ...") and the next burst is checked


class StallSampler:
    """Schedules py-spy bursts over found jobs; one burst at a time."""

    def __init__(self, duration_s: float = 2.0, rate: int = 25, every_s: float = 12.0,
                 pool: int = 4, exe: str | None = None, record: Record | None = None,
                 clock: Callable[[], float] = time.monotonic, cpu_budget: float | None = STALL_BUDGET,
                 credit: float = 0.1, unchecked: Record | None = None):
        self.duration_s, self.rate, self.every_s, self.pool = duration_s, rate, every_s, pool
        # whose burst is next, within `cpu_budget` (a share of one core on average; None: no
        # limit), its bucket holding `credit` CPU-seconds at most
        self._turns = Turns(cpu_budget, credit, duration_s * rate * SAMPLE_CPU_S, clock)
        self._every = every_s  # the per-job period actually used in the last round
        self.exe = exe
        self._record = record or pyspy.record_stall
        # a burst without the check (None: every burst is checked)
        self._unchecked = unchecked if record is not None else functools.partial(
            pyspy.record_stall, check=False)
        self._confirmed: dict[Hashable, float] = {}  # key -> the step its last check confirmed
        self.clock = clock
        self._lock = threading.Lock()
        self._longer: dict[Hashable, int] = {}  # key -> times its bursts were lengthened (LONGER)
        # key -> its last bursts (`Burst`)
        self._bursts: dict[Hashable, deque[Burst]] = {}
        self._thread: threading.Thread | None = None
        self.note: str | None = None  # why stalls are unknown (no py-spy, no ptrace rights)
        self.denied = False
        self.bursts = 0

    @property
    def cpu_budget(self) -> float | None:
        """The share of one core py-spy may use on average (None: no limit)."""
        return self._turns.cpu_budget

    @property
    def cpu_spent(self) -> float:
        """py-spy's CPU-seconds so far, all bursts."""
        return self._turns.cpu_spent

    def _confirm(self, key: Hashable, est: StallEstimate, trust: float | None) -> None:
        """After a burst: a checked one's step is the job's confirmed step; an unchecked one's
        stands only within AGREE of it (see above)."""
        step = est.step_time_s
        if trust is None:
            if step is not None:
                self._confirmed[key] = step
            else:
                self._confirmed.pop(key, None)
            return
        if step is not None and abs(step / trust - 1) <= AGREE:
            return
        self._confirmed.pop(key, None)
        if step is not None:
            est.step_time_s, est.cycles = None, 0
            est.why = (f"its step changed from {trust * 1000:.0f} ms to "
                       f"{step * 1000:.0f} ms: the next burst checks it")

    def span(self, key: Hashable) -> tuple[float, int]:
        """The next burst's (seconds, rate) for `key` (see LONGER)."""
        n = self._longer.get(key, 0)
        return (self.duration_s * LONGER_BY ** n,
                max(min(SLOWEST_HZ, self.rate), self.rate // LONGER_BY ** n))

    def _longer_next(self, key: Hashable, est: StallEstimate, seconds: float) -> None:
        n, step = self._longer.get(key, 0), est.step_time_s
        if step is None and FEW_STEPS in (getattr(est, "why", None) or "") and n < LONGER:
            # the next burst long enough for MIN_CYCLES + 1 step starts at the length the steps
            # had at least (`floor_s`): past the next length where that says the next would
            # count too few again (a 2 s burst in 3.3 s steps: 32 s at once, not 8 s first)
            k, need = n + 1, (MIN_CYCLES + 1) * (getattr(est, "floor_s", None) or 0.0)
            while k < LONGER and self.duration_s * LONGER_BY ** k < need:
                k += 1
            self._longer[key] = k
        elif step is not None and n and step * (MIN_CYCLES + 1) <= seconds / LONGER_BY:
            self._longer[key] = n - 1

    def _run(self, key: Hashable, pid: int, seconds: float, rate: int) -> None:
        name_native_thread("gdl-stall")
        with self._lock:
            sure = self._confirmed.get(key)
        burst = self._record
        trust = None
        if sure is not None and sure >= RESOLVES / rate and self._unchecked is not None:
            burst, trust = self._unchecked, sure
        try:
            est, err = burst(pid, seconds, rate, self.exe)
        except Exception as exc:  # noqa: BLE001 - a broken burst must not break the monitor
            est, err = None, f"py-spy failed: {exc}"
        cost = getattr(est, "cpu_s", None)
        if cost is None:  # not measured (no wait4, or a burst that failed): the typical cost
            cost = seconds * rate * SAMPLE_CPU_S
        with self._lock:
            self._turns.paid(cost)
            self.bursts += 1
            if err is None and est is not None:
                self._confirm(key, est, trust)
                if est.samples:
                    q = self._bursts.setdefault(key, deque(maxlen=max(1, self.pool)))
                    q.append((self.clock(), time.time(), est.data, est.compute,
                              (est.step_time_s, est.cycles),
                              dict(getattr(est, "phases", None) or {}),
                              getattr(est, "why", None), seconds))
                    self._longer_next(key, est, seconds)
                if not self.denied:
                    self.note = None
                return
            if pyspy.is_permission_error(err):
                self.denied = True
                self.note = (f"data stall of jobs found running is unknown: py-spy may not "
                             f"attach to PID {pid} ({err}); {pyspy.PTRACE_HINT}")
            elif err and "not installed" in err:
                self.note = ("data stall of jobs found running is unknown: py-spy is not "
                             "installed (pip install py-spy)")

    def want(self, key: Hashable, pid: int) -> bool:
        """Start a burst on `pid` if none is in flight and `key` is the most overdue job;
        call every tick for every job (see `round`). Returns True if a burst started."""
        return self.round([(key, pid)])

    def round(self, jobs: list[tuple[Hashable, int]]) -> bool:
        """One scheduling step over this tick's jobs [(key, pid)]; forgets the others."""
        now = self.clock()
        turns = self._turns
        with self._lock:
            for k in turns.forget(k for k, _ in jobs):
                self._bursts.pop(k, None)
                self._longer.pop(k, None)
                self._confirmed.pop(k, None)
            if turns.busy is not None or not jobs:
                return False
            if self.denied or (self.note and "not installed" in self.note):
                return False  # retrying would only fail the same way
            every = max(self.every_s, len(jobs) * (self.duration_s + 0.5))
            if self.cpu_budget:
                every = max(every, len(jobs) * turns.cost / self.cpu_budget)
            self._every = every
            if not turns.affordable(now):
                return False  # py-spy has used its share for now
            taken = turns.take(jobs, every, now)
            if taken is None:
                return False
            key, pid = taken
        self._thread = threading.Thread(target=self._run, args=(key, pid, *self.span(key)),
                                        daemon=True,
                                        name=f"py-spy-stall-{pid}")
        self._thread.start()
        return True

    def pending_note(self, after_s: float) -> str:
        """Why a job has no data stall yet though bursts run: they come one job at a time, at
        the pace the CPU budget allows (the last burst's cost over the budget), a job's first
        once it has run `after_s`."""
        pace = (f", within {self.cpu_budget:.2%} of a core (--stall-budget): about one burst "
                f"every {self._turns.cost / self.cpu_budget:.0f} s" if self.cpu_budget else "")
        return (f"not read yet: py-spy reads found jobs one burst at a time{pace}, a job's "
                f"first once it has run {after_s:.0f} s")

    def result(self, key: Hashable) -> StallResult | None:
        """The job's recent bursts pooled; None before its first burst with samples."""
        with self._lock:
            q = self._bursts.get(key)
            if not q:
                return None
            oldest = self.clock() - (self.pool * self._every + 30.0)
            use = [b for b in q if b[0] >= oldest] or [q[-1]]
        data = sum(b[2] for b in use)
        n = data + sum(b[3] for b in use)
        phases = {p: sum(b[5].get(p, 0) for b in use) for p in pyspy.PHASES}
        step, why = current_step_time([(*b[4], b[6], b[7]) for b in use])
        over = step_floor(why, use[-1][7]) if step is None else None
        return StallResult(round(data / n, 3) if n else None, n, step, use[-1][1],
                           tuple((p, c) for p, c in phases.items()) if any(phases.values()) else (),
                           step_note=why, step_over_s=None if over is None else round(over, 3))

    def join(self, timeout: float | None = None) -> None:
        t = self._thread
        if t is not None:
            t.join(timeout)
