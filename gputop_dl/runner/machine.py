"""`gputop-dl machine` (profile this box, show, store, write) and `gputop-dl plan FILE` (how many fit).

The profile is collect/boxprofile's; it is stored in the session database
(`machine_profiles`) and `--show` prints the newest one. `plan` reads the workload file
(config/'s one-line errors), each job's cached solo baseline where one matches its
fingerprint (else an estimate from the file, said so), and the newest stored profile of this
host (else a --quick one, measured now and stored), and hands them to `sched/fit.py`.
"""

from __future__ import annotations

import json
import socket
import sys
from typing import TYPE_CHECKING, Any

from gputop_dl.errors import UsageError

if TYPE_CHECKING:
    from gputop_dl.collect.nvml.gpus import Nvml
    from gputop_dl.record.store import Store
    from gputop_dl.workload import SessionSpec
from gputop_dl.text.console import console


def _store(readonly: bool) -> Store:
    from gputop_dl.record.store import Store

    return Store(readonly=readonly)


def _say(line: str) -> None:
    print(f"gputop-dl: {line}", file=sys.stderr)


def run_machine(data: list[str] | None, *, quick: bool, as_json: bool, out: str | None,
                show: bool) -> int:
    from gputop_dl.present.machine import machine_markdown, print_machine
    from gputop_dl.record.paths import StoreError

    if show:
        if data or quick or out and not out.endswith(".md"):
            raise UsageError("--show prints the stored profile: it goes with --json or --out only")
        try:
            st = _store(readonly=True)
        except StoreError as exc:
            raise UsageError(f"no stored machine profile ({exc}); run `gputop-dl machine`") from None
        try:
            profile = st.latest_machine()
        finally:
            st.close()
        if profile is None:
            raise UsageError("no stored machine profile; run `gputop-dl machine` first")
    else:
        from gputop_dl.collect.boxprofile import profile_machine

        profile = profile_machine(data, quick=quick, say=_say)
        try:
            st = _store(readonly=False)
            try:
                st.save_machine(profile)
            finally:
                st.close()
        except (StoreError, OSError) as exc:
            _say(f"the profile was not stored: {exc}")
    if out:
        if not out.endswith(".md"):
            raise UsageError(f"--out {out}: expected a .md file")
        from gputop_dl.text.markdown import write_atomic

        write_atomic(out, machine_markdown(profile) + "\n")
        _say(f"wrote {out}")
    if as_json:
        print(json.dumps(profile, indent=2))
    else:
        print_machine(console(), profile)
    return 0


def stored_or_quick_profile() -> tuple[dict[str, Any], str]:  # a gputop-dl.machine/1 document
    """The newest stored profile of this host, else a --quick one measured now (and stored)."""
    from gputop_dl.record.paths import StoreError

    try:
        st = _store(readonly=True)
        try:
            p = st.latest_machine(socket.gethostname())
        finally:
            st.close()
    except StoreError:
        p = None
    if p is not None:
        return p, "the stored machine profile"
    from gputop_dl.collect.boxprofile import profile_machine

    _say("no stored machine profile of this host: measuring a quick one (gputop-dl machine --quick)")
    p = profile_machine(None, quick=True)
    try:
        st = _store(readonly=False)
        try:
            st.save_machine(p)
        finally:
            st.close()
    except (StoreError, OSError):
        pass
    return p, "a quick machine profile measured now"


def run_plan(path: str, as_json: bool = False) -> int:
    from gputop_dl.collect.environment import environment
    from gputop_dl.collect.jobs.fingerprint import fingerprint
    from gputop_dl.collect.nvml.gpus import Nvml
    from gputop_dl.config import load_session
    from gputop_dl.present.machine import plan_json, print_plan
    from gputop_dl.record.paths import StoreError
    from gputop_dl.engine.box_profile import box_capacity
    from gputop_dl.sched.fit import job_demands, plan_fit

    with Nvml() as nvml:
        spec = load_session(path, gpu_count=nvml.device_count())
        env = environment(nvml)
    profile, where = stored_or_quick_profile()
    try:
        st = _store(readonly=True)
    except StoreError:
        st = None
    try:
        jobs = job_demands(spec, lambda w: st.solo_profile(fingerprint(w, spec.cuda, env))
                           if st is not None else None)
    finally:
        if st is not None:
            st.close()
    capacity, pools = box_capacity(profile)
    plan = plan_fit(jobs, capacity, pools)
    if as_json:
        print(json.dumps(plan_json(path, where, plan), indent=2))
        return 0
    print_plan(console(), f"{spec.name}: {plan.asked} jobs on {profile.get('host')} ({where})", plan)
    return 0


def launch_fit_warning(spec: SessionSpec, nvml: Nvml) -> str | None:
    """One line when the file asks for more jobs at once than fit on this box, from the stored
    machine profile and the cached solo baselines (None: they fit, or nothing is stored)."""
    from gputop_dl.collect.environment import environment
    from gputop_dl.collect.jobs.fingerprint import fingerprint
    from gputop_dl.record.paths import StoreError
    from gputop_dl.engine.box_profile import box_capacity
    from gputop_dl.sched.fit import job_demands, plan_fit

    if len(spec.workloads) < 2:
        return None
    try:
        st = _store(readonly=True)
    except StoreError:
        return None
    try:
        profile = st.latest_machine(socket.gethostname())
        if profile is None:
            return None
        env = environment(nvml)
        jobs = job_demands(spec, lambda w: st.solo_profile(fingerprint(w, spec.cuda, env)))
    finally:
        st.close()
    capacity, pools = box_capacity(profile)
    plan = plan_fit(jobs, capacity, pools)
    if plan.binding is None or plan.fit >= plan.asked:
        return None
    label = next(r.label for r in plan.resources if r.key == plan.binding)
    return (f"warning: {plan.asked} jobs at once, but {plan.fit} fit at solo speed on this box "
            f"(the {label} run out first; `gputop-dl plan {spec.path}`)")
