"""The verdict in words: each judged job's line, and the tone (good, warn, bad) of a slowdown.

The verdict itself (`analyse.verdict_types.Verdict`, as JSON) carries figures only; every
presenter (console, TUI, Markdown report) words a job the same way through `job_line`, and
colours a slowdown through `slowdown_tone` (one set of thresholds for every widget).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal

from gputop_dl.analyse.thresholds import MEAN_APART, SLOW
from gputop_dl.text.fmt import DASH

SEVERE = 1.5  # a slowdown above this is shown as bad (between SLOW and this: a warning)

Tone = Literal["good", "warn", "bad"]


def slowdown_tone(s: float | None, at_least: float | None = None) -> Tone | None:
    """good up to SLOW (1.10: parallel), warn up to SEVERE (1.5), bad above; None if unknown.
    Where there is no value, its bound's tone (at least that slow), but never good."""
    if s is None and at_least is not None and at_least > SLOW:
        s = at_least
    if s is None:
        return None
    return "good" if s <= SLOW else "warn" if s <= SEVERE else "bad"


def _fmt(x: float | None, spec: str = ".2f") -> str:
    return DASH if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def _pct(x: float | None) -> str:
    return DASH if x is None else f"{x:.0%}"


def job_line(j: Mapping[str, Any]) -> str | None:
    """One job of a verdict's JSON `jobs`, in words; None when the entry has nothing to word
    (the caller lists its fields). A verdict recorded before the words moved here carries its
    own `line`, which is kept as it was."""
    if j.get("line") is not None:
        return str(j["line"])
    name = str(j.get("name") or "")
    if j.get("slowdown_source") == "estimated" or "cpu_wait" in j or "why" in j:
        return passive_line(j)
    if "step_time_s" not in j and "solo_step_time_s" not in j:
        return None
    s, m = j.get("slowdown"), j.get("mean_slowdown")
    step, solo = _fmt(j.get("step_time_s"), ".3f"), _fmt(j.get("solo_step_time_s"), ".3f")
    rest = (f"data-wait {_pct(j.get('solo_stall'))} → {_pct(j.get('stall'))}, CPU "
            f"{_fmt(j.get('cpu_cores'))} cores (solo {_fmt(j.get('solo_cpu_cores'))})")
    if s is not None and (j.get("step_time_s") is None or j.get("solo_step_time_s") is None):
        # measured by another rate than its step times (diagnose: its loader workers')
        by = PROBE_METHOD.get(str(j.get("slowdown_method")), "not from its step times")
        return (f"{name}: {_fmt(s)}× slower, {by} (step {step} s together, "
                f"{solo} s alone), {rest}")
    return (f"{name}: step {step} s vs solo {solo} s ({_fmt(s)}×"
            + (f"; mean step {_fmt(m)}×" if m and s and abs(m / s - 1) >= MEAN_APART else "")
            + f"), {rest}")


def passive_line(j: Mapping[str, Any]) -> str:
    """A job of the live (passive) judgement: its CPU wait, the wait on its critical path, and
    the slowdown estimated from them, or why it is unknown."""
    name = str(j.get("name") or "")
    bits = [f"CPU wait {_pct(j.get('cpu_wait'))}"]
    if j.get("critical_wait") is not None:
        bits.append(f"critical path waits {_pct(j['critical_wait'])}")
    if j.get("gpu_wait") is not None:
        bits.append(f"GPU shared {_pct(j['gpu_wait'])}")
    if j.get("cpu_cores") is not None:
        bits.append(f"CPU {_fmt(j['cpu_cores'])} cores")
    s, bound = j.get("slowdown"), j.get("slowdown_at_least")
    if s is None:
        est = (f"slowdown {bound_text(bound)}, a bound by its own pace ({pace_words(j)})"
               if bound is not None else f"slowdown {DASH}") + (f" ({j['why']})" if j.get("why") else "")
    else:
        conf = j.get("slowdown_confidence")
        src = j.get("slowdown_source") or "estimated"
        est = ((f"slowdown {s:.2f}× by its own pace ({pace_words(j)})"
                if src == "own pace" else f"{src} slowdown {s:.2f}×")
               + (f" (confidence {conf:.0%})" if conf is not None else "")
               + (f"; {j['slowdown_doubt']}" if j.get("slowdown_doubt") else ""))
        out = j.get("outside_slowdown")
        if out is not None and out > SLOW:  # analyse/live/outside_load.py
            est += f", {out:.2f}× from load outside the jobs"
    return f"{name}: {est}; " + ", ".join(bits)


