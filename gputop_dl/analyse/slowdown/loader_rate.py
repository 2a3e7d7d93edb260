"""A job's slowdown from its data-loader workers' work rate, alone against together.

A worker's write calls per batch do not depend on how fast the trainer runs, and its CPU time
and voluntary switches per batch depend on it little (collect/jobs/loader_work.py), so each rate
alone over the same rate together is about the job's step rate alone over together: its
slowdown, measured without its step times. Where py-spy
cannot time a job's steps (steps longer than its burst, or no data wait to mark them) and its
intra-op pool spins (its CPU time says nothing of its progress), this is what `diagnose`'s
probe measures it by (docs/verdict.md, "Slowdown from the loader").

The write calls' ratio is the slowdown where both windows hold MIN_WINDOW_WRITES of them (a count
of batches, the same number each: PyTorch's dcgan 9.00 a batch alone and beside a copy). Where
they are not readable (another user's workers), the CPU ratio is the slowdown and the switches
are its check. Neither is exact: between alone
and together, a batch's CPU time moved by −29 % to +51 % of the scripts' own rate ratios on the
2-core box (PyTorch's dcgan, mnist and LSTM examples shrunk, spinning and passive pools, pairs
and a trio; PyTorch's own dcgan: −14 % to +38 %), its switches by −43 % to +155 % (a worker
that finds the trainer's queue full switches once more a batch; PyTorch's dcgan worker, whose
PIL transforms make it the slower side alone, switched 2.4–2.7× as often a batch alone):
docs/validation.md, "Slowdown from the loader". Where the switch ratio is more than
`CHECK` times apart from the CPU ratio (a worker whose work per batch changed with the pace
beyond that), or a window holds too little work, the slowdown is unknown and says why. Both
are also off by the batches in flight at a window's ends (a worker runs ahead of the trainer
by its prefetch): a few batches in a window of tens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MIN_SWITCHES = 40  # voluntary switches a window needs (each batch is several)
MIN_CPU_S = 0.005  # CPU-seconds of the workers a window needs (a batch took 1-5 ms here)
MIN_WINDOW_WRITES = 20  # write calls a window needs to be rated by them (a batch is 5-10 of them)
CHECK = 3.0  # the switch ratio may be this many times apart from the CPU ratio at most
CONTRADICT = 1.6  # a step-time ratio this many times apart from the loader's gives way to it

# one window's loader work: (seconds, CPU-seconds, voluntary switches)
Work = tuple[float, float, int]


def too_little(w: Work) -> str | None:
    """Why a window's work is too little to rate (None: enough)."""
    seconds, cpu_s, switches = w
    if seconds <= 0:
        return "an empty window"
    if switches < MIN_SWITCHES or cpu_s < MIN_CPU_S:
        return (f"its loader workers did too little in {seconds:.1f} s ({switches} switches, "
                f"{cpu_s * 1000:.0f} ms of CPU; {MIN_SWITCHES} and {MIN_CPU_S * 1000:.0f} ms "
                "needed)")
    return None


@dataclass(frozen=True)
class LoaderSlowdown:
    """A job's slowdown from its loader (None: unknown, `why` says why), the two ratios, and
    how closely they agree (1: equal, 0: `CHECK` apart), its confidence."""

    slowdown: float | None = None
    by_cpu: float | None = None
    by_switches: float | None = None
    agreement: float | None = None
    why: str | None = None
    by_writes: float | None = None  # the ratio of its batches (write calls): its slowdown


def _ratio(alone: float, together: float) -> float | None:
    return alone / together if together > 0 else None


def loader_slowdown(together: Work, alone: Work,
                    writes: tuple[int | None, int | None] = (None, None)) -> LoaderSlowdown:
    """The workers' batch rate alone over together's where `writes` (their write calls in each
    window, together and alone) both hold MIN_WINDOW_WRITES or more; else their CPU rate alone over
    together's, where both windows hold enough work and the switch ratio is within `CHECK` of
    it."""
    (t_s, t_cpu, t_sw), (a_s, a_cpu, a_sw) = together, alone
    t_w, a_w = writes
    if t_w is not None and a_w is not None and min(t_w, a_w) >= MIN_WINDOW_WRITES and t_s > 0 < a_s:
        by_writes = (a_w / a_s) / (t_w / t_s)
        return LoaderSlowdown(by_writes, _ratio(a_cpu / a_s, t_cpu / t_s),
                              _ratio(a_sw / a_s, t_sw / t_s), 1.0, by_writes=by_writes)
    for label, w in (("together", together), ("alone", alone)):
        why = too_little(w)
        if why is not None:
            return LoaderSlowdown(why=f"{label}, {why}")
    (t_s, t_cpu, t_sw), (a_s, a_cpu, a_sw) = together, alone
    by_cpu = (a_cpu / a_s) / (t_cpu / t_s)
    by_sw = (a_sw / a_s) / (t_sw / t_s)
    apart = abs(math.log(by_cpu / by_sw))
    if apart > math.log(CHECK):
        return LoaderSlowdown(None, by_cpu, by_sw, why=(
            f"its loader's CPU and switches disagree ({by_cpu:.2f}× against {by_sw:.2f}×)"))
    return LoaderSlowdown(by_cpu, by_cpu, by_sw, round(1.0 - apart / math.log(CHECK), 2))
