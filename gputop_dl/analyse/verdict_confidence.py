"""How sure a measured slowdown is: Student's t over the step-time spreads and step counts.

The measured judge (analyse/verdict.py) states its confidence from how precisely the slowdowns
put each job on its side of SLOW; where a spread or a count is unknown, the co-run's step
count over FULL_CONFIDENCE_STEPS stands in. The live judge's estimate
(analyse/live/job_estimate.py) uses the same t distribution. No scipy: the regularised
incomplete beta by its continued fraction.
"""

from __future__ import annotations

import math

from gputop_dl.analyse.thresholds import SLOW
from gputop_dl.analyse.verdict_evidence import JobEvidence

FULL_CONFIDENCE_STEPS = 30


def side_probability(j: JobEvidence) -> float | None:
    """How sure the measurement puts job `j` on its side of SLOW (slowed or not): P(T <= z) for
    z = |ln s - ln SLOW| / SE(ln s), with SE from the step-time spreads and step counts of the
    co-run window and the solo baseline (x 1.25: the figures are medians), and Student's t
    with min(n) - 1 degrees of freedom. None when a spread or a count is unknown."""
    s, cv, solo_cv, solo_steps = j.slowdown, j.cv, j.solo_cv, j.solo_steps
    if s is None or cv is None or solo_cv is None or solo_steps is None \
            or j.steps < 2 or solo_steps < 2:
        return None
    se = 1.25 * math.sqrt(cv ** 2 / j.steps + solo_cv ** 2 / solo_steps)
    z = abs(math.log(s) - math.log(SLOW))
    if se <= 0:
        return 1.0
    return student_t_cdf(z / se, min(j.steps, solo_steps) - 1)


def slowdown_confidence(jobs: list[JobEvidence], any_of: bool, fallback: float) -> float:
    """The verdict's confidence from how precisely the slowdowns were measured.

    "Parallel" needs every job unslowed: the least sure job counts. A concurrent verdict
    needs one slowed job: the surest slowed job counts. Where a spread is unknown the old
    step-count rule (`fallback`: co-run steps / FULL_CONFIDENCE_STEPS) stands in for that job.
    """
    ps = [p if (p := side_probability(j)) is not None else fallback for j in jobs]
    if not ps:
        return fallback
    return round(max(ps) if any_of else min(ps), 2)


def student_t_cdf(t: float, df: int) -> float:
    """P(T <= t) for Student's t with `df` >= 1 degrees of freedom."""
    x = df / (df + t * t)
    tail = 0.5 * _betainc(df / 2, 0.5, x)
    return 1 - tail if t >= 0 else tail


def _betainc(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta I_x(a, b) by Lentz's continued fraction."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                     + a * math.log(x) + b * math.log1p(-x))
    if x > (a + 1) / (a + b + 2):  # converges faster on the other side
        return 1.0 - _betainc(b, a, 1 - x)
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 200):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-12:
            break
    return front * h / a
