"""Slurm batch scripts for the jobs of a queue: GPUs, CPUs from the measured solo need, the policy's order.

    text = sbatch_script(job, argv, name=..., cwd=..., env_keys=..., ...)
    text = submit_script(order, policy)

Beyond one machine the queue is Slurm's job: gputop-dl writes what Slurm needs to keep each
job at its solo speed and in the policy's order, and does not schedule a cluster itself.

- `--gres=gpu:N`: the GPUs the job asks for;
- `--cpus-per-gpu = ceil(cpu_cores / N x 1.1)` from the measured solo CPU need (10 % headroom
  for each rank's own threads), left out with a note when none was measured;
- the policy: `fifo` starts each job after the previous one started (`--dependency=after:`,
  set by the submit script, which knows the job ids); `sjf` and `priority` order by `--nice`
  (shorter expected duration, or higher priority, first; Slurm's multifactor priority weighs
  it); `fifo-backfill` is Slurm's own backfill; `lyapunov` has no Slurm form and is left to
  Slurm's priority. A listed `arrival` becomes `--begin=now+S`;
- environment values are never written: gputop-dl redacts `env` values wherever it records
  them, so the script names each key and stops if the submitter did not export it (sbatch
  passes the submitting environment on).
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Sequence

from gputop_dl.sched.model import Job

HEADROOM = 1.1  # CPU request over the measured solo need


def cpus_per_gpu(cpu_cores: float, gpus: int) -> int | None:
    """Slurm's --cpus-per-gpu for a job measured at `cpu_cores` on `gpus` GPUs (None: unmeasured)."""
    if not cpu_cores or cpu_cores <= 0:
        return None
    return max(1, math.ceil(cpu_cores / max(gpus, 1) * HEADROOM - 1e-9))


def nice_values(policy: str, jobs: Sequence[Job]) -> dict[str, int]:
    """Per job the `--nice` that orders it as `policy` would (0 first); {} for policies that
    have no nice form (fifo, fifo-backfill, lyapunov)."""
    if policy == "sjf":
        order = sorted(jobs, key=lambda j: (j.duration_s, j.arrival_s))
        return {j.name: 10 * i for i, j in enumerate(order)}
    if policy == "priority":
        top = max(j.priority for j in jobs)
        return {j.name: 100 * (top - j.priority) for j in jobs}
    return {}


_POLICY_NOTES = {
    "fifo": "fifo: submit.sh starts this job after the previous one started (--dependency=after:ID)",
    "fifo-backfill": "fifo-backfill: Slurm's backfill scheduler (sched/backfill) does it",
    "sjf": "sjf: --nice orders the jobs by expected solo duration (Slurm's multifactor priority weighs nice)",
    "priority": "priority: --nice orders the jobs by their priority (Slurm's multifactor priority weighs nice)",
    "lyapunov": "lyapunov: no Slurm form; Slurm's own priority decides the order",
}


def sbatch_script(job: Job, argv: Sequence[str] | str, *, cwd: str, out_dir: str, policy: str,
                  nice: int | None, cpu_cores: float, cpu_source: str, env_keys: Sequence[str] = (),
                  source: str = "") -> str:
    """One job's batch script. `argv`: the command (a string: a shell command line);
    `cpu_source`: where the solo CPU need came from, or why there is none."""
    cpg = cpus_per_gpu(cpu_cores, job.gpus)
    lines = ["#!/bin/bash",
             f"# {job.name}: written by gputop-dl queue --sbatch" + (f" from {source}" if source else ""),
             f"#SBATCH --job-name={job.name}", f"#SBATCH --chdir={cwd}",
             f"#SBATCH --output={out_dir}/{job.name}-%j.out"]
    if job.gpus > 0:
        lines.append(f"#SBATCH --gres=gpu:{job.gpus}")
    if cpg is not None:
        lines.append(f"#SBATCH --cpus-per-gpu={cpg}")
    if nice is not None:
        lines.append(f"#SBATCH --nice={nice}")
    if job.arrival_s > 0:
        lines.append(f"#SBATCH --begin=now+{math.ceil(job.arrival_s)}")
    lines.append("")
    lines.append(f"# CPUs: solo need {cpu_cores:.2f} cores ({cpu_source}): ceil(need / {max(job.gpus, 1)} GPU(s) x "
                 f"{HEADROOM}) = {cpg} per GPU" if cpg is not None else
                 f"# CPUs: no --cpus-per-gpu: {cpu_source}")
    lines.append(f"# expected solo duration {job.duration_s:.1f} s; policy {_POLICY_NOTES.get(policy, policy)}")
    if env_keys:
        lines += ["", "# environment of the workload: its values are not written here (gputop-dl redacts env",
                  "# values wherever it records them); export them before sbatch, which passes them on"]
        lines += [f': "${{{k}?{k} is not set: export it before sbatch (workload {job.name})}}"' for k in env_keys]
        lines.append("export " + " ".join(env_keys))
    lines += ["", argv if isinstance(argv, str) else shlex.join(argv), ""]
    return "\n".join(lines)


def submit_script(order: Sequence[tuple[str, str]], policy: str) -> str:
    """A script that sbatches the job scripts (name, file) in the policy's order, printing
    `name job-id` per job; under fifo each depends on the previous one's start."""
    lines = ["#!/bin/bash",
             "# Submit the queue's jobs to Slurm in the policy's order (written by gputop-dl queue --sbatch)",
             "set -euo pipefail", 'cd "$(dirname "$0")"', "prev="]
    for name, fname in order:
        dep = '${prev:+--dependency=after:$prev} ' if policy == "fifo" else ""
        lines.append(f"prev=$(sbatch --parsable {dep}{shlex.quote(fname)}); prev=${{prev%%;*}}; "
                     f"echo {shlex.quote(name)} $prev")
    return "\n".join(lines) + "\n"
