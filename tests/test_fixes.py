"""Each recommendation names the jobs it is for and is given only where its cause is present:
no loader fix for jobs without DataLoader workers (nanoGPT's train.py has none), no GPU advice
on a box without GPUs, no num_workers advice for a job with none. Asserted on the fixes' kinds
and jobs, the verdict JSON's `fixes`."""

from dataclasses import replace

from gputop_dl.analyse.live.passive import PassiveJudge
from gputop_dl.analyse.verdict import judge
from gputop_dl.analyse.verdict_evidence import HostEvidence, JobEvidence
from gputop_dl.analyse.verdict_types import FIX_KINDS
from gputop_dl.schemas import load as load_schema
from gputop_dl.snapshot import GpuProcess, GpuSample, HostSample, JobSample, ProcSample

TWO = HostSample(cpus=2, cpu_busy=1.0, cpu_pressure_some10=0.9)
CALM = HostSample(cpus=2, cpu_busy=0.2, cpu_pressure_some10=0.0, load1=0.3)
POOL = ((0.5, 1.0), (0.5, 0.98))


def found(name, pid, workers=False, **kw):
    """A found job waiting half its runnable time for a CPU; with loader workers or without
    (one process, like nanoGPT's train.py)."""
    extra = dict(cpu_wait_workers=0.6, cpu_cores_workers=0.3,
                 procs=(ProcSample(pid, 1, 0, "main", 0.5, None, "R"),
                        ProcSample(pid + 1, pid, 1, "worker", 0.3, None, "R"))) if workers else {}
    return JobSample(name=name, pid=pid, launched=False, pids=(pid, pid + 1) if workers else (pid,),
                     **{"cpu_cores": 0.6, "cpu_wait_fraction": 0.6, **extra, **kw})


def live(jobs, host=TWO, **kw):
    judge_ = PassiveJudge()
    v = None
    for t in range(3):
        v, _ = judge_.verdict(jobs, host, t=float(t), **kw)
    assert v is not None
    return v


def kinds(v):
    return {f.kind: f.jobs for f in v.fixes}


def test_no_loader_fix_for_jobs_without_dataloader_workers():
    v = live([found("train.py", 10), found("train.py (20)", 20)])  # two nanoGPT-like jobs
    assert v.kind == "cpu-bound"
    assert "loader" not in kinds(v)
    assert kinds(v)["cores"] == ("train.py", "train.py (20)")
    # one of them with DataLoader workers: the loader fix is for it alone
    v = live([found("train.py", 10), found("loader.py", 20, workers=True)])
    assert v.kind == "cpu-bound"
    assert kinds(v)["loader"] == ("loader.py",)


def test_every_fix_text_is_a_recommendation_and_the_json_carries_them():
    v = live([found("a.py", 10, workers=True), found("b.py", 20, workers=True)])
    assert [f.text for f in v.fixes] == list(v.recommendations)
    data = v.to_json()
    assert [f["kind"] for f in data["fixes"]] == [f.kind for f in v.fixes]
    assert all(f["jobs"] for f in data["fixes"])
    enum = load_schema("verdict")["properties"]["fixes"]["items"]["properties"]["kind"]["enum"]
    assert enum == list(FIX_KINDS)


def test_spinning_pool_fix_only_for_the_jobs_whose_pools_spin():
    fits = ((0.35, 1.0), (0.0, 1.0))  # waits little: not wider than its cores
    spin = dict(cpu_pool=fits, cpu_pool_slice_ms=3.1, cpu_pool_yields=0.03, cpu_wait_fraction=0.3)
    sleeps = dict(cpu_pool_slice_ms=0.9, cpu_pool_yields=0.5)
    v = live([found("a", 10, **spin), found("b", 20, **spin)])
    assert kinds(v)["spinning-pools"] == ("a", "b") and "pool-width" not in kinds(v)
    v = live([found("a", 10, **spin), found("b", 20, **{**spin, **sleeps})])
    assert kinds(v)["spinning-pools"] == ("a",)
    v = live([found("a", 10, **{**spin, **sleeps}), found("b", 20, **{**spin, **sleeps})])
    assert v.kind == "cpu-bound" and "spinning-pools" not in kinds(v)


def test_pool_width_fix_only_for_the_jobs_whose_pools_are_wider_than_their_cores():
    wide = dict(cpu_pool=POOL, cpu_pool_slice_ms=1.6, cpu_pool_yields=0.36)
    v = live([found("a", 10, **wide), found("b", 20)])
    assert kinds(v)["pool-width"] == ("a",) and "spinning-pools" not in kinds(v)
    v = live([found("a", 10), found("b", 20)])
    assert v.kind == "cpu-bound" and "pool-width" not in kinds(v)


