"""Sample values shared by the exporter and fleet tests: four fake GPUs, a launched and a found job."""

from __future__ import annotations

from gputop_dl.collect.nvml.gpus import Nvml
from gputop_dl.snapshot import JobSample
from tests.fakes.nvml import GiB, FakePynvml


def four_gpus() -> tuple:
    fake = FakePynvml(gpus=4)
    fake.gpus[1].util, fake.gpus[1].temp_c, fake.gpus[1].mem_used = 97, 71, 30 * GiB
    fake.gpus[2].clock_reasons = 0x4 | 0x40  # sw power cap + hw thermal slowdown
    fake.gpus[3].unsupported.add("power")
    return Nvml(module=fake).sample()


LAUNCHED = JobSample(name="bs32", pid=4242, launched=True, status="running", device="gpu1",
                     model="resnet18", cpu_cores=2.5, rss=3 * GiB, stall_fraction=0.31,
                     stall_source="trainer", step_time_s=0.125, samples_per_s=256.0, epoch=2,
                     epochs=5, step=17, gpu_mem=9 * GiB, slowdown=1.4, phase="co-run")
FOUND = JobSample(name="train.py", pid=777, launched=False, cpu_cores=0.9, rss=GiB,
                  gpu_mem=2 * GiB, command="python train.py")
VERDICT = {"kind": "cpu-bound", "title": "concurrent: CPU-bound", "confidence": 0.8}
