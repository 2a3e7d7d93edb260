"""A job's energy in words, one line: its joules, power, per step, per epoch, samples per joule,
where they came from; unknown is "–" with the reason (the details screen, `--once`, the launch
summary and the report share it)."""

from __future__ import annotations

from gputop_dl.snapshot import JobSample
from gputop_dl.text.fmt import DASH, joules, num


def energy_line(j: JobSample) -> str | None:
    """"12.3 kJ · 310 W · 62.0 J/step · ..." (None: nothing known or said about it)."""
    if j.energy_j is None:
        return f"{DASH} ({j.energy_note})" if j.energy_note else None
    est = j.energy_estimate
    parts = [joules(j.energy_j, est) + " over its run", num(j.energy_w, ".0f", " W")]
    if j.energy_per_step_j is not None:
        parts.append(joules(j.energy_per_step_j, est) + "/step")
    if j.energy_per_epoch_j is not None:
        parts.append(joules(j.energy_per_epoch_j, est) + "/epoch")
    if j.samples_per_joule is not None:
        parts.append(f"{j.samples_per_joule:.3g} samples/J")
    text = " · ".join(parts) + f"  (GPU {j.energy_source or DASH})"
    if est:
        text += "; ~ an estimate: " + (j.energy_note or "a shared GPU split by time share")
    return text
