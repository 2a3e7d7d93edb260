"""Verdict: did the jobs run truly in parallel, or only concurrently, and why (with the fix).

Pure functions over measured evidence (no I/O; what they read: verdict_evidence.py). Metrics
(docs/contracts.md): per job slowdown s_i = t_step(co-run) / t_step(solo), system throughput
STP = sum(1/s_i), parallel efficiency E = STP / n, ANTT = mean(s_i). Co-run figures are taken over the *overlap window*: the time
when every job was past its warm-up and none had finished yet, so a job that ran alone at the
end does not dilute its slowdown.

Rules, first match wins (thresholds are module constants and tested at their boundaries):
- insufficient-data: a job has fewer than MIN_STEPS co-run steps in the overlap window;
- cpu-bound without slowdowns: no step times alone, but each job's CPU need alone was measured
  (diagnose's probe), the needs sum above BUSY x cores, a CPU signal fires, and some job used
  more than SLOW x its CPU together when alone (it was starved of cores);
- no-baseline: no job has a solo baseline (the reason still names the CPU signals);
- parallel: every s_i <= SLOW (1.10);
- gpu-contended: a slowed job shares a GPU with another job and its stall did not rise;
- cpu-bound: a CPU signal fires (host busy >= 90 % of allowed cores, PSI some >= 10 %,
  load/cores > 1, cgroup throttling >= 5 %) and the stall rose by >= 5 points, or the jobs'
  summed solo CPU need exceeds the cores, or the jobs train on the CPU itself;
- gpu-contended: a slowed job shares a GPU (stall rose too, but the CPU is not saturated);
- other: slowed on separate devices without CPU saturation (NVML's throttle reasons shown).

Confidence: how sure the measured slowdowns put the jobs on their side of SLOW, from the
step-time spread and step counts of the co-run window and the solo baselines (Student's t;
`slowdown_confidence` in verdict_confidence.py). Without baselines, co-run steps /
FULL_CONFIDENCE_STEPS.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from gputop_dl.analyse.slowdown.figure import measured
from gputop_dl.analyse.thresholds import SLOW
from gputop_dl.analyse.live.alone import alone_verdict
from gputop_dl.analyse.verdict_confidence import (FULL_CONFIDENCE_STEPS, side_probability,
                                                  slowdown_confidence)
from gputop_dl.analyse.verdict_evidence import (BUSY, STEP_METHOD, HostEvidence, JobEvidence,
                                                shared_gpus)
from gputop_dl.analyse.verdict_types import (TITLES, Evidence, Fix, JobVerdict, Verdict,
                                          VerdictKind)

__all__ = ["TITLES", "Verdict", "judge"]

STALL_RISE = 0.05  # stall fraction rise (absolute) that counts
MIN_STEPS = 3
NOISY_CV = 0.15  # a solo baseline whose step-time CV is above this was measured on a busy box
FASTER = 0.90  # a job this much faster beside the others than alone: its solo figure was slow


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{x:.0%}"


def judge(jobs: list[JobEvidence], host: HostEvidence, baseline_mode: str = "measure",
          need_steps: int = MIN_STEPS, final: bool = False) -> Verdict:
    """The verdict (`Verdict.to_json()`: docs/contracts.md, "The verdict object"), with
    evidence and recommendations.

    A solo baseline whose step times varied by more than NOISY_CV was taken on a busy machine
    or over too few steps: the verdict says so and advises a re-run; where that spread does not
    already enter the confidence (`slowdown_confidence`), the confidence is halved. So it is
    for a job faster beside the others than alone (a slowdown under FASTER): its solo figure
    was slow. Both say so, with the re-measure advice once, the confidence halved once.
    `final`: the session has ended, so the verdict says what was seen, never "so far"."""
    v = _judge(jobs, host, need_steps, final)
    if len(jobs) == 1 and v.kind == "parallel":  # one job: nothing to be parallel with
        j = jobs[0]
        v = alone_verdict(j.name, cpus=host.cpus, cores=j.cpu_cores, cpu_wait=None,
                          stall=j.stall, io_wait=None, evidence=v.evidence,
                          lines=v.evidence_lines, jobs=v.jobs,
                          gpu=None if j.on_cpu else f"GPU {','.join(map(str, j.gpus))}",
                          measured=f"{v.reason}; measured").replace(confidence=v.confidence)
    if final and v.kind == "insufficient-data":
        v = v.replace(title="not enough data")  # the session ended: no "yet"
    if v.kind in ("insufficient-data", "no-baseline"):
        return _with_provenance(v, jobs, baseline_mode)
    noisy = [(j, cv) for j in jobs if (cv := j.solo_cv) is not None and cv > NOISY_CV]
    if noisy:
        v = v.with_evidence(noisy_baselines={j.name: round(cv, 3) for j, cv in noisy})
        v = v.with_lines(
            "noisy solo baseline: " + ", ".join(f"{j.name} step-time CV {cv:.2f}"
                                                for j, cv in noisy)
            + f" (> {NOISY_CV:.2f}): the machine was busy while it ran, or the baseline was "
            "too short, so the slowdowns are uncertain")
    # A job more than 1/FASTER faster beside the others than alone had a solo figure slower
    # than its work can be: something else took its cores while it ran alone, or the kernel
    # shared them unevenly (docs/verdict.md, "What the probe disturbs").
    fast = [(j, s) for j in jobs if (s := j.slowdown) is not None and s < FASTER]
    if fast:
        v = v.with_evidence(faster_than_alone={j.name: round(s, 3) for j, s in fast}).with_lines(
            "faster beside the others than alone: "
            + ", ".join(f"{j.name} {s:.2f}×" for j, s in fast)
            + ": its solo figure is slower than the work it did in the co-run (something else "
            "took cores while it ran alone, or the cores were shared unevenly), so its slowdown "
            "reads low and the others' may too")
    if noisy or fast:
        v = v.replace(recommendations=v.recommendations + (
            "probe longer (a larger probe_s and baseline_steps) or on a quieter machine"
            if baseline_mode == "probe" else
            "measure the baselines again on a quieter machine or with more baseline_steps "
            "(baseline = \"measure\"; \"cache\" would reuse these)",))
    # halved once: a noisy baseline's spread, where known, is in the confidence already
    if fast or any(side_probability(j) is None for j, _ in noisy):
        v = v.replace(confidence=round(v.confidence / 2, 2))
    return _with_provenance(v, jobs, baseline_mode)


def _with_provenance(v: Verdict, jobs: Sequence[JobEvidence], baseline_mode: str) -> Verdict:
    """Each judged job's slowdown with where it comes from (analyse/slowdown/figure.py): its
    step times over its solo baseline's or its probe window's, or py-spy's steps (`diagnose`).
    A slowdown from another rate (`rate_slowdown`) is left to the caller that gave it."""
    by = {j.name: j for j in jobs}
    out = []
    for jv in v.jobs:
        e = by.get(jv.name)
        fig = (None if jv.slowdown is None or e is None or e.rate_slowdown is not None
               else measured(jv.slowdown, baseline_mode == "probe" or e.source == "py-spy"))
        if fig is not None and e is not None:
            fig = dataclasses.replace(fig, method=STEP_METHOD[e.source])
        out.append(jv if fig is None else
                   jv.replace(source=fig.source, method=fig.method, reference=fig.reference))
    return v.replace(jobs=tuple(out))


def _judge(jobs: list[JobEvidence], host: HostEvidence, need_steps: int = MIN_STEPS,
           final: bool = False) -> Verdict:
    if not jobs:
        return _verdict("insufficient-data", "no launched job ran" if final else
                        "no launched job has run yet", {}, [], [], 0.0)
    short = [j.name for j in jobs if j.steps < need_steps]
    if short:
        blind = [j.name for j in jobs if j.steps == 0 and j.source == "hook" and not j.seen_steps]
        apart = [j for j in jobs if j.name in short and (j.seen_steps or 0) >= MIN_STEPS]
        reason = (f"fewer than {MIN_STEPS} co-run steps for {', '.join(short)} in the whole "
                  "session" if final else
                  f"fewer than {MIN_STEPS} co-run steps so far for {', '.join(short)}")
        if apart:  # steps, but not while every job was past its warm-up and running
            reason += ("; " + ", ".join(f"{j.name} made {j.seen_steps}" for j in apart)
                       + f" step{'s' if len(apart) > 1 or apart[0].seen_steps != 1 else ''}, "
                       "but not while every job was past its warm-up and running"
                       + (" (they did not run together)" if final else ""))
        if blind:
            reason += (f"; the start-up hook has seen no DataLoader steps of {', '.join(blind)} "
                       "(a script that does not iterate a torch DataLoader cannot be timed)")
        return _verdict("insufficient-data", reason,
                        {"steps": {j.name: j.steps for j in jobs}}, [], [], 0.0)
    n = len(jobs)
    min_steps = min(j.steps for j in jobs)
    confidence = round(min(1.0, min_steps / FULL_CONFIDENCE_STEPS), 2)  # without baselines
    signals = host.cpu_signals()
    evidence: Evidence = {
        "jobs": n, "cpus": host.cpus, "host_busy": host.busy, "cpu_pressure_some10": host.psi_some10,
        "load1": host.load1, "throttled": host.throttled, "cpu_signals": signals,
        "co_cpu_cores": round(sum(j.cpu_cores or 0.0 for j in jobs), 2),
    }
    lines = []
    slow = [j.slowdown for j in jobs]
    measured = [(j, s) for j in jobs if (s := j.slowdown) is not None]  # (job, its slowdown)
    have = [j for j, _ in measured]
    need = sum(j.solo_cpu_cores or 0.0 for j in jobs)
    starved = [j for j in jobs if j.solo_cpu_cores is not None and j.cpu_cores
               and j.solo_cpu_cores > j.cpu_cores * SLOW]
    if not have and signals and len(jobs) > 1 and all(j.solo_cpu_cores is not None for j in jobs) \
            and need > host.cpus * BUSY and starved:
        # no step times, but each job's CPU need alone was measured (diagnose's probe), and
        # some job used more CPU alone than beside the others: it was starved of cores
        evidence["solo_cpu_need_cores"] = round(need, 2)
        lines.append(f"CPU alone: {need:.1f} cores needed; together they used "
                     f"{evidence['co_cpu_cores']:.1f}; {host.cpus} allowed (no slowdown measured)")
        lines.append("CPU alone vs together: " + ", ".join(
            f"{j.name} {j.solo_cpu_cores:.2f} vs {j.cpu_cores:.2f} cores" for j in starved))
        lines.append("CPU signals: " + "; ".join(signals))
        return _cpu_bound(jobs, host, need, True, [], all(j.on_cpu for j in jobs), evidence,
                          lines, confidence)
    if not have:
        reason = "no solo baselines"
        reason += (": judged on signals alone — " + "; ".join(signals)) if signals else (
            ", and no CPU saturation signal fires" + (
                f" (host busy {host.busy:.0%} of {host.cpus} cores; the signal is "
                f"{BUSY:.0%})" if host.busy is not None else ""))
        recs = ["run with baseline = \"measure\" (or \"cache\") to measure each job alone first"]
        return _verdict("no-baseline", reason, evidence, signals, recs, confidence, jobs)

    stp = sum(1.0 / s for s in slow if s)
    evidence.update(stp=round(stp, 3), efficiency=round(stp / len(have), 3),
                    antt=round(sum(s for s in slow if s) / len(have), 3),
                    slowdowns={j.name: round(s, 3) for j, s in measured})
    if len(jobs) > 1:
        lines.append(f"STP {stp:.2f} for {len(have)} jobs (parallel efficiency {stp / len(have):.2f}); "
                     f"slowdowns " + ", ".join(f"{j.name} {j.slowdown:.2f}×" for j in have))
    else:  # one job ran: no co-run, so no system throughput
        lines.append(f"one job ran, alone: {have[0].name} {have[0].slowdown:.2f}× its solo step "
                     "time (no other job beside it: no co-run, no STP)")
    need = sum(j.solo_cpu_cores or 0.0 for j in jobs)
    have_need = any(j.solo_cpu_cores is not None for j in jobs)
    if have_need:
        evidence["solo_cpu_need_cores"] = round(need, 2)
        lines.append(f"CPU at solo speed: {need:.1f} cores needed; co-run used "
                     f"{evidence['co_cpu_cores']:.1f}; {host.cpus} allowed")
    rose = [j for j in have if j.stall is not None and j.solo_stall is not None
            and j.stall - j.solo_stall >= STALL_RISE - 1e-9]
    lines.append("data-wait solo → co-run: " + ", ".join(
        f"{j.name} {_pct(j.solo_stall)} → {_pct(j.stall)}" for j in jobs))
    if signals:
        lines.append("CPU signals: " + "; ".join(signals))
    shared = shared_gpus(jobs)
    if shared:
        evidence["shared_gpus"] = {str(g): names for g, names in shared.items()}
        lines.append("shared GPUs: " + "; ".join(f"GPU {g}: {', '.join(v)}" for g, v in shared.items()))
    for job, frames in host.hot_frames.items():
        if frames:
            lines.append(f"hottest data-loader frames of {job}: " + ", ".join(
                f"{f} {p:.0%}" for f, p in frames[:3]))

    slowed = [j for j, s in measured if s > SLOW]
    confidence = slowdown_confidence(slowed or have, any_of=bool(slowed), fallback=confidence)
    if not slowed:
        recs = [f"headroom: the jobs used {evidence['co_cpu_cores']:.1f} of {host.cpus} cores"]
        return _verdict("parallel", f"every job ran within {SLOW - 1:.0%} of its solo speed "
                        f"(worst {max(s for _, s in measured):.2f}×)", evidence, lines, recs,
                        confidence, jobs)
    slowed_shared = [j for j in slowed if any(j.name in v for v in shared.values())]
    on_cpu = all(j.on_cpu for j in jobs)
    need_exceeds = have_need and need > host.cpus * BUSY
    if slowed_shared and not any(j in rose for j in slowed_shared) and not (signals and on_cpu):
        return _gpu_contended(slowed_shared, shared, evidence, lines, confidence, jobs)
    if signals and (rose or need_exceeds or on_cpu):
        return _cpu_bound(jobs, host, need, have_need, rose, on_cpu, evidence, lines,
                          confidence)
    if slowed_shared:
        return _gpu_contended(slowed_shared, shared, evidence, lines, confidence, jobs,
                              rose=[j for j in rose if j in slowed_shared], host=host)
    gpu_bits = [f"GPU {g}: util {_pct(u)}" + (f", throttle {', '.join(host.gpu_throttle[g])}"
                                             if host.gpu_throttle.get(g) else "")
                for g, u in sorted(host.gpu_util.items())]
    if gpu_bits:
        lines.append("NVML: " + "; ".join(gpu_bits))
    if len(jobs) == 1:  # nothing of this session ran beside it
        reason = (f"{slowed[0].name} ran slower than its solo baseline with no other launched "
                  "job beside it: load from outside this session, or a noisy baseline")
    else:
        reason = (f"{', '.join(j.name for j in slowed)} slowed on separate devices without CPU "
                  "saturation" + ("" if rose else " or a data-stall rise"))
    recs = ["look at PCIe/memory bandwidth and clocks: NVML throttle reasons above; "
            "try the jobs pairwise to find which pair interferes"]
    return _verdict("other", reason, evidence, lines, recs, confidence, jobs)


def _cpu_bound(jobs: list[JobEvidence], host: HostEvidence, need: float, have_need: bool,
               rose: list[JobEvidence], on_cpu: bool, evidence: Evidence, lines: list[str],
               confidence: float) -> Verdict:
    cpus = host.cpus
    if on_cpu:
        reason = (f"the jobs train on the CPU, so model compute and input pipeline share "
                  f"{cpus} cores")
    elif rose:
        reason = (f"the data loaders of {', '.join(j.name for j in rose)} waited longer while "
                  "the CPUs were saturated: the input pipeline is the bottleneck")
    else:
        reason = "the CPUs were saturated: the jobs together need more cores than there are"
    names = tuple(j.name for j in jobs)
    fixes = []
    if have_need:
        fixes.append(Fix("cores", names, f"at solo speed these jobs need ≈ {need:.1f} cores; "
                                         f"this machine allows {cpus}"))
        fit = fit_at_once([j.solo_cpu_cores or 0.0 for j in jobs], cpus)
        if fit < len(jobs):
            fixes.append(Fix("queue", names, at_most(fit, cpus)))
    heavy = tuple(j.name for j in jobs if j.transforms not in (None, "light"))
    if heavy and not on_cpu:
        fixes.append(Fix("augmentation", heavy, "pre-compute the augmentation (pre-resized "
                         f"dataset, transforms = \"light\") for {', '.join(heavy)}: the "
                         "background's fix cut CPU use ~3×"))
    loaders = tuple(j.name for j in jobs if j.num_workers > 0)  # a job without workers: none to cut
    workers = sum(j.num_workers for j in jobs)
    if workers > cpus:
        per = max(1, cpus // len(jobs) - 1) if cpus > len(jobs) else 1
        fixes.append(Fix("num-workers", loaders, f"{workers} data-loader workers on {cpus} "
                         f"cores: set num_workers ≈ {per} per job for {', '.join(loaders)} "
                         "(more workers only queue for the same cores)"))
    if on_cpu and host.gpu_util:  # no GPU advice on a box without GPUs
        fixes.append(Fix("use-gpus", names, "for real parallelism, run these jobs on this "
                         "box's GPUs (or one after another here)"))
    return _verdict("cpu-bound", reason, evidence, lines, fixes, confidence, jobs)


def fit_at_once(needs: list[float], cpus: int) -> int:
    """How many of these jobs fit at once on `cpus` cores at their CPU need, smallest first."""
    fit, acc = 0, 0.0
    for need in sorted(needs):
        acc += need
        if acc > cpus:
            break
        fit += 1
    return fit


def at_most(fit: int, cpus: int) -> str:
    return f"run at most {max(fit, 1)} of these jobs at once on {cpus} cores, or queue the rest"


def _gpu_contended(slowed_shared: list[JobEvidence], shared: dict[int, list[str]],
                   evidence: Evidence, lines: list[str], confidence: float,
                   jobs: list[JobEvidence], rose: Sequence[JobEvidence] = (),
                   host: HostEvidence | None = None) -> Verdict:
    """`rose`: slowed jobs whose data-wait rose too, although no CPU signal fired (seen on an
    H100: the heavy trio on one GPU, data-wait 1% -> 57-70%, host 79% busy). The GPU is named
    first, the input pipeline second, and the reason says which it was."""
    pairs = "; ".join(f"GPU {g}: {', '.join(v)}" for g, v in shared.items())
    reason = (f"{', '.join(j.name for j in slowed_shared)} share a GPU ({pairs}) and queue for "
              "it; ")
    fixes = [Fix("gpu-placement", tuple(j.name for j in slowed_shared),
                 "place these jobs on separate GPUs, or run them one after another "
                 f"(sequential time ≈ sum of solo times; co-run STP {evidence['stp']:.2f})")]
    if rose:
        busy = (f"{host.busy:.0%} of {host.cpus} cores busy" if host is not None
                and host.busy is not None else "no CPU signal")
        reason += (f"the data-wait of {', '.join(j.name for j in rose)} rose too, with the CPU "
                   f"not saturated ({busy}): the input pipeline is a second suspect")
        cut = " or cut num_workers" if any(j.num_workers > 0 for j in rose) else ""
        fixes.append(Fix("watch-loaders", tuple(j.name for j in rose),
                         f"watch the loaders' CPU wait and cores live (gputop-dl) while the "
                         f"jobs share the GPU; if they wait for CPUs, lighten the transforms{cut}"))
    else:
        reason += "their data-wait did not rise"
    return _verdict("gpu-contended", reason, evidence, lines, fixes, confidence, jobs)


def _verdict(kind: VerdictKind, reason: str, evidence: Evidence, lines: Sequence[str],
             recs: Sequence[str | Fix], confidence: float,
             jobs: Sequence[JobEvidence] = ()) -> Verdict:
    per_job = []
    for j in jobs:
        s, m = j.slowdown, j.mean_slowdown
        per_job.append(JobVerdict(
            name=j.name, slowdown=None if s is None else round(s, 3), stall=j.stall,
            solo_stall=j.solo_stall, cpu_cores=j.cpu_cores, solo_cpu_cores=j.solo_cpu_cores,
            steps=j.steps, mean_slowdown=None if m is None else round(m, 3),
            step_time_s=j.step_time_s, solo_step_time_s=j.solo_step_time_s))
    fixes = [r for r in recs if isinstance(r, Fix)]
    return Verdict(kind=kind, reason=reason, confidence=confidence, evidence=evidence,
                   evidence_lines=tuple(lines), jobs=tuple(per_job), fixes=tuple(fixes),
                   recommendations=tuple(r.text if isinstance(r, Fix) else r for r in recs))
