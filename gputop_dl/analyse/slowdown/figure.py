"""Where a job's slowdown comes from: the figure, its routes, and the one rule that picks it.

Every slowdown a row, a verdict or `diagnose` shows is a `SlowdownFigure`: its value, its kind
(measured, probe, pace, estimate), the method that read it (step times, loader writes, loader
CPU, loop counter, py-spy steps, wait model), what it is divided by (its reference: a solo
baseline, a probe window, its own readings alone, a twin's, a stored run's, or the wait model's
job without waits), its confidence, a bound ("at least N×") where there is no value, and why
it is unknown or doubtful.

`ROUTES` is the precedence table, highest first; `choose` the one chooser the live judge
(analyse/live/passive.py, analyse/slowdown/pace.py), `diagnose` (analyse/slowdown/diagnosis.py) and
`launch` (engine/launch_plan.py) call. The figure ranked first of those known is chosen, unless
its route names a `check`: then, where a figure of the checked route is known, carries no
doubt and is within CONTRADICT of it, the checked figure stands instead (a pace by the
loader's CPU over the wait model only where they disagree; the loader's probe figure over
py-spy's step times only where they disagree). docs/slowdown.md has the table in words.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from gputop_dl.analyse.slowdown.loader_rate import CONTRADICT

Kind = Literal["measured", "probe", "pace", "estimate"]
Method = Literal["step times", "loader writes", "loader CPU", "loop counter", "py-spy steps",
                 "wait model"]
Reference = Literal["solo baseline", "probe window", "own readings", "twin", "stored run",
                    "no waits"]
# the word `slowdown_source` has carried since before the model (the JSON contract keeps it)
SlowdownSource = Literal["measured", "probe", "estimated", "own pace"]
SOURCE: dict[Kind, SlowdownSource] = {"measured": "measured", "probe": "probe",
                                      "pace": "own pace", "estimate": "estimated"}
# `diagnose --json`'s `slowdown_from`, for the methods its probe reads
FROM: dict[Method, str] = {"py-spy steps": "py-spy step times", "loader writes": "loader batches",
                           "loader CPU": "loader work rate"}


@dataclass(frozen=True)
class SlowdownFigure:
    """One slowdown of one job and where it comes from (`value` None: unknown, `why` says
    why; `at_least`: a bound where there is no value)."""

    value: float | None
    kind: Kind
    method: Method
    reference: Reference
    confidence: float | None = None
    at_least: float | None = None
    doubt: str | None = None  # why the value can be far from the truth
    why: str | None = None

    @property
    def route(self) -> tuple[Kind, Method]:
        return self.kind, self.method

    @property
    def source(self) -> SlowdownSource:
        return SOURCE[self.kind]


@dataclass(frozen=True)
class Route:
    """One row of the precedence table: a kind read by a method, the module that produces it,
    its references, and the route it gives way to where the two agree (`check`)."""

    kind: Kind
    method: Method
    references: tuple[Reference, ...]
    made_by: str
    check: tuple[Kind, Method] | None = None


ROUTES: tuple[Route, ...] = (
    Route("measured", "step times", ("solo baseline",), "analyse/verdict.py (launch)"),
    Route("probe", "step times", ("probe window",), "analyse/verdict.py (launch, baseline = probe)"),
    Route("probe", "loader writes", ("probe window",), "analyse/slowdown/loader_rate.py (diagnose)",
          check=("probe", "py-spy steps")),
    Route("probe", "loader CPU", ("probe window",), "analyse/slowdown/loader_rate.py (diagnose)",
          check=("probe", "py-spy steps")),
    Route("probe", "py-spy steps", ("probe window",), "analyse/slowdown/diagnosis.py (diagnose)"),
    Route("pace", "loader writes", ("own readings", "twin", "stored run"),
          "analyse/slowdown/pace.py (live)"),
    Route("pace", "loader CPU", ("own readings", "twin", "stored run"),
          "analyse/slowdown/pace.py (live)", check=("estimate", "wait model")),
    Route("pace", "loop counter", ("own readings", "twin", "stored run"),
          "analyse/slowdown/pace.py (live)"),
    Route("pace", "py-spy steps", ("own readings", "twin", "stored run"),
          "analyse/slowdown/pace.py (live)", check=("estimate", "wait model")),
    Route("estimate", "wait model", ("no waits",), "analyse/live/job_estimate.py (live)"),
)
RANK: dict[tuple[Kind, Method], int] = {(r.kind, r.method): i for i, r in enumerate(ROUTES)}
BY_ROUTE: dict[tuple[Kind, Method], Route] = {(r.kind, r.method): r for r in ROUTES}


def apart(a: float, b: float | None) -> bool:
    """Whether two slowdowns of one job disagree: more than `CONTRADICT` times apart."""
    return b is not None and a > 0 and b > 0 and max(a, b) / min(a, b) > CONTRADICT


def choose(figures: Iterable[SlowdownFigure | None]) -> SlowdownFigure | None:
    """The job's one slowdown of `figures` (None: none has a value): see the module docstring."""
    known = sorted((f for f in figures if f is not None and f.value is not None),
                   key=lambda f: RANK[f.route])
    if not known:
        return None
    top = known[0]
    check = BY_ROUTE[top.route].check
    other = next((f for f in known if f.route == check), None)
    assert top.value is not None
    if other is not None and other.doubt is None and not apart(top.value, other.value):
        return other
    return top


def measured(value: float | None, probe: bool) -> SlowdownFigure | None:
    """`launch`'s slowdown of a job (analyse/verdict.py): its co-run step times over its solo
    baseline's, or over its probe window's (`baseline = "probe"`); None: none yet."""
    if not value:
        return None
    return SlowdownFigure(value, "probe" if probe else "measured", "step times",
                          "probe window" if probe else "solo baseline")
