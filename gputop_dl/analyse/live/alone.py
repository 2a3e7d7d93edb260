"""The verdict on one training job seen alone: its own waits, and what would limit a second job.

With one job there is nothing to be parallel with: "truly parallel" would be an
empty claim. The live judge (analyse/live/passive.py) and the measured one (analyse/verdict.py)
call these when the set they judge has one job; the verdict's kind is `alone`. What it says:

- the job's own waits, as measured: its CPU wait (behind load from outside the training jobs,
  as none other runs), its data wait (the training loop waiting for a batch) and its disk
  wait, each "–" where unknown;
- what a second job like it would meet: its threads want `d = c / (1 - f)` cores (CPU time
  plus run-queue wait, analyse/live/cpu_wait_model.py); two such jobs want `2 d`, and on `cpus`
  cores they fit side by side when `2 d` does not exceed them.
"""

from __future__ import annotations

from gputop_dl.analyse.live.cpu_wait_model import demand
from gputop_dl.analyse.verdict_types import Evidence, JobVerdict, Verdict
from gputop_dl.text.fmt import num

ALONE_REASON = "runs alone: no other training job here to be parallel with"


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{x:.0%}"


def own_waits(cpu_wait: float | None, stall: float | None, io_wait: float | None) -> str:
    """"CPU wait 3%, data wait 28%, disk wait –": the job's own waits, as measured."""
    return f"CPU wait {_pct(cpu_wait)}, data wait {_pct(stall)}, disk wait {_pct(io_wait)}"


def second_job(cores: float | None, cpu_wait: float | None, cpus: int) -> tuple[str, Evidence]:
    """What would limit a second job like this one on `cpus` cores, in words, and the figures
    (`cpu_demand_cores`, `second_job_fits`: None where its CPU is unknown). With its CPU wait
    unknown, the cores it used are what it wants at least."""
    d = demand(cpu_wait, cores)
    least = d is None and cores is not None
    if least:
        d = cores
    if d is None:
        return (f"what a second job would meet is unknown: its CPU use is not measured yet "
                f"({cpus} cores here)"), {"cpu_demand_cores": None, "second_job_fits": None}
    fits: bool | None = 2 * d <= cpus
    if least and fits:
        fits = None  # it may want more than it got
    want = (f"it used {d:.1f} of the {cpus} cores (its wait for a CPU unknown: it wants at "
            "least that)" if least else
            f"it wants ≈ {d:.1f} of the {cpus} cores (CPU time plus run-queue wait)")
    verb = ("fits beside it" if fits else "would make them wait for a CPU" if fits is False
            else "may fit beside it")
    words = f"{want}; a second job like it {verb} (the two want ≈ {2 * d:.1f})"
    return words, {"cpu_demand_cores": round(d, 2), "second_job_fits": fits}


def alone_verdict(name: str, *, cpus: int, cores: float | None, cpu_wait: float | None,
                  stall: float | None, io_wait: float | None, evidence: Evidence,
                  lines: tuple[str, ...] = (), jobs: tuple[JobVerdict, ...] = (), gpu: str | None = None,
                  measured: str = "estimated live, nothing paused") -> Verdict:
    """The `alone` verdict of the one job `name` (see the module docstring). `gpu`: the GPU it
    uses, where one is seen (a second job on it would share it)."""
    second, figures = second_job(cores, cpu_wait, cpus)
    waits = own_waits(cpu_wait, stall, io_wait)
    recs = [second[0].upper() + second[1:]]
    if gpu:
        recs.append(f"a second job on {gpu} would share it: its kernels would queue with this "
                    "one's (place it on another GPU where there is one)")
    if cpu_wait is not None and cpu_wait >= 0.1:
        recs.append(f"its CPU wait ({cpu_wait:.0%}) is load from outside the training jobs: "
                    "see what else runs here (the process list)")
    return Verdict(kind="alone", confidence=1.0 if figures["cpu_demand_cores"] is not None else 0.5,
                   evidence={**evidence, **figures, "alone": name},
                   evidence_lines=(*lines, f"{name}: {waits}; CPU {num(cores, '.2f')} cores"),
                   recommendations=tuple(recs), jobs=jobs,
                   reason=f"{name} {ALONE_REASON}; its own waits: {waits}; "
                          f"{_second_short(figures, cpus)} ({measured})")


def _second_short(figures: Evidence, cpus: int) -> str:
    """The header's words on a second job: "a second like it fits (it wants ≈ 0.6 of 2 cores)"."""
    d, fits = figures["cpu_demand_cores"], figures["second_job_fits"]
    if d is None:
        return "what a second job would meet: unknown (its CPU not measured yet)"
    verb = ("fits beside it" if fits else "would make them wait for a CPU" if fits is False
            else "may fit beside it (its wait for a CPU unknown)")
    return f"a second job like it {verb} (it wants ≈ {d:.1f} of {cpus} cores)"
