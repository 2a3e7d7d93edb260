"""The launch's verdict after the judge: what became of each job, the baselines, the probe.

`judge` (analyse/verdict.py) weighs the co-run's evidence; a launch then says what only it
knows, in `finish`: the jobs that died at start-up and were left out, the jobs that failed their
solo baseline (not started again), how each job ended where there was too little to judge,
the jobs across nodes that have no solo baseline, and what ran beside each solo figure (the
baselines' runs, or the in-situ probe's windows, which also go in the evidence). Pure: the
engine's plan (engine/launch_plan.py) hands in what it recorded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from gputop_dl.analyse.live import outside_load
from gputop_dl.analyse.live.outside_load import SoloWindow
from gputop_dl.analyse.verdict_types import Verdict


@dataclass(frozen=True)
class JobEnd:
    """How a co-run job ended, as far as the launch saw it."""

    name: str
    status: str
    failure: str | None = None
    steps: int = 0  # its co-run steps


@dataclass(frozen=True)
class ProbeRun:
    """The in-situ probe's windows: each job alone while the others were paused."""

    paused_job_s: float  # seconds each paused job spent stopped, summed
    windows: tuple[tuple[str, float, tuple[str, ...]], ...]  # (job, seconds, paused jobs)
    missing: Mapping[str, str] = field(default_factory=dict)  # job -> why it has no window
    beside: Sequence[SoloWindow] = ()  # the windows that gave a solo figure, read beside


def not_judged(verdict: Verdict, died: Mapping[str, str]) -> Verdict:
    """The verdict naming the jobs left out because they died at start-up, and why."""
    return verdict.with_evidence(died_at_start=dict(died)).with_lines(
        "; ".join(f"{n} failed at start-up ({why})" for n, why in died.items())
        + ": not judged, the verdict is of the jobs that ran")


def finish(v: Verdict, ends: Sequence[JobEnd], cpus: int, *, final: bool = False,
           died: Mapping[str, str] | None = None, failed_solo: Mapping[str, str] | None = None,
           across: Mapping[str, str] | None = None, solo: Sequence[SoloWindow] = (),
           probe: ProbeRun | None = None) -> Verdict:
    """The judge's verdict `v` with what the launch knows. `ends`: the judged jobs; `died`,
    `failed_solo`, `across`: job -> why; `solo`: the solo baselines' runs with what ran beside
    (where there is no probe); `final`: the session has ended."""
    if died:
        v = not_judged(v, died)
    if failed_solo:
        v = v.with_evidence(failed_baseline=dict(failed_solo)).with_lines(
            "; ".join(f"{n} failed its solo baseline ({why})" for n, why in failed_solo.items())
            + ": not started again for the co-run")
    if final and v.kind == "insufficient-data":  # what happened to each job, not "so far"
        v = v.with_lines("how each job ended: " + "; ".join(
            f"{e.name} {e.status}" + (f" ({e.failure})" if e.failure else "")
            + f" after {e.steps} co-run step{'s' if e.steps != 1 else ''}" for e in ends))
    if across:
        v = v.with_evidence(no_solo=dict(across)).with_lines(
            "; ".join(f"{n}: {why}" for n, why in across.items()) + " (slowdown unknown)")
        if all(e.name in across for e in ends):  # measuring alone would not help
            v = v.replace(recommendations=tuple(
                r for r in v.recommendations if "measure each job alone" not in r) + (
                "a job across nodes has no solo baseline here: compare its step time with a "
                "run that has its nodes to itself",))
    if probe is None:  # a busy loop or a compile beside a solo baseline: it is slow too
        return outside_load.not_alone(v, solo, cpus, by="baseline")
    v = v.with_evidence(probe={
        "paused_job_s": round(probe.paused_job_s, 2),
        "windows": [{"job": job, "seconds": round(s, 2), "paused": list(paused)}
                    for job, s, paused in probe.windows],
        "missing": dict(probe.missing)}).with_lines(
        f"solo step times from the in-situ probe: each job alone, the others paused "
        f"({probe.paused_job_s:.1f} job-seconds paused in all)")
    # a busy loop or a compile beside a solo window slows the "solo" figure too
    return outside_load.not_alone(v, probe.beside, cpus)