def test_no_gpu_placement_on_a_box_without_gpus_and_named_where_they_share_one():
    v = live([found("a", 10, workers=True), found("b", 20, workers=True)])
    assert "gpu-placement" not in kinds(v) and "use-gpus" not in kinds(v)
    gp = (GpuProcess(gpu_index=0, pid=10, sm_util=0.5), GpuProcess(gpu_index=0, pid=20, sm_util=0.48))
    jobs = [replace(found("a", 10), cpu_wait_fraction=0.01, cpu_cores=0.3),
            replace(found("b", 20), cpu_wait_fraction=0.02, cpu_cores=0.3)]
    v = live(jobs, host=CALM, gprocs=gp, gpus=(GpuSample(index=0, util=0.99),))
    assert v.kind == "gpu-contended"
    assert kinds(v) == {"gpu-placement": ("a", "b")}


def launched(name, workers=2, device="cpu", gpus=(), transforms="heavy", slow=2.0):
    return JobEvidence(name=name, device=device, gpus=gpus, steps=40, step_time_s=0.1 * slow,
                       stall=0.05, cpu_cores=0.7, solo_step_time_s=0.1, solo_stall=0.05,
                       solo_cpu_cores=1.1, num_workers=workers, transforms=transforms)


CPU_BOX = HostEvidence(cpus=2, busy=0.99, psi_some10=0.5, load1=2.3)
GPU_BOX = replace(CPU_BOX, gpu_util={0: 0.1})


def test_launch_num_workers_fix_names_only_jobs_with_workers_and_needs_some():
    trio = [launched("bs32"), launched("bs64", workers=0), launched("bs128")]
    v = judge(trio, CPU_BOX)
    assert v.kind == "cpu-bound"
    assert kinds(v)["num-workers"] == ("bs32", "bs128")
    v = judge([launched(n, workers=0) for n in ("a", "b", "c")], CPU_BOX)
    assert v.kind == "cpu-bound" and "num-workers" not in kinds(v)


def test_launch_use_gpus_only_on_a_box_with_gpus():
    trio = [launched(n) for n in ("bs32", "bs64", "bs128")]
    assert "use-gpus" not in kinds(judge(trio, CPU_BOX))
    assert kinds(judge(trio, GPU_BOX))["use-gpus"] == ("bs32", "bs64", "bs128")


def test_launch_augmentation_fix_only_for_heavy_transforms_off_the_cpu():
    box = HostEvidence(cpus=16, busy=0.97, psi_some10=0.4, load1=30.0)
    jobs = [launched("a", device="cuda:0", gpus=(0,)),
            launched("b", device="cuda:1", gpus=(1,), transforms="light")]
    jobs = [replace(j, solo_cpu_cores=9.0) for j in jobs]
    v = judge(jobs, box)
    assert v.kind == "cpu-bound"
    assert kinds(v)["augmentation"] == ("a",)
    v = judge([replace(j, transforms="light") for j in jobs], box)
    assert v.kind == "cpu-bound" and "augmentation" not in kinds(v)


def test_launch_gpu_contended_watch_loaders_only_for_jobs_whose_data_wait_rose():
    pair = [replace(launched("a", device="cuda:0", gpus=(0,), slow=1.4), stall=0.02,
                    solo_stall=0.03),
            replace(launched("b", device="cuda:0", gpus=(0,), slow=1.4), stall=0.02,
                    solo_stall=0.03)]
    calm = HostEvidence(cpus=16, busy=0.3, psi_some10=0.0, load1=4.0)
    v = judge(pair, calm)
    assert v.kind == "gpu-contended"
    assert kinds(v) == {"gpu-placement": ("a", "b")}
    v = judge([replace(pair[0], stall=0.5), pair[1]], calm)  # a's data-wait rose: a suspect
    assert v.kind == "gpu-contended"
    assert kinds(v) == {"gpu-placement": ("a", "b"), "watch-loaders": ("a",)}


def test_io_bound_worker_fix_only_for_readers_with_loader_workers():
    from tests.test_diskio import MB, PRESSED, reader_job

    def pair(workers_b: bool):
        wb = dict(cpu_wait_workers=0.1, cpu_cores_workers=0.01) if workers_b else {}
        return [reader_job("a", 1, 2.1 * MB, stall_fraction=0.97),
                reader_job("b", 3, 2.0 * MB, stall_fraction=0.97, **wb)]

    v = live(pair(False), host=PRESSED)
    assert v.kind == "io-bound"
    assert "num-workers" not in kinds(v)  # readers without workers (disk_reader.py --workers 0)
    assert kinds(v)["stagger-reads"] == ("a", "b")
    v = live(pair(True), host=PRESSED)
    assert v.kind == "io-bound" and kinds(v)["num-workers"] == ("b",)
