"""A job's recorded energy per phase, and what a co-run cost in energy against its jobs alone.

`PhaseEnergy` is a job's GPU energy in one phase (a run: baseline, co-run, monitor) as recorded
(record/store_samples.py `job_energy`); `corun_energy` compares the co-run's energy per sample
with the jobs' alone, for the same number of samples from each job; `energy_evidence` puts that
in a launch's verdict beside STP. The per-tick figures are analyse/live/energy.py's. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, TypedDict

from gputop_dl.analyse.verdict_types import Verdict

__all__ = ["CorunEnergy", "PhaseEnergy", "corun_energy", "corun_energy_ratio", "energy_evidence",
           "main_phase", "phase_energy"]


def corun_energy_ratio(together_j: float, together_samples: float,
                       alone: Sequence[tuple[float, float]]) -> float | None:
    """Energy per sample of a co-run over that of running the jobs one after another: the
    co-run's joules per sample (all jobs' joules over all their samples) over the baselines'
    (each `alone` (joules, samples), summed). >1: the co-run cost more energy per sample."""
    alone_j = sum(j for j, _ in alone)
    alone_n = sum(n for _, n in alone)
    if together_samples <= 0 or alone_n <= 0 or alone_j <= 0 or together_j <= 0:
        return None
    return (together_j / together_samples) / (alone_j / alone_n)


class PhaseEnergy(TypedDict):
    """A job's recorded energy in one phase (a run: baseline, co-run, monitor)."""

    phase: str
    joules: float  # the joules its run reached
    power_w: float | None  # means over its samples
    per_step_j: float | None
    per_epoch_j: float | None
    samples_per_joule: float | None
    estimate: bool  # a GPU it shared was split by time share
    samples: int


class CorunEnergy(TypedDict):
    """Energy per sample of a co-run against running the jobs one after another."""

    ratio: float  # >1: the co-run cost more energy per sample
    jobs: int
    estimate: bool  # some job's co-run energy split a shared GPU


def _f(x: Any) -> float | None:
    return None if x is None else float(x)


def phase_energy(rows: Iterable[Sequence[Any]]) -> tuple[PhaseEnergy, ...]:
    """The store's rows (phase, joules, power, J/step, J/epoch, samples/J, estimate, samples;
    record/store_samples.py `job_energy`) as `PhaseEnergy`s."""
    return tuple(PhaseEnergy(phase=str(r[0] or "run"), joules=float(r[1]), power_w=_f(r[2]),
                             per_step_j=_f(r[3]), per_epoch_j=_f(r[4]),
                             samples_per_joule=_f(r[5]), estimate=bool(r[6]), samples=int(r[7]))
                 for r in rows if r[1] is not None)


def corun_energy(jobs: Sequence[Sequence[PhaseEnergy]]) -> CorunEnergy | None:
    """The co-run's energy per sample over its jobs' alone, for the same number of samples
    from each job (its solo baseline's samples per joule against its co-run's); None unless
    every job has both and there are two or more."""
    alone, together, est = [], [], False
    for phases in jobs:
        by = {p["phase"]: p for p in phases}
        b, c = by.get("baseline"), by.get("co-run")
        if not b or not c or not b["samples_per_joule"] or not c["samples_per_joule"]:
            return None
        alone.append((1.0 / b["samples_per_joule"], 1.0))
        together.append(1.0 / c["samples_per_joule"])
        est = est or c["estimate"] or b["estimate"]
    if len(together) < 2:
        return None
    ratio = corun_energy_ratio(sum(together), float(len(together)), alone)
    return None if ratio is None else CorunEnergy(ratio=ratio, jobs=len(together), estimate=est)


def main_phase(phases: Sequence[PhaseEnergy]) -> PhaseEnergy | None:
    """The phase a job's results are about: its co-run, else its last run (a monitor's)."""
    by = {p["phase"]: p for p in phases}
    return by.get("co-run") or (phases[-1] if phases else None)


def energy_evidence(v: Verdict, phases: dict[str, tuple[PhaseEnergy, ...]],
                    jobs: Sequence[str]) -> Verdict:
    """A launch's verdict with the co-run's GPU energy per sample against its jobs alone (the
    evidence's `energy_per_sample_ratio` and a line beside STP), where every job has both."""
    c = corun_energy([phases.get(name, ()) for name in jobs])
    if c is None:
        return v
    more = "more" if c["ratio"] >= 1 else "less"
    return v.with_evidence(energy_per_sample_ratio=round(c["ratio"], 3)).with_lines(
        f"energy per sample: the co-run used {c['ratio']:.2f}× the GPU energy per sample of "
        f"running them one after another ({abs(c['ratio'] - 1) * 100:.0f} % {more})"
        + ("; ~ an estimate: a shared GPU split by time share" if c["estimate"] else ""))
