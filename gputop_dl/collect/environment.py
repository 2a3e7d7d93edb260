"""Environment facts for reports (CPU model, GPUs, driver, OS, Python, torch) without importing torch."""

from __future__ import annotations

import platform
from typing import TYPE_CHECKING, TypedDict

import psutil

from gputop_dl.collect.proc.host import allowed_cpus

if TYPE_CHECKING:
    from gputop_dl.collect.nvml.gpus import Nvml


class Environment(TypedDict):
    """The machine and software a session ran on (the session export's `environment`)."""

    cpu_model: str | None
    cpus: int
    cpus_logical: int | None
    mem_total: int
    gpus: list[str]
    gpu_status: str
    gpu_status_detail: str
    driver: str | None
    cuda: str | None
    os: str
    python: str
    torch: str | None
    torchvision: str | None
    gputop_dl: str | None


def cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def package_version(name: str) -> str | None:
    from importlib import metadata  # here: ~10 ms of imports, not on the monitor's start-up

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def environment(nvml: Nvml) -> Environment:
    """The lab-report environment table, as a dict (the session export's `environment`: docs/contracts.md)."""
    return {
        "cpu_model": cpu_model(),
        "cpus": allowed_cpus(),
        "cpus_logical": psutil.cpu_count(logical=True),
        "mem_total": psutil.virtual_memory().total,
        "gpus": nvml.names(),
        "gpu_status": nvml.status,
        "gpu_status_detail": nvml.status_detail,
        "driver": nvml.driver_version,
        "cuda": nvml.cuda_driver_version,
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "torch": package_version("torch"),
        "torchvision": package_version("torchvision"),
        "gputop_dl": package_version("gputop-dl"),
    }
