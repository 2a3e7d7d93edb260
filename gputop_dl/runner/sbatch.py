"""`gputop-dl queue FILE --sbatch DIR`: one Slurm batch script per workload, and a submit script."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import TextIO

from gputop_dl.config import load_session
from gputop_dl.errors import UsageError


def run_sbatch(path: str, out_dir: str, *, policy: str | None = None, out: TextIO | None = None) -> int:
    """Write DIR/<job>.sbatch per workload of `path` (sched/sbatch.py says what goes in) and
    DIR/submit.sh, which submits them in the policy's order; runs nothing. Each job's expected
    duration and solo CPU need come from its cached solo baseline, as for `queue`."""
    from gputop_dl.collect.environment import environment
    from gputop_dl.collect.nvml.gpus import Nvml
    from gputop_dl.collect.jobs.fingerprint import fingerprint
    from gputop_dl.engine.queue_plan import job_for
    from gputop_dl.record.paths import default_db_path
    from gputop_dl.record.store import Store
    from gputop_dl.sched.sbatch import nice_values, sbatch_script, submit_script

    out = out or sys.stdout
    nvml = Nvml()
    spec = load_session(path, gpu_count=nvml.device_count())
    pol = policy or spec.policy
    env = environment(nvml)
    db = default_db_path(writable=False)
    store = Store(db, readonly=True) if os.path.exists(db) else None
    try:
        profiled = []
        for w in spec.workloads:
            base = store.baseline(fingerprint(w, spec.cuda, env)) if store else None
            job, _ = job_for(w, base, cuda=False)  # a count of GPUs: Slurm places them
            src = ("cached solo baseline" if base and base.get("cpu_cores") else
                   f"no measured solo CPU need: run `gputop-dl launch {path} --only {w.name}` "
                   "(baseline = \"measure\") once to measure it")
            profiled.append((w, job, src))
    finally:
        if store is not None:
            store.close()
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as e:
        raise UsageError(f"--sbatch {out_dir}: cannot create the folder ({e.strerror or e})") from None
    dest = os.path.abspath(out_dir)
    nice = nice_values(pol, [j for _, j, _ in profiled])
    written = []
    for w, job, src in profiled:
        argv: str | Sequence[str]
        if w.command is not None:  # a command job
            argv = w.command[0] if w.shell else w.command
        else:
            argv = [sys.executable, "-m", "gputop_dl", "launch", os.path.abspath(path), "--only", w.name,
                    "--baseline", "none", "--headless"]
        text = sbatch_script(job, argv, cwd=w.cwd or os.path.dirname(os.path.abspath(path)), out_dir=dest,
                             policy=pol, nice=nice.get(w.name), cpu_cores=job.cpu_cores, cpu_source=src,
                             env_keys=sorted(w.env), source=os.path.basename(path))
        fname = f"{w.name}.sbatch"
        _write(os.path.join(dest, fname), text)
        written.append((job, fname))
    written.sort(key=lambda jf: jf[0].arrival_s)  # stable: file order among equal arrivals
    submit = os.path.join(dest, "submit.sh")
    _write(submit, submit_script([(j.name, f) for j, f in written], pol), mode=0o755)
    print(f"wrote {len(written)} sbatch scripts and {submit} (policy {pol}): run it to submit them",
          file=out)
    return 0


def _write(path: str, text: str, mode: int = 0o644) -> None:
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(path, mode)
    except OSError as e:
        raise UsageError(f"--sbatch: cannot write {path} ({e.strerror or e})") from None
