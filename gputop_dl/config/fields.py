"""The workload file's keys: one converter per key, (key, raw TOML value) -> checked value.

Each converter raises `tomlcheck.Bad` (the loader, `gputop_dl.config`, names the table and line);
`FIELDS` ([[workload]] and [defaults]) and `SESSION_FIELDS` ([session]) map every key to its
converter. The limits here bound what one file may ask of the machine.
This module runs in the monitor process: it must not import torch, torchvision or textual.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from gputop_dl.config.model_names import CLASSIFICATION_MODELS, is_classification_model
from gputop_dl.sched import POLICIES
from gputop_dl.tomlcheck import (MAX_STRING, Bad as _Bad, as_bool as _as_bool,
                                 as_float as _as_float, as_int as _as_int, as_name as _as_name, as_str as _as_str,
                                 as_title as _as_title, at_most as _at_most, check as _check,
                                 choice as _choice, did_you_mean as _did_you_mean, kind_of as _kind,
                                 list_of as _list_of, show as _show)
from gputop_dl.choices import BASELINES, DATASETS, OPTIMIZERS, TRANSFORM_PRESETS

# ---- converters: (key, raw TOML value) -> value for Workload/SessionSpec, or raise _Bad ----------

MAX_ENV = 128 << 10  # bytes of a workload's `env` in total (execve's limit is near 2 MiB)
MAX_WORKLOADS = 4096  # [[workload]] tables in one file: each is a process started at once
MAX_BATCH = 1 << 20  # samples in one batch of the built-in trainer (a sane bound)
MAX_ARGV = 128 << 10  # bytes of a command's arguments in total (as MAX_ENV)
MAX_PATH = 4096  # characters in a path (root, cwd): the kernel's PATH_MAX
MAX_GPUS = 64  # GPU indexes in one `gpus` list, and the largest index + 1
MAX_NODES = 4096  # nodes of one job across nodes
MAX_SECONDS = 366 * 86400  # any duration or arrival time: a year
PER_CORE = 4  # nproc, threads and num_workers: at most this many per usable core ...
MAX_PER_CORE = 64  # ... unless [session] oversubscribe says more, up to this
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20,
          "mb": 1 << 20, "mib": 1 << 20, "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30,
          "t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40}
MIN_MEMORY_LIMIT = 16 << 20


def host_memory() -> int | None:
    """The host's total memory in bytes (None where it cannot be read)."""
    try:
        import psutil

        return int(psutil.virtual_memory().total)
    except Exception:  # no /proc/meminfo: no check against it
        return None


def _as_memory(key: str, v: Any) -> int:
    """Bytes: an integer, a size like "512MiB" or "2G" (binary units), or "25%" of the host."""
    if isinstance(v, bool) or not isinstance(v, (int, str)):
        raise _Bad(f"{key} = {_show(v)} is {_kind(v)}", 'bytes, a size like "4GiB", or "25%"')
    if isinstance(v, int):
        n = v
    else:
        m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z%]*)\s*", v)
        unit = m.group(2).lower() if m else None
        if m and unit == "%":
            total = host_memory()
            if total is None:
                raise _Bad(f"{key} = {_show(v)}: the host's memory cannot be read", "a size like \"4GiB\"")
            n = int(total * float(m.group(1)) / 100)
        elif m and unit in _UNITS:
            n = int(float(m.group(1)) * _UNITS[unit])
        else:
            raise _Bad(f"{key} = {_show(v)}", 'bytes, a size like "4GiB" (B, KiB, MiB, GiB, TiB), '
                       'or a share of the host\'s memory like "25%"')
    total = host_memory()
    if n < MIN_MEMORY_LIMIT or (total is not None and n > total):
        most = f" and at most the host's {total / (1 << 30):.1f} GiB" if total else ""
        raise _Bad(f"{key} = {_show(v)} is {n} bytes", f"at least {MIN_MEMORY_LIMIT >> 20} MiB{most}")
    return n


