"""Sweep output: the console table (Rich) and the Markdown report (GitHub tables)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rich.table import Table
from rich.text import Text

from gputop_dl.lab.sweep_worker_protocol import SweepRow
from gputop_dl.text.markdown import md_cell, table
from gputop_dl.text.fmt import DASH, secs, size

if TYPE_CHECKING:
    from gputop_dl.lab.sweep import SweepResult

MEM_LABEL = {"cuda-allocated": "peak mem (CUDA allocated)", "host-rss-delta": "peak RSS − start"}


def _signed_pct(x: float | None) -> str:
    if x is None:
        return DASH
    v = round(x * 100)
    return "0 %" if v == 0 else f"{'+' if v > 0 else '−'}{abs(v)} %"


def _status(r: SweepRow) -> str:
    return {"ok": "ok", "oom": "out of memory", "skipped": "skipped"}.get(r["status"], "error")


def mem_label(rows: list[SweepRow]) -> str:
    kinds = {str(r["mem_kind"]) for r in rows if r.get("status") == "ok" and r.get("mem_kind") is not None}
    return MEM_LABEL.get(kinds.pop(), "peak mem") if len(kinds) == 1 else "peak mem"


def row_cells(r: SweepRow, res: SweepResult) -> list[str]:
    knee = res.knee is not None and res.knee.batch == r["batch"]
    ok = r["status"] == "ok"
    fit = f"{res.fit.predict(r['batch']) * 1000:.1f} ms" if res.fit and ok else DASH
    note = "knee" if knee else ""
    if r.get("nvml_mem"):
        note = (note + "; " if note else "") + f"NVML {size(r['nvml_mem'])}"
    if r.get("message"):
        note = (note + "; " if note else "") + r["message"]
    return [str(r["batch"]), _status(r),
            size(r.get("peak_mem")) if ok or r.get("peak_mem") else DASH,
            _signed_pct(r.get("mem_growth")),
            f"{r['step_s'] * 1000:.1f} ms" if ok else DASH,
            f"{r['step_cpu_s'] * 1000:.1f} ms" if ok and r.get("step_cpu_s") is not None else DASH,
            fit,
            f"{r['samples_per_s']:.1f}" if ok else DASH,
            secs(r.get("epoch_s")), _signed_pct(r.get("time_change")), note]


def header(res: SweepResult) -> list[str]:
    return ["batch", "status", mem_label(res.rows), "mem growth", "step (median)", "CPU/step",
            "fit step",
            "samples/s", f"epoch ({res.spec.dataset_size})", "time change", "note"]


def fit_line(res: SweepResult) -> str:
    f = res.fit
    if f is None:
        return "fit: needs two batch sizes that ran"
    r2 = DASH if f.r2 is None else f"{f.r2:.4f}"
    return (f"fit: t_step = α + β·batch, α = {f.alpha * 1000:.2f} ms/step, β = {f.beta * 1000:.3f} "
            f"ms/sample (R² {r2}, max error {f.max_rel_err * 100:.1f} % over {f.n} rows)")


def knee_line(res: SweepResult) -> str:
    k = res.knee
    if k is None:
        ran = [r["batch"] for r in res.rows if r["status"] == "ok"]
        return ("knee: none in the swept range: every step up cut the time per sample by more "
                "than it grew memory" if len(ran) >= 2 else "knee: needs two batch sizes that ran")
    mem = (f"grows memory by {k.mem_growth * 100:.0f} %" if k.mem_growth >= 0
           else f"shrinks memory by {-k.mem_growth * 100:.0f} %")
    if k.time_fall > 0:
        t = f"the time per sample falls only {k.time_fall * 100:.0f} %"
    elif k.time_fall < 0:
        t = f"the time per sample rises {-k.time_fall * 100:.0f} %"
    else:
        t = "the time per sample does not change"
    return f"knee: batch {k.batch}: going to {k.next_batch} {mem} while {t}"


def rich_table(res: SweepResult) -> Table:
    spec = res.spec
    t = Table(title=f"sweep · {spec.model} · {spec.input_size}×{spec.input_size} · {spec.device}",
              title_justify="left")
    for i, h in enumerate(header(res)):
        t.add_column(h, justify="right" if i not in (1, 10) else "left",
                     overflow="fold" if i == 10 else "ellipsis")
    for r in res.rows:
        t.add_row(*(Text(c) for c in row_cells(r, res)))  # no Rich markup in messages
    return t


def markdown(res: SweepResult, command: str,
             environment: Mapping[str, Any] | None = None) -> str:
    spec, env = res.spec, environment or {}
    dev = spec.device if spec.device == "cuda" else "cpu"
    devices = sorted({r["device"] for r in res.rows if r.get("device")})
    lines = [f"# gputop-dl sweep: {spec.model}", "",
             f"- **Model:** {spec.model}, {spec.input_size}×{spec.input_size}, random tensors "
             "(no input pipeline), SGD momentum 0.9",
             f"- **Device:** {', '.join(devices) or dev}"
             + (f" ({spec.device_note})" if spec.device_note else ""),
             f"- **Steps:** {spec.warmup} warm-up + {spec.steps} timed per batch size, "
             "each batch size in its own process"
             + (f", {spec.threads} torch thread(s)" if spec.threads else ""),
             f"- **Epoch projection:** {spec.dataset_size} samples",
             f"- **Date:** {time.strftime('%Y-%m-%d %H:%M:%S %z', time.localtime(res.started))}"
             f", {res.ended - res.started:.0f} s",
             ]
    if env:
        lines.append(f"- **Machine:** {env.get('cpu_model') or '?'}, {env.get('cpus')} CPUs"
                     + (f", GPUs: {', '.join(env['gpus'])}" if env.get("gpus") else "")
                     + f"; torch {env.get('torch')}, torchvision {env.get('torchvision')}"
                     + (f"; load average {res.load[0]:.1f} at start, {res.load[1]:.1f} at end "
                        "(other processes share these CPUs)" if res.load else ""))
    if res.session_id:
        lines.append(f"- **Session:** {res.session_id}")
    lines += ["", "```sh", command, "```", "", "## Results", "",
              table([md_cell(h) for h in header(res)],
                    [[md_cell(c) for c in row_cells(r, res)] for r in res.rows], "rlrrrrrrrrl"), "",
              "Memory and time changes are against the row above (when both ran). The epoch time "
              "is step time × samples / batch, so its change is the change of the time per sample. "
              "Step = median wall time of the timed steps; CPU/step = the worker's median CPU "
              "time per step (well below step × threads when other processes share the CPU).",
              "", "## Step-time fit", "",
              fit_line(res)[len("fit: "):] if res.fit else fit_line(res),
              "", "## Knee", "", knee_line(res)[len("knee: "):] + ".", "",
              "Rule: a bigger batch pays only while the time per sample falls "
              "faster than memory grows; the knee is the first batch where the next one breaks "
              "that.", ""]
    if any(r["status"] in ("oom", "skipped") for r in res.rows):
        lines += ["Batch sizes are run smallest first; after the first out-of-memory batch the "
                  "larger ones are skipped (`--keep-going` runs them anyway).", ""]
    if any(r.get("mem_kind") == "host-rss-delta" for r in res.rows):
        start = [r["start_rss"] for r in res.rows if r.get("start_rss")]
        lines += ["On the CPU, memory is the worker's peak RSS minus its RSS before the model was "
                  "built (Python and the torch libraries"
                  + (f", {size(start[0])} here" if start else "")
                  + "), the counterpart of the CUDA allocator's peak on a GPU.", ""]
    elif any(r.get("mem_kind") == "cuda-allocated" for r in res.rows):
        lines += ["On a GPU, memory is `torch.cuda.max_memory_allocated` (tensors only); "
                  "`nvidia-smi` shows more: the CUDA context and the allocator's cache.", ""]
    return "\n".join(lines)
