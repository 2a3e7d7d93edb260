"""The verdict as a typed value: its kind, reason, evidence and each job's figures (`to_json`).

`analyse.verdict.judge` and `analyse.live.passive.judge_passive` build a `Verdict`; the plans
publish `Verdict.to_json()` (the JSON contract: docs/design.md `verdict`, the session export,
the snapshot's `verdict`). The words a person reads about each job are the presenters' business
(`present/verdict_text.py`); here are only the figures they come from.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from collections.abc import Sequence
from typing import Any, Literal, get_args

from gputop_dl.analyse.slowdown.figure import Method, Reference, SlowdownSource

VerdictKind = Literal["parallel", "cpu-bound", "gpu-contended", "io-bound", "memory-bound",
                      "outside-load", "other", "insufficient-data", "no-baseline", "alone"]
KINDS: tuple[VerdictKind, ...] = get_args(VerdictKind)

# a verdict's evidence: figures by name, free-form (each rule adds its own), published as the
# JSON verdict's `evidence` (docs/verdict.md)
Evidence = dict[str, Any]

TITLES: dict[VerdictKind, str] = {
    "parallel": "truly parallel",
    "cpu-bound": "concurrent: CPU-bound",
    "gpu-contended": "concurrent: GPU-contended",
    "io-bound": "concurrent: I/O-bound",
    "memory-bound": "concurrent: memory-bound",
    "outside-load": "concurrent: CPU taken by other processes",
    "other": "concurrent: other",
    "insufficient-data": "not enough data yet",
    "no-baseline": "no baseline",
    "alone": "one job, alone",  # one training job seen: nothing to be parallel with (analyse/live/alone.py)
}


@dataclass(frozen=True)
class JobVerdict:
    """One judged job's figures (None = unknown). The passive judgement's extras (`source`,
    `slowdown_confidence`, the CPU-wait figures, `why`) are written to JSON only when set, so a
    measured verdict's JSON is what it always was."""

    name: str
    slowdown: float | None = None
    stall: float | None = None
    solo_stall: float | None = None
    cpu_cores: float | None = None
    solo_cpu_cores: float | None = None
    steps: int | None = None
    mean_slowdown: float | None = None
    step_time_s: float | None = None
    solo_step_time_s: float | None = None
    # the passive judgement (analyse/live/passive.py)
    source: SlowdownSource | None = None
    method: Method | None = None  # what read the live slowdown, and what it is divided by
    reference: Reference | None = None  # (analyse/slowdown/figure.py)
    slowdown_confidence: float | None = None
    slowdown_doubt: str | None = None  # why the estimate can be far from the truth
    cpu_wait: float | None = None  # 0..1 of the job's runnable time spent waiting for a CPU
    critical_wait: float | None = None  # the share of its critical path spent waiting for CPU
    gpu_wait: float | None = None  # 0..1 of its GPU time another job held the GPU
    why: str | None = None  # why the slowdown is unknown ("–" on screen)
    # where it is unknown: its own pace's bound, at least this slow (analyse/slowdown/pace.py)
    slowdown_at_least: float | None = None
    # how much faster without the load from outside the jobs (analyse/live/outside_load.py)
    outside_slowdown: float | None = None

    def replace(self, **changes: Any) -> JobVerdict:
        return dataclasses.replace(self, **changes)

    def to_json(self) -> dict[str, Any]:
        out = {"name": self.name, "slowdown": self.slowdown, "stall": self.stall,
               "solo_stall": self.solo_stall, "cpu_cores": self.cpu_cores,
               "solo_cpu_cores": self.solo_cpu_cores, "steps": self.steps,
               "mean_slowdown": self.mean_slowdown, "step_time_s": self.step_time_s,
               "solo_step_time_s": self.solo_step_time_s}
        for k in ("source", "method", "reference", "slowdown_confidence", "slowdown_doubt", "cpu_wait", "critical_wait",
                  "gpu_wait", "why", "outside_slowdown", "slowdown_at_least"):
            if getattr(self, k) is not None:
                out[f"slowdown_{k}" if k in ("source", "method", "reference") else k] = getattr(self, k)
        return out


FixKind = Literal["pool-width", "spinning-pools", "cores", "queue", "loader", "augmentation",
                  "num-workers", "use-gpus", "gpu-placement", "watch-loaders", "dataset-location",
                  "shards", "stagger-reads", "memory", "memory-high"]
FIX_KINDS: tuple[FixKind, ...] = get_args(FixKind)


@dataclass(frozen=True)
class Fix:
    """One recommendation of the verdict's rules: what it is (`kind`), the jobs it is for (each
    one whose cause is present: a loader fix only for jobs with DataLoader workers), its words."""

    kind: FixKind
    jobs: tuple[str, ...]
    text: str

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "jobs": list(self.jobs), "text": self.text}


# A verdict as JSON (`Verdict.to_json()`): the document that is recorded, exported and shown;
# its shape is the schema gputop-dl.verdict/1 (gputop_dl/schemas), not a Python type
VerdictJson = dict[str, Any]


@dataclass(frozen=True)
class Verdict:
    """Parallel or only concurrent, and why: the kind, one reason, the evidence (figures and
    the lines that state them), what to do, and a confidence 0..1."""

    kind: VerdictKind
    reason: str
    confidence: float
    evidence: Evidence = field(default_factory=dict)
    evidence_lines: tuple[str, ...] = ()
    recommendations: tuple[str, ...] = ()
    jobs: tuple[JobVerdict, ...] = ()
    title: str = ""
    # the rules' recommendations with their kinds and jobs (each one's words are also in
    # `recommendations`, where later steps may add fixes of their own without a kind)
    fixes: tuple[Fix, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown verdict kind {self.kind!r}")
        if not self.title:
            object.__setattr__(self, "title", TITLES[self.kind])

    def replace(self, **changes: Any) -> Verdict:
        return dataclasses.replace(self, **changes)

    def with_evidence(self, **more: Any) -> Verdict:
        """A copy with these evidence entries added (or replaced)."""
        return self.replace(evidence={**self.evidence, **more})

    @classmethod
    def fixed(cls, fixes: Sequence[Fix], **fields: Any) -> Verdict:
        """A verdict whose recommendations are these fixes' words, in order."""
        return cls(fixes=tuple(fixes), recommendations=tuple(f.text for f in fixes), **fields)

    def with_fix_first(self, fix: Fix) -> Verdict:
        """A copy with this fix first, before the others."""
        return self.replace(fixes=(fix,) + self.fixes,
                            recommendations=(fix.text,) + self.recommendations)

    def with_lines(self, *lines: str) -> Verdict:
        """A copy with these evidence lines appended."""
        return self.replace(evidence_lines=self.evidence_lines + tuple(lines))

    def to_json(self) -> dict[str, Any]:
        """The JSON contract's `verdict` object (fresh lists and dicts: the caller may keep it)."""
        return {"kind": self.kind, "title": self.title, "reason": self.reason,
                "confidence": self.confidence, "evidence": dict(self.evidence),
                "evidence_lines": list(self.evidence_lines),
                "recommendations": list(self.recommendations),
                "jobs": [j.to_json() for j in self.jobs],
                "fixes": [f.to_json() for f in self.fixes]}