def _as_endpoint(key: str, v: Any) -> str:
    """A rendezvous endpoint: `HOST:PORT` or `[IPv6]:PORT`, port 1 to 65535."""
    s = _as_str(key, v).strip()
    m = re.fullmatch(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(\d{1,5})", s)
    if not m or not 1 <= int(m[2]) <= 65535:
        raise _Bad(f"{key} = {_show(v)} is not HOST:PORT",
                   'HOST:PORT of the rendezvous, like "10.0.0.1:29400" (port 1 to 65535)')
    return s


def _as_model(key: str, v: Any) -> str:
    name = _as_str(key, v)
    if name != "synthetic" and not is_classification_model(name):
        raise _Bad(f"unknown model {_show(v)}", 'a torchvision classification model name or "synthetic"',
                   _did_you_mean(name.lower(), sorted(CLASSIFICATION_MODELS), n=3))
    return name


def _as_transforms(key: str, v: Any) -> str | tuple[str, ...]:
    expected = f"one of {', '.join(map(_show, TRANSFORM_PRESETS))} or a list like [\"Resize(256)\", \"ToTensor\"]"
    if isinstance(v, str):
        if v not in TRANSFORM_PRESETS:
            raise _Bad(f"{key} = {_show(v)} is not a preset", expected, _did_you_mean(v, TRANSFORM_PRESETS))
        return v
    specs = _list_of(key, v, _as_str, expected)
    for i, s in enumerate(specs):
        if not re.fullmatch(r"[A-Za-z_]\w*(\(.*\))?", s.strip()):
            raise _Bad(f"{key}[{i}] = {_show(s)} is not a transform spec",
                       'a name like "ToTensor" or a call like "RandomResizedCrop(224)"')
    return tuple(s.strip() for s in specs)


def _as_gpus(key: str, v: Any) -> tuple[int, ...]:
    if isinstance(v, list) and len(v) > MAX_GPUS:
        raise _Bad(f"{key} lists {len(v)} GPUs", f"at most {MAX_GPUS}")
    gpus = () if v == [] else _list_of(key, v, _as_int, "a list of GPU indexes like [0, 1]")  # [] = no GPU
    for g in gpus:
        if g < 0:
            raise _Bad(f"{key} = {_show(v)} has a negative index", "GPU indexes 0 or more")
        if g >= MAX_GPUS:
            raise _Bad(f"{key} = {_show(v)} has the index {g}", f"GPU indexes from 0 to {MAX_GPUS - 1}")
        if gpus.count(g) > 1:
            raise _Bad(f"{key} = {_show(v)} lists GPU {g} twice", "distinct GPU indexes")
    return gpus


def _as_command(key: str, v: Any) -> str | tuple[str, ...]:
    if isinstance(v, str):  # only valid with shell = true; checked after the merge
        return _as_str(key, v)
    argv = _list_of(key, v, lambda k, s: s if isinstance(s, str) and len(s) <= MAX_STRING
                    else _as_str(k, s),  # "" args are fine
                    'a non-empty list of strings like ["python", "train.py"]')
    _as_str(f"{key}[0]", argv[0])
    return argv


def _as_env(key: str, v: Any) -> dict[str, str]:
    if not isinstance(v, dict):
        raise _Bad(f"{key} = {_show(v)} is {_kind(v)}", 'a table of strings like {OMP_NUM_THREADS = "2"}')
    for name, val in v.items():
        if not isinstance(val, str):
            raise _Bad(f"{key}.{name} = {_show(val)} is {_kind(val)}", "a string (quote numbers)")
    return dict(v)


def _as_gpus_or_count(key: str, v: Any) -> tuple[int, ...] | int:
    """`gpus = [0, 1]` pins these GPU indexes; `gpus = 2` asks a queue for two (any)."""
    if isinstance(v, int) and not isinstance(v, bool):
        if v < 1:  # no GPU is gpus = []
            raise _Bad(f"{key} = {v} is an integer", "a list of GPU indexes like [0, 1] ([] for none), "
                       "or a GPU count of 1 or more")
        return v
    return _as_gpus(key, v)


_POS = _check(_as_int, lambda v: v > 0, "a positive integer")
_NONNEG = _check(_as_int, lambda v: v >= 0, "an integer 0 or more")
_MS = _check(_as_float, lambda v: v >= 0, "milliseconds 0 or more")


def _as_path(key: str, v: Any) -> str:
    path = _as_str(key, v)
    if len(path) > MAX_PATH:
        raise _Bad(f"{key} has {len(path)} characters", f"a path of at most {MAX_PATH}")
    return path


def _secs(ok: Callable[[float], bool], expected: str) -> Callable[[str, Any], float]:
    return _at_most(_check(_as_float, ok, expected), MAX_SECONDS, " seconds (a year)")

FIELDS: dict[str, Callable[[str, Any], Any]] = {
    "name": _as_name, "model": _as_model, "dataset": _choice(DATASETS), "root": _as_path,
    "dataset_size": _POS, "source_size": _POS, "input_size": _POS,  # >= 16 checked against the model
    "num_classes": _check(_as_int, lambda v: v >= 1, "at least 1 class"), "batch_size": _POS,
    "num_workers": _NONNEG, "transforms": _as_transforms, "epochs": _POS, "steps_per_epoch": _POS,
    "warmup_steps": _NONNEG, "optimizer": _choice(OPTIMIZERS),
    "lr": _check(_as_float, lambda v: v > 0, "a positive learning rate"), "gpus": _as_gpus_or_count,
    "nproc": _POS, "threads": _POS, "seed": _NONNEG,
    "nnodes": _at_most(_POS, MAX_NODES), "rdzv_endpoint": _as_endpoint, "rdzv_id": _as_name,
    "sample_cpu_ms": _MS, "sample_io_ms": _MS, "step_device_ms": _MS, "step_cpu_ms": _MS,
    "command": _as_command, "cwd": _as_path, "env": _as_env, "shell": _as_bool,
    "memory_limit": _as_memory,
    # a job of `gputop-dl queue`
    "arrival": _secs(lambda v: v >= 0, "seconds after the queue's start, 0 or more"),
    "priority": _as_int,
    "duration_s": _secs(lambda v: v > 0, "the expected solo run time in seconds, more than 0"),
    "gpu_count": _check(_as_int, lambda v: v >= 1, "a GPU count of 1 or more (the same as gpus = N)"),
}
SESSION_FIELDS: dict[str, Callable[[str, Any], Any]] = {
    "name": _as_title,
    "interval": _check(_as_float, lambda v: 0.1 <= v <= 60, "seconds between samples, from 0.1 to 60"),
    "baseline": _choice(BASELINES), "baseline_steps": _POS,
    "baseline_timeout_s": _secs(lambda v: v > 0, "seconds, more than 0"),
    "probe_s": _check(_as_float, lambda v: 0.5 <= v <= 60, "seconds alone per job, 0.5 to 60"),
    # `gputop-dl queue`
    "policy": _choice(POLICIES), "slots": _at_most(_POS, MAX_WORKLOADS), "cpu_aware": _as_bool,
    "ageing_s": _secs(lambda v: v > 0, "seconds of waiting worth one priority level, more than 0"),
    "oversubscribe": _check(_as_int, lambda v: 1 <= v <= MAX_PER_CORE,
                            f"nproc, threads and num_workers per usable core, 1 to {MAX_PER_CORE}"),
    "v": _check(_as_float, lambda v: v >= 0, "a number 0 or more"),
}
DEFAULT_FIELDS = {k: v for k, v in FIELDS.items() if k != "name"}  # [defaults]: all but the name
