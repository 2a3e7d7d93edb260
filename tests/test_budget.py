"""The pre-launch budget check and `plan`'s per-GPU capacities: cores, memory,
disk and each GPU's own memory and link, sched/budget.py and sched/fit.py on fixed figures, and
LaunchPlan's check over a stored profile and cached solo profiles."""

from __future__ import annotations

import socket

from gputop_dl.config import load_session
from gputop_dl.engine.launch_plan import LaunchPlan
from gputop_dl.record.store import Store
from gputop_dl.sched.budget import budget_lines
from gputop_dl.sched.fit import JobDemand, capacities, gpu_pools, plan_fit

GB = float(1 << 30)
CAP = {"cores": (2.0, "usable CPUs"), "memory": (8 * GB, "available now"),
       "disk_read": (180e6, "measured, /data")}
PROFILE = {"cpus": {"usable_cpus": 16.0}, "memory": {"available": 200 * GB},
           "storage": [{"paths": ["/d"], "seq_bps": 5e8, "page_cache_bypassed": True}],
           "gpus": [{"index": 0, "mem_total": 40 * GB, "link_peak_bps": 31.5e9,
                     "copies": [{"from": "near", "h2d_pinned_bps": 24e9}]},
                    {"index": 1, "mem_total": 40 * GB, "link_peak_bps": 31.5e9, "copies": []}]}


def gjob(name: str, gpus: tuple[int, ...], mem: float = 30 * GB) -> JobDemand:
    return JobDemand(name, {"cores": 1.0, "gpu_memory": mem}, "measured: cached solo baseline", gpus)


def test_a_gpus_memory_is_its_own_not_a_pool_summed_over_gpus():
    cap, pools = capacities(PROFILE), gpu_pools(PROFILE)
    assert pools == {"pcie": {0: 24e9, 1: 31.5e9}, "gpu_memory": {0: 40 * GB, 1: 40 * GB}}
    assert cap["gpu_memory"] == (40 * GB, "per GPU")
    same = plan_fit([gjob("a", (0,)), gjob("b", (0,))], cap, pools)  # 60 GB on one 40 GB GPU
    assert (same.fit, same.binding) == (1, "gpu_memory")
    assert next(r for r in same.resources if r.key == "gpu_memory").fit == 1
    apart = plan_fit([gjob("a", (0,)), gjob("b", (1,))], cap, pools)
    assert (apart.fit, apart.binding) == (2, None)
    # not placed yet: each goes to the GPU with the most room
    free = plan_fit([gjob("a", ()), gjob("b", ())], cap, pools)
    assert (free.fit, free.binding) == (2, None)
    # a job on two GPUs needs half its memory on each
    both = plan_fit([gjob("a", (0, 1), 60 * GB), gjob("b", (1,), 15 * GB)], cap, pools)
    assert (both.fit, both.binding) == (1, "gpu_memory")


def test_budget_lines_name_cores_memory_and_the_disk_each_over():
    jobs = [JobDemand(n, {"cores": 1.6, "memory": 5 * GB, "disk_read": 120e6},
                      "measured: cached solo baseline") for n in "ab"]
    lines = budget_lines(jobs, CAP, disk_when="measured 2026-11-26 13:40 UTC")
    assert lines[0] == ("cached solo baselines say these jobs need ≈ 3.2 cores at full speed; "
                        "this machine allows 2: expect a CPU-bound co-run")
    assert "peak at ≈ 10.0 GiB resident memory together; 8.0 GiB is available now" in lines[1]
    assert ("read ≈ 240.0 MB/s from storage together; the disk reads 180.0 MB/s at most "
            "(measured, /data, measured 2026-11-26 13:40 UTC)") in lines[2]
    assert len(lines) == 3
    # within the box: nothing; one job: nothing; estimates from the file: no expectation
    small = [JobDemand(n, {"cores": 0.9, "memory": 1 * GB, "disk_read": 50e6}, "measured") for n in "ab"]
    assert budget_lines(small, CAP) == [] and budget_lines(jobs[:1], CAP) == []
    est = [JobDemand(n, {"cores": 5.0, "memory": 9 * GB}, "estimate from the file") for n in "ab"]
    assert budget_lines(est, CAP) == []


def test_budget_lines_check_each_gpu_alone():
    cap, pools = capacities(PROFILE), gpu_pools(PROFILE)
    lines = budget_lines([gjob("a", (0,)), gjob("b", (0,)), gjob("c", (1,))], cap, pools)
    assert lines == ["GPU 0: a and b peaked at ≈ 60.0 GiB of GPU memory together when alone; "
                     "it has 40.0 GiB: expect an out-of-memory error"]
    assert budget_lines([gjob("a", (0,)), gjob("b", (1,))], cap, pools) == []


class _Rec:
    def __init__(self, solos: dict[str, dict]):
        self.solos, self.store_path = solos, None

    def cached_solo_profile(self, fp: str) -> dict | None:
        return self.solos.get(fp)


class _Engine:
    def __init__(self, rec: _Rec):
        self.recorder, self.env, self.said = rec, {"cpus": 2}, []

    def say(self, line: str) -> None:
        self.said.append(line)


def test_launch_prelaunch_check_adds_memory_and_disk_from_the_stored_profile(tmp_path, monkeypatch):
    from gputop_dl.collect.jobs.fingerprint import fingerprint
    from gputop_dl.engine import box_profile

    f = tmp_path / "pair.toml"
    f.write_text("[defaults]\nmodel = 'synthetic'\nthreads = 1\nnum_workers = 0\n"
                 "[[workload]]\nname = 'a'\n[[workload]]\nname = 'b'\n")
    spec = load_session(str(f), gpu_count=0)
    solo = {"cpu_cores": 0.9, "rss_peak": 6 * GB, "io_read": 150e6, "gpu_mem_peak": None}
    eng = _Engine(_Rec({fingerprint(w, False, {"cpus": 2}): solo for w in spec.workloads}))
    monkeypatch.setattr("gputop_dl.collect.boxprofile.memory.meminfo",
                        lambda proc="/proc": {"MemAvailable": int(10 * GB)})
    LaunchPlan(spec, "test")._prelaunch_check(eng)  # no profile: memory now, no disk peak
    assert len(eng.said) == 1 and "12.0 GiB resident memory together; 10.0 GiB is available now" in eng.said[0]
    st = Store()
    st.save_machine({"schema": "gputop-dl.machine/1", "created": 1.8e9, "host": socket.gethostname(),
                     "quick": False, "cpus": {"usable_cpus": 1.5}, "memory": {"available": 1},
                     "storage": [{"paths": ["/data"], "seq_bps": 200e6, "page_cache_bypassed": True}],
                     "gpus": []})
    st.close()
    assert box_profile.load_profile() is not None
    eng.said.clear()
    LaunchPlan(spec, "test")._prelaunch_check(eng)
    assert eng.said[0].startswith("warning: cached solo baselines say these jobs need ≈ 1.8 cores")
    assert "this machine allows 1.5" in eng.said[0]  # the profile's usable cores (quota)
    assert "10.0 GiB is available now" in eng.said[1]  # now, not when profiled
    assert "read ≈ 300.0 MB/s from storage together; the disk reads 200.0 MB/s at most" in eng.said[2]
    assert "measured 2027-01-15" in eng.said[2]


def test_a_job_on_a_gpu_the_profile_does_not_know_never_binds():
    cap, pools = capacities(PROFILE), gpu_pools(PROFILE)
    p = plan_fit([gjob("a", (5,), 90 * GB), gjob("b", (0,))], cap, pools)
    assert (p.fit, p.binding) == (2, None)
