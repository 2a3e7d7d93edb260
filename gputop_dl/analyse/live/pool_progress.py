"""A spinning intra-op pool's progress from its main thread's native stacks: the spin-share model.

Pure arithmetic over one `SpinSample` (collect/pyspy/gomp_spin.py: the main thread's py-spy
`--native` samples per kind, and its schedstat over the burst). The idea:
alone, each pool thread has a CPU, so a step takes about the main thread's useful CPU time;
together, its CPU time splits into useful work and spin in the OpenMP runtime's barrier. Its
useful share of the time

    u = ran / (ran + waited) · work / samples

(on a CPU for that share of its runnable time; runnable and in the operator's own code for
`work / samples` of it, a preempted thread's stack standing where its CPU time went) gives
the job's slowdown `1 / u` against a main thread that only works. The wall time py-spy held
the process stopped is in neither figure. Measured against PyTorch's examples
(docs/validation.md, "Multi-threaded jobs", `benchmarks/verdict_threads.py --native`): it does
not hold (it over-read the dcgan and mnist pairs 1.5-2.8x, and read 13-20x for jobs alone on a
busy box, whose pool threads spin for any load), and py-spy pauses the job to read native
stacks; it is measured there, not used live.
"""

from __future__ import annotations

from typing import Protocol

MIN_SAMPLES = 30  # main-thread samples before a share is read
MAX_SLOWDOWN = 20.0


class Spins(Protocol):
    work: int
    runtime: int
    idle: int
    ran_s: float | None
    waited_s: float | None

    @property
    def samples(self) -> int: ...


def spin_share(s: Spins) -> float | None:
    """The share of the main thread's samples inside the OpenMP runtime (its barrier spin and
    futex sleep, the team's start); None under MIN_SAMPLES."""
    return round(s.runtime / s.samples, 3) if s.samples >= MIN_SAMPLES else None


def useful_share(s: Spins) -> float | None:
    """u: the share of the time the main thread ran the operators' own code (None: too few
    samples, or its schedstat unknown or empty)."""
    if s.samples < MIN_SAMPLES or s.ran_s is None or s.waited_s is None:
        return None
    runnable = s.ran_s + s.waited_s
    if runnable <= 0:
        return None
    return s.ran_s / runnable * s.work / s.samples


def progress_slowdown(s: Spins) -> float | None:
    """1 / u, from 1 to MAX_SLOWDOWN (None: u unknown; MAX_SLOWDOWN where it did no work)."""
    u = useful_share(s)
    if u is None:
        return None
    return max(1.0, min(MAX_SLOWDOWN, 1.0 / u)) if u > 0 else MAX_SLOWDOWN