SOURCE_MARK = {"measured": "meas", "probe": "probe", "estimated": "est", "own pace": "pace"}
# the model's words (analyse/slowdown/figure.py) as a row's details show them: the method
# (what read it) and the reference (what it is divided by), short
METHOD_MARK = {"step times": "steps", "loader writes": "batches", "loader CPU": "loader CPU",
               "loop counter": "counter", "py-spy steps": "py-spy steps",
               "wait model": "wait model"}
REFERENCE_MARK = {"solo baseline": "solo", "probe window": "probe window",
                  "own readings": "own", "twin": "twin", "stored run": "stored run",
                  "no waits": "no waits"}
# ... and in a sentence: a pace's method and reference
PACE_METHOD = {"loader writes": "its loader's batches", "loader CPU": "its loader's CPU",
               "loop counter": "its own loop counter", "py-spy steps": "its py-spy step times"}
# a probe's slowdown not read from the job's step times (diagnose: its loader's)
PROBE_METHOD = {"loader writes": "by its loader's batches alone (the others paused) and together",
                "loader CPU": "by its loader's CPU alone (the others paused) and together"}
PACE_REFERENCE = {"own readings": "alone and now", "twin": "its twin's alone, its own now",
                  "stored run": "a stored run's alone, its own now"}


def pace_words(j: Mapping[str, Any]) -> str:
    """A pace's method and reference in words ("its loader's batches alone and now"), from a
    row's or a verdict job's `slowdown_method` and `slowdown_reference`; a job recorded before
    they were written says only that it is its own pace."""
    method = PACE_METHOD.get(str(j.get("slowdown_method")))
    ref = PACE_REFERENCE.get(str(j.get("slowdown_reference")))
    return f"{method} {ref}" if method and ref else "alone and now"


def bound_text(at_least: float) -> str:
    """A bound on a slowdown, "≥36×" (one decimal below 10: "≥1.6×")."""
    return f"≥{at_least:.0f}×" if at_least >= 10 else f"≥{at_least:.1f}×"


def figure_text(s: float | None, at_least: float | None = None) -> str:
    """A slowdown's figure: its value ("2.10×"), else its bound ("≥36×"), else "–"."""
    return f"{s:.2f}×" if s is not None else bound_text(at_least) if at_least is not None else DASH


def provenance_text(s: float | None, source: str | None, method: str | None,
                    reference: str | None, at_least: float | None = None) -> str:
    """A slowdown with where it comes from, for a row's details: "2.10× pace · batches ·
    twin", "1.64× meas · steps · solo", a bound where there is no value: "≥36× pace ·
    py-spy steps · own"; what is not known is left out."""
    if s is None and at_least is None:
        return DASH
    bits = [figure_text(s, at_least) + (f" {SOURCE_MARK.get(source or '', source)}" if source else "")]
    bits += [METHOD_MARK.get(method, method)] if method else []
    bits += [REFERENCE_MARK.get(reference, reference)] if reference else []
    return " · ".join(bits)


def row_slowdown(s: float | None, source: str | None, doubt: str | None,
                 at_least: float | None, outside: float | None) -> tuple[str, float | None]:
    """A job row's slowdown cell and the figure it shows (for its tone): `slowdown_text`, or,
    where load from outside the jobs costs the job more than the other jobs do (more than
    SLOW), that figure, marked "out" ("3.77× out?": a job alone among the jobs, slowed by
    another user's busy loop, read "1.00× est")."""
    if outside is not None and outside > SLOW and outside > (s or at_least or 1.0):
        return f"{outside:.2f}× out" + ("?" if doubt else ""), outside
    return slowdown_text(s, source, doubt, at_least), s


def slowdown_text(s: float | None, source: str | None = None, doubt: str | None = None,
                  at_least: float | None = None) -> str:
    """A job's one slowdown with where it comes from: "1.64× meas", "2.94× est", "1.50× probe";
    "2.94× est?" where the estimate carries a doubt (`slowdown_doubt`); "≥36× pace" where there
    is no value but a bound (`slowdown_at_least`)."""
    if s is None and at_least is None:
        return DASH
    mark = SOURCE_MARK.get(source or "")
    return figure_text(s, at_least) + (f" {mark}" if mark else "") + ("?" if doubt and mark else "")
