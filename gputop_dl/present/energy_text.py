"""A job's energy in words, one line: its joules, power, per step, per epoch, samples per joule,
where they came from; unknown is "–" with the reason (the details screen, `--once`, the launch
summary and the report share it)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gputop_dl.analyse.recorded.energy_phases import CorunEnergy, PhaseEnergy, corun_energy
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
        parts.append(_per_joule(j.samples_per_joule, est))
    text = " · ".join(parts) + f"  (GPU {j.energy_source or DASH})"
    if est:
        text += "; ~ an estimate: " + (j.energy_note or "a shared GPU split by time share")
    elif j.energy_note:
        text += "; " + j.energy_note
    return text


def _per_joule(x: float, estimate: bool | None) -> str:
    """"2.1 samples/J", "~" in front where the joules behind it are an estimate."""
    return ("~" if estimate else "") + f"{x:.3g} samples/J"


def phase_text(p: PhaseEnergy) -> str:
    """One recorded phase: "co-run 12.3 kJ · 310 W · 62.0 J/step · 2.1 samples/J"."""
    est = p["estimate"]
    parts = [f"{p['phase']} {joules(p['joules'], est)}", num(p["power_w"], ".0f", " W")]
    if p["per_step_j"] is not None:
        parts.append(joules(p["per_step_j"], est) + "/step")
    if p["per_epoch_j"] is not None:
        parts.append(joules(p["per_epoch_j"], est) + "/epoch")
    if p["samples_per_joule"] is not None:
        parts.append(_per_joule(p["samples_per_joule"], est))
    return " · ".join(parts)


def corun_text(c: CorunEnergy | None) -> str | None:
    """The co-run's energy per sample against running the jobs one after another."""
    if c is None:
        return None
    more = "more" if c["ratio"] >= 1 else "less"
    return (f"Energy per sample: the co-run used {c['ratio']:.2f}× the GPU energy per sample of "
            f"running its {c['jobs']} jobs one after another ({abs(c['ratio'] - 1) * 100:.0f} % "
            f"{more}; each job's co-run samples per joule against its solo baseline's"
            + ("; ~ a shared GPU split by time share, an estimate" if c["estimate"] else "") + ").")


def energy_notes(jobs: Sequence[Mapping[str, Any]]) -> list[str]:
    """The report's energy notes: each job's recorded phases, then the co-run against alone."""
    out = []
    for j in jobs:
        phases = j.get("energy") or []
        if phases:
            out.append(f"Energy of {j['name']} (its GPUs): "
                       + "; ".join(phase_text(p) for p in phases) + ".")
    line = corun_text(corun_energy([j.get("energy") or [] for j in jobs]))
    if line:
        out.append(line)
    if out and any(p["estimate"] for j in jobs for p in j.get("energy") or []):
        out.append("~: a GPU the job shared, its joules split by time share (equal turns of "
                   "the owners computing on it): an estimate.")
    return out
