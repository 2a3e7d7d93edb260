"""`gputop-dl profile`: a torch.profiler window after warm-up; top-10 operators; a Chrome trace.

The model trains on random tensors (as in the sweep worker) for `warmup` steps outside the
profiler, then `steps` steps inside it. Operators are ranked by self CPU time (and by self CUDA
time on a GPU); the trace (`trace.json`) opens in https://ui.perfetto.dev or chrome://tracing.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch
from torch.profiler import ProfilerActivity, profile, record_function

from gputop_dl.text.fmt import num
from gputop_dl.text.markdown import md_cell, table, write_atomic
from gputop_dl.lab.sweep_worker import Sweeper

if TYPE_CHECKING:
    from rich.table import Table

TOP = 10
_KINETO_LOG = re.compile(r"^(STAGE|USDT|INFO|WARNING|ERROR):\d{4}-\d\d-\d\d .*\.cpp:\d+\] ")


@contextlib.contextmanager
def quiet_kineto() -> Iterator[None]:
    """Drop the profiler library's own log lines (written by C++ straight to fd 2, e.g.
    "ERROR: gpuGetDeviceCount failed" on a CPU-only machine); other stderr output is kept."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            keep = [ln for ln in tmp.read().decode(errors="replace").splitlines(keepends=True)
                    if not _KINETO_LOG.match(ln)]
            if keep:
                sys.stderr.write("".join(keep))


@dataclass
class OpRow:
    name: str
    calls: int
    self_cpu_us: float
    cpu_total_us: float
    self_dev_us: float


@dataclass
class ProfileResult:
    model: str
    batch: int
    input_size: int
    device: str
    steps: int
    warmup: int
    step_s: list[float]
    ops: list[OpRow]
    trace_path: str
    md_path: str | None = None
    started: float = field(default_factory=time.time)

    def total(self, attr: str) -> float:
        return float(sum(getattr(o, attr) for o in self.ops))

    def top(self, attr: str, n: int = TOP) -> list[OpRow]:
        ops = [o for o in self.ops if getattr(o, attr) > 0]
        return sorted(ops, key=lambda o: -getattr(o, attr))[:n]


def run_profile(model: str, batch: int, steps: int, warmup: int, input_size: int, out_dir: str,
                device: str = "cuda", gpu: int = 0) -> ProfileResult:
    a = argparse.Namespace(model=model, batch=batch, steps=steps, warmup=warmup,
                           input_size=input_size, num_classes=1000, device=device, gpu=gpu)
    sw = Sweeper(a)
    for _ in range(warmup):
        sw.step()
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if sw.device.type == "cuda" else [])
    times = []
    os.makedirs(out_dir, exist_ok=True)
    trace = os.path.join(out_dir, "trace.json")
    with quiet_kineto():
        with profile(activities=acts) as prof:
            for _ in range(steps):
                with record_function("train_step"):
                    times.append(sw.step())
        tmp = trace + ".tmp"
        prof.export_chrome_trace(tmp)
        os.replace(tmp, trace)
        ops = [OpRow(e.key, int(e.count), float(e.self_cpu_time_total), float(e.cpu_time_total),
                     float(getattr(e, "self_device_time_total", 0.0) or 0.0))
               for e in prof.key_averages() if e.key != "train_step"]
    return ProfileResult(model, batch, input_size, str(sw.device), steps, warmup, times, ops, trace)


def _ms(us: float) -> str:
    return num(us / 1000, ".2f", " ms")


def _rows(res: ProfileResult, attr: str) -> tuple[list[str], list[list[str]]]:
    total = res.total(attr) or 1.0
    if attr == "self_cpu_us":
        head = ["operator", "calls", "self CPU", "self CPU %", "CPU total"]
        rows = [[o.name, str(o.calls), _ms(o.self_cpu_us), f"{o.self_cpu_us / total * 100:.1f} %",
                 _ms(o.cpu_total_us)] for o in res.top(attr)]
    else:
        head = ["operator", "calls", "self CUDA", "self CUDA %"]
        rows = [[o.name, str(o.calls), _ms(o.self_dev_us), f"{o.self_dev_us / total * 100:.1f} %"]
                for o in res.top(attr)]
    return head, rows


def tables(res: ProfileResult) -> list[tuple[str, list[str], list[list[str]]]]:
    out = [("Top 10 operators by self CPU time", *_rows(res, "self_cpu_us"))]
    if res.device.startswith("cuda") and res.total("self_dev_us") > 0:
        out.append(("Top 10 operators by self CUDA time", *_rows(res, "self_dev_us")))
    return out


def rich_tables(res: ProfileResult) -> Iterator[Table]:
    from rich.table import Table
    from rich.text import Text

    for title, head, rows in tables(res):
        t = Table(title=f"{title} · {res.model} bs{res.batch} · {res.device} · {res.steps} steps",
                  title_justify="left")
        for i, h in enumerate(head):
            t.add_column(h, justify="left" if i == 0 else "right")
        for r in rows:
            t.add_row(*(Text(c) for c in r))  # names such as "[memory]" are not Rich markup
        yield t


def markdown(res: ProfileResult, command: str) -> str:
    med = sorted(res.step_s)[len(res.step_s) // 2] if res.step_s else None
    lines = [f"# gputop-dl profile: {res.model}", "",
             f"- **Model:** {res.model}, batch {res.batch}, {res.input_size}×{res.input_size}, "
             "random tensors, SGD momentum 0.9",
             f"- **Device:** {res.device}; torch {torch.__version__}",
             f"- **Window:** {res.steps} profiled steps after {res.warmup} warm-up steps"
             + (f"; median step {med * 1000:.1f} ms (under the profiler)" if med else ""),
             f"- **Date:** {time.strftime('%Y-%m-%d %H:%M:%S %z', time.localtime(res.started))}",
             f"- **Trace:** `{os.path.basename(res.trace_path)}` (open in https://ui.perfetto.dev)",
             "", "```sh", command, "```", ""]
    for title, head, rows in tables(res):
        lines += [f"## {title}", "", table([md_cell(h) for h in head], [[md_cell(c) for c in r] for r in rows],
                                        "l" + "r" * (len(head) - 1)), ""]
    lines.append("Self time is the time in the operator itself, without the operators it calls; "
                 "percentages are of the window's total self time.")
    return "\n".join(lines) + "\n"


def write_markdown(res: ProfileResult, out_dir: str, command: str) -> str:
    res.md_path = write_atomic(os.path.join(out_dir, "profile.md"), markdown(res, command))
    return res.md_path
