"""Sweep analysis with no torch: growth between batch sizes, the fit t_step = α + β·batch, the knee.

The knee: a bigger batch pays only while epoch time falls faster than memory grows. Epoch time for a fixed data set is proportional to the time per sample (step time /
batch), so the knee is the first batch b whose next batch grows peak memory by a larger fraction
than it cuts the time per sample. In the lab notebooks' resnet34 table (tests/test_lab.py): 16 → 32 memory +22 %, time
−43 % (pays); 32 → 64 memory +33 %, time −26 % (does not): the knee is batch 32.
"""

from __future__ import annotations

from dataclasses import dataclass

from gputop_dl.lab.sweep_worker_protocol import SweepRow


def growth(prev: float | None, cur: float | None) -> float | None:
    """Relative change cur/prev − 1 (0.33 = +33 %), or None where either is unknown or prev ≤ 0."""
    if prev is None or cur is None or prev <= 0:
        return None
    return cur / prev - 1.0


def ok_rows(rows: list[SweepRow]) -> list[SweepRow]:
    return [r for r in rows if r.get("status") == "ok" and r.get("step_s")]


def annotate(rows: list[SweepRow], dataset_size: int) -> list[SweepRow]:
    """Per row (sorted by batch): samples/s, projected epoch time, and vs the previous row (when
    both ran): memory growth and epoch-time change (= change of the time per sample)."""
    out: list[SweepRow] = []
    prev: SweepRow | None = None
    for row in rows:
        r = row.copy()
        if r.get("status") == "ok" and r.get("step_s"):
            b, step = r["batch"], r["step_s"]
            r["samples_per_s"] = b / step
            r["epoch_s"] = step * dataset_size / b
            if prev is not None:
                r["mem_growth"] = growth(prev.get("peak_mem"), r.get("peak_mem"))
                r["time_change"] = growth(prev["epoch_s"], r["epoch_s"])
            prev = r
        else:
            prev = None
        out.append(r)
    return out


@dataclass(frozen=True)
class Fit:
    """Least-squares fit of step time = alpha + beta·batch over `n` rows."""

    alpha: float  # s per step (fixed cost)
    beta: float  # s per sample
    r2: float | None  # None when the step times do not vary
    max_rel_err: float  # max |fit − measured| / measured over the rows
    n: int

    def predict(self, batch: float) -> float:
        return self.alpha + self.beta * batch


def fit_step_time(batches: list[float], step_s: list[float]) -> Fit | None:
    """Fit t = α + β·b by least squares; None with fewer than two distinct batch sizes."""
    n = len(batches)
    if n != len(step_s) or n < 2 or len(set(batches)) < 2:
        return None
    mb, mt = sum(batches) / n, sum(step_s) / n
    sbb = sum((b - mb) ** 2 for b in batches)
    sbt = sum((b - mb) * (t - mt) for b, t in zip(batches, step_s))
    beta = sbt / sbb
    alpha = mt - beta * mb
    resid = [t - (alpha + beta * b) for b, t in zip(batches, step_s)]
    stt = sum((t - mt) ** 2 for t in step_s)
    r2 = 1.0 - sum(e * e for e in resid) / stt if stt > 0 else None
    rel = max(abs(e) / t for e, t in zip(resid, step_s) if t > 0) if any(step_s) else 0.0
    return Fit(alpha, beta, r2, rel, n)


def fit_rows(rows: list[SweepRow]) -> Fit | None:
    good = ok_rows(rows)
    return fit_step_time([r["batch"] for r in good], [r["step_s"] for r in good])


@dataclass(frozen=True)
class Knee:
    """The knee batch, the next batch, and the two fractions that decided it."""

    batch: int
    next_batch: int
    mem_growth: float  # memory growth from batch to next_batch (0.33 = +33 %)
    time_fall: float  # fall of the time per sample (0.26 = 26 % faster per sample)


def knee(points: list[tuple[int, float, float]]) -> Knee | None:
    """First batch b where going to the next batch grows memory by a larger fraction than the
    time per sample falls. `points`: (batch, peak memory, time per sample or epoch time), sorted
    by batch, measured rows only. None if every step up paid (no knee in the range)."""
    for (b0, m0, t0), (b1, m1, t1) in zip(points, points[1:]):
        mg, tc = growth(m0, m1), growth(t0, t1)
        if mg is None or tc is None:
            continue
        if mg > -tc:
            return Knee(b0, b1, mg, -tc)
    return None


def knee_rows(rows: list[SweepRow]) -> Knee | None:
    """The knee over consecutive measured rows (a failed row between two breaks the pair)."""
    best = None
    run: list[tuple[int, float, float]] = []
    end: SweepRow = {}
    for r in rows + [end]:
        if r.get("status") == "ok" and r.get("step_s") and r.get("peak_mem"):
            run.append((r["batch"], float(r["peak_mem"]), r["step_s"] / r["batch"]))
            continue
        k = knee(run)
        if k is not None and best is None:
            best = k
        run = []
    return best
