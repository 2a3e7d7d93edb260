"""Whose turn it is for py-spy: one run at a time over the found jobs, the most overdue first,
within a share of one core.

py-spy's bursts (collect/pyspy/stall_sampler.py) and its dumps of a loop's counter (collect/pyspy/loop_counter.py)
each keep one `Turns`: a job is due `every` seconds after its last run began; the CPU a run
took (from wait4) is paid from a token bucket that refills at `cpu_budget` (a share of one
core) and holds at most `credit` CPU-seconds, so the first jobs seen are read at once and
py-spy never uses more than the credit plus the budget, whatever the number of jobs. Only
numbers, no thread: the caller holds its lock around each call.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable


class Turns:
    """The schedule of one kind of py-spy run; `busy` is the job being read (None: none)."""

    def __init__(self, cpu_budget: float | None, credit: float, cost: float,
                 clock: Callable[[], float]) -> None:
        self.cpu_budget = cpu_budget  # share of one core on average (None or 0: no limit)
        self.credit = credit
        self.cost = cost  # the last run's CPU-seconds (its estimate before the first)
        self.cpu_spent = 0.0  # py-spy's CPU-seconds so far, all runs
        self.clock = clock
        self._tokens, self._tokens_t = credit, clock()
        self.last: dict[Hashable, float] = {}  # key -> clock() when its last run began
        self.busy: Hashable | None = None

    def refill(self, now: float) -> None:
        if self.cpu_budget:
            self._tokens = min(self.credit, self._tokens + (now - self._tokens_t) * self.cpu_budget)
        self._tokens_t = now

    def set_budget(self, cpu_budget: float | None, now: float) -> None:
        """Refill at `cpu_budget` from `now` on (what accrued until then, at the old rate)."""
        if cpu_budget != self.cpu_budget:
            self.refill(now)
            self.cpu_budget = cpu_budget

    def forget(self, keys: Iterable[Hashable]) -> list[Hashable]:
        """Drop the jobs not in `keys` (but the one being read); returns those dropped."""
        keep = set(keys)
        gone = [k for k in self.last if k not in keep and k != self.busy]
        for k in gone:
            del self.last[k]
        return gone

    def affordable(self, now: float) -> bool:
        """Whether the bucket holds a run's cost (refilled to `now`)."""
        if not self.cpu_budget:
            return True
        self.refill(now)
        return self._tokens >= min(self.cost, self.credit) - 1e-12

    def take(self, jobs: Iterable[tuple[Hashable, int]], every: float, now: float
             ) -> tuple[Hashable, int] | None:
        """The most overdue job due `every` seconds after its last run, marked busy; None where
        none is due."""
        due = [(self.last.get(k, float("-inf")), k, pid) for k, pid in jobs
               if now - self.last.get(k, float("-inf")) >= every]
        if not due:
            return None
        _, key, pid = min(due, key=lambda d: d[0])
        self.busy, self.last[key] = key, now
        return key, pid

    def paid(self, cost: float) -> None:
        """A run ended: it cost `cost` CPU-seconds."""
        self.busy = None
        self.cost = cost
        self.cpu_spent += cost
        self.refill(self.clock())
        self._tokens -= cost
