"""The job details' step phases: a stacked bar per step (solo against now) and the rank table.

Rendered as Content lines for the job details screen (job_detail.job_detail_lines). A phase that
was not measured gets no cells and "–" in the legend; a job without phases gets one line
saying why (docs/phases.md).
"""

from __future__ import annotations

from textual.content import Content

from gputop_dl.snapshot import JobSample
from gputop_dl.step_phases import StepPhases
from gputop_dl.text.fmt import DASH

WIDTH = 48
# phase -> (style, legend letter)
STYLES = {"data": "#e06c75", "h2d": "#c678dd", "forward": "#61afef", "backward": "#56b6c2",
          "optimizer": "#98c379", "other": "#7f848e"}


def _ms(v: float | None) -> str:
    return DASH if v is None else f"{v * 1000:.1f} ms" if v < 0.1 else f"{v * 1000:.0f} ms"


def step_total(p: StepPhases) -> float:
    return sum(v for v in p.parts().values() if v is not None)


def stacked_bar(p: StepPhases, scale: float, width: int = WIDTH) -> Content:
    """One step's phases as coloured cells, `scale` seconds = `width` cells (largest remainder
    rounding, so the cells add up to the step's share of the width)."""
    parts = [(k, v or 0.0) for k, v in p.parts().items()]
    total = sum(v for _, v in parts)
    cells = round(width * total / scale) if scale > 0 else 0
    raw = [(k, cells * v / total if total else 0.0) for k, v in parts]
    n = {k: int(x) for k, x in raw}
    left = cells - sum(n.values())
    for k, _x in sorted(raw, key=lambda kx: -(kx[1] - int(kx[1])))[:max(0, left)]:
        n[k] += 1
    return Content.assemble(*[("█" * n[k], STYLES[k]) for k, _ in parts if n[k]],
                            ("░" * (width - cells), "$text-muted"))


def share_lines(j: JobSample) -> list[Content]:
    """A found job's phases as py-spy sampled them: each phase's share of the trainer's main-thread
    samples, one bar of the full width; no per-step times (those need the hook)."""
    shares = dict(j.phase_shares)
    n = {k: round(WIDTH * shares.get(k, 0.0)) for k in STYLES}
    n["other"] = max(0, n["other"] + WIDTH - sum(n.values()))  # rounding lands in "other"
    bar = Content.assemble(*[("█" * n[k], STYLES[k]) for k in STYLES if n[k]])
    legend = [Content.assemble(("■ ", STYLES[k]), f"{k} {shares[k] * 100:.0f} %")
              for k in STYLES if k in shares]
    samples = j.phase_shares_samples
    return [Content.assemble(("  share", "bold"), " ", bar),
            Content("  ") + Content("  ").join(legend),
            Content.styled(f"  sampled by py-spy ({DASH if samples is None else samples} samples of "
                           "the trainer's main thread): shares of its time, not per-step means; "
                           "a copy to the GPU counts as other here", "$text-muted")]


def phase_lines(j: JobSample) -> list[Content]:
    """The job's step phases, solo against now, and, for a distributed job, its ranks with the
    straggler marked."""
    out = [Content(""), Content.styled("step phases (mean per step)", "bold $text-accent")]
    p = j.phases
    if p is None and j.phase_shares:
        return out + share_lines(j)
    if p is None:
        out.append(Content.styled("  not measured (no step phases from this job: a found job, "
                                  "or its script has no DataLoader the hook sees)", "$text-muted"))
        return out
    rows = [("solo", p.solo), ("now", p)] if p.solo else [("now", p)]
    scale = max(step_total(q) for _, q in rows) or 1.0
    for label, q in rows:
        out.append(Content.assemble((f"  {label:<5}", "bold"), stacked_bar(q, scale),
                                    f" {_ms(step_total(q))}"))
    legend = []
    for k, v in p.parts().items():
        solo = p.solo.parts()[k] if p.solo else None
        grown = "" if solo is None or v is None else f" ({(v - solo) * 1000:+.1f})"
        legend.append(Content.assemble(("■ ", STYLES[k]), f"{k} {_ms(v)}{grown}"))
    out.append(Content("  ") + Content("  ").join(legend))
    cls = {"input-bound": "input-bound: data is at least 20 % of the step",
           "compute-bound": "not input-bound: data is under 20 % of the step"}.get(
        p.cls or "", f"no class yet (fewer than 20 steps: {p.steps})")
    out.append(Content.styled(f"  {cls}", "$text-muted"))
    if j.ranks:
        out += [Content(""), Content.styled("ranks (mean per step)", "bold $text-accent"),
                Content.styled(f"  {'rank':>5} {'step':>9} {'data':>9} {'h2d':>9} {'forward':>9}"
                               f" {'backward':>9} {'optim.':>9}", "bold")]
        st = j.straggler
        for r in j.ranks:
            parts = r.phases.parts() if r.phases else {}
            cells = "".join(f" {_ms(parts.get(k)):>9}" for k in
                            ("data", "h2d", "forward", "backward", "optimizer"))
            line = f"  {r.rank:>5} {_ms(r.step_time_s):>9}{cells}"
            if st is not None and r.rank == st.rank:
                out.append(Content.styled(
                    f"{line}  ◀ late: {st.cause} +{st.excess_s * 1000:.0f} ms",
                    "bold $text-warning"))
            else:
                out.append(Content(line))
        if st is None:
            out.append(Content.styled("  no rank is late (or too few steps to say)", "$text-muted"))
    return out
