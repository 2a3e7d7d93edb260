"""Load a workload file (TOML) into a validated SessionSpec; every mistake is a one-line ConfigError.

Each key's own check is in `config.fields`; this module merges the tables and checks what needs
more than one key, or the machine. Merge order per workload: `Workload` defaults < [defaults] <
[[workload]] < (no CUDA only) [defaults.cpu_fallback] < [workload.cpu_fallback]. `env` tables
are merged key by key; every other key is replaced. Relative `root`/`cwd` are resolved against
the workload file's directory. This module runs in the monitor process: it must not import torch, torchvision or textual.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from gputop_dl.collect.extras import torchrun_for
from gputop_dl.config.fields import (DEFAULT_FIELDS, FIELDS, MAX_ARGV, MAX_BATCH, MAX_ENV,
                                     MAX_PER_CORE, MAX_WORKLOADS, PER_CORE, SESSION_FIELDS, host_memory)
from gputop_dl.tomlcheck import MAX_NAME, ConfigError, read_toml  # noqa: F401 (re-exported)
from gputop_dl.tomlcheck import (Bad as _Bad, Lines as _Lines, as_name as _as_name,
                                 did_you_mean as _did_you_mean, kind_of as _kind, show as _show)
from gputop_dl.workload import SessionSpec, Workload

__all__ = ["ConfigError", "load_session"]

# a table of the file: ("session",), ("defaults", "cpu_fallback"), ("workload", index) or
# ("workload", index, "cpu_fallback")
TableId = tuple[str | int, ...]
# a converter: (key, raw TOML value) -> the checked value, or tomlcheck.Bad
Converter = Callable[[str, Any], Any]


def _runnable(program: str, cwd: str | None, path: str | None) -> bool:
    """Whether exec would find `program`: a path to an executable file, or a name on PATH."""
    if os.sep in program:
        full = os.path.join(cwd or os.getcwd(), os.path.expanduser(program))
        return os.path.isfile(full) and os.access(full, os.X_OK)
    return shutil.which(program, path=path) is not None


def default_rdzv_id(name: str, text: str) -> str:
    """The run id of a job across nodes without `rdzv_id`: its name and the first 10 hex digits
    of the SHA-256 of the workload file's text, so that the same file launched on every node
    gives the same id (and an edited file another one)."""
    return f"{name}-{hashlib.sha256(text.encode()).hexdigest()[:10]}"


_TOP = ("session", "defaults", "workload")


class _Loader:
    def __init__(self, path: str, text: str, gpu_count: int):
        self.path, self.gpu_count = path, gpu_count
        self.per_core, self.per_core_set = PER_CORE, False  # [session] oversubscribe
        self.slots, self.slots_set = gpu_count or usable_cpus(), False  # what a queue may hand out
        self.lines = _Lines(text)
        self.text = text
        self.base = Path(path).absolute().parent
        self.names: dict[int, str] = {}

    def label(self, tid: TableId) -> str:
        if tid[0] != "workload":
            return "[" + ".".join(map(str, tid)) + "]"
        i = tid[1]
        name = self.names.get(i) if isinstance(i, int) else None
        who = f"'{name}'" if name is not None else f"#{int(i) + 1}"
        return f"[[workload]] {who}" if len(tid) == 2 else f"[workload.{'.'.join(map(str, tid[2:]))}] of {who}"

    def error(self, tid: TableId, key: str | None, b: _Bad, *, origin: TableId | None = None) -> ConfigError:
        """Error about `key` of `tid`; `origin` is the table the value came from when not `tid`."""
        where = self.label(tid) + (f" key '{key}'" if key else "")
        if origin and origin != tid:
            where += f" from {self.label(origin)}"
        line = self.lines.find(origin or tid, key)
        return ConfigError(self.path, b.problem, where=where, line=line, expected=b.expected, hint=b.hint)

    def table(self, tid: TableId, value: Any, specs: dict[str, Converter],
              extra: Sequence[str] = ()) -> dict[str, Any]:
        """Check one table's keys and values (before merging); `extra` keys pass through unchecked."""
        if not isinstance(value, dict):
            raise ConfigError(self.path, f"{tid[-1]} = {_show(value)} is {_kind(value)}", where=self.label(tid),
                              line=self.lines.find(tid[:-1], str(tid[-1])), expected="a table")
        out: dict[str, Any] = {}  # the table's keys, checked (what each converter gives)
        for key, v in value.items():
            if key in extra:
                out[key] = v
            elif key not in specs:
                if key in FIELDS or key == "cpu_fallback":  # valid in another table
                    place = "each [[workload]]" if key == "name" else "[[workload]] or [defaults]"
                    bad = _Bad(f"key '{key}' is not allowed here", f"it in {place}")
                else:
                    hint = _did_you_mean(key, [*specs, *extra])
                    bad = _Bad(f"unknown key '{key}'", None if hint else "one of " + ", ".join([*specs, *extra]), hint)
                raise ConfigError(self.path, bad.problem, where=self.label(tid), line=self.lines.find(tid, key),
                                  expected=bad.expected, hint=bad.hint)
            else:
                try:
                    out[key] = specs[key](key, v)
                except _Bad as b:
                    raise self.error(tid, key, b) from None
        return out

    def workload(self, i: int, layers: list[tuple[TableId, dict[str, Any]]]) -> Workload:
        """Merge the layers of workload `i` and check what needs more than one key, or the machine."""
        wt = ("workload", i)
        merged: dict[str, Any] = {}
        origin: dict[str, TableId] = {}
        for tid, layer in layers:
            for k, v in layer.items():
                merged[k] = {**merged.get(k, {}), **v} if k == "env" else v
                origin[k] = tid

        def fail(key: str, problem: str, expected: str | None = None) -> ConfigError:
            return self.error(wt, key, _Bad(problem, expected), origin=origin.get(key, wt))

        model, dataset = merged.get("model"), merged.get("dataset")
        if "synthetic" in (model, dataset):
            if model is None or dataset is None:
                merged["model"] = merged["dataset"] = "synthetic"
            elif model != dataset:
                raise fail("dataset" if dataset != "synthetic" else "model",
                           f"model = {_show(model)} with dataset = {_show(dataset)}",
                           'model and dataset both "synthetic", or neither')
        applied = tuple(sorted({k for tid, layer in layers if tid[-1] == "cpu_fallback" for k in layer}))
        count_key = "gpu_count"
        if isinstance(merged.get("gpus"), int):  # gpus = N: a count
            if "gpu_count" in merged and origin["gpu_count"] == origin["gpus"]:
                raise fail("gpu_count", "gpu_count with gpus = N", "one of them")
            merged["gpu_count"], count_key = merged.pop("gpus"), "gpus"
        w = Workload(**merged, cpu_fallback_applied=applied)

        if not w.is_command and w.model != "synthetic" and w.input_size < 16:
            raise fail("input_size", f"input_size = {w.input_size} is too small for model {_show(w.model)}",
                       'at least 16 (or model = "synthetic")')
        if w.dataset == "imagefolder" and not w.is_command and w.root is None:
            raise fail("dataset", 'dataset = "imagefolder" needs root', 'root = "<folder with one sub-folder per class>"')
        paths = {}
        for key in ("root", "cwd"):
            if (value := getattr(w, key)) is not None:
                p = Path(os.path.expanduser(value))
                p = (p if p.is_absolute() else self.base / p).resolve()
                if not p.is_dir() and (key == "cwd" or w.dataset == "imagefolder"):
                    what = "is not a directory" if p.exists() else "does not exist"
                    raise fail(key, f"{key} = {_show(value)}: {p} {what}",
                               "an existing directory (relative to the workload file)")
                paths[key] = str(p)
        # as the file gave it: one string (a shell command) or a list (Workload's is the tuple)
        given: str | tuple[str, ...] | None = merged.get("command")
        if w.shell and given is None:
            raise fail("shell", "shell = true without a command", 'command = ["..."] to run in the shell')
        if isinstance(given, str) and not w.shell:
            raise fail("command", f"command = {_show(given)} is a string",
                       'a list like ["python", "train.py"] (or shell = true)')
        if w.shell and given is not None and not isinstance(given, str) and len(given) > 1:
            raise fail("command", f"command has {len(given)} items with shell = true", "one shell command string")
        command = (given,) if isinstance(given, str) else given
        if w.multinode:
            self._multinode(w, command, paths.get("cwd"), fail)
        elif command and (w.nproc or 1) > 1:  # one node, nproc ranks under torchrun --standalone
            _torchrun_ranks(w, command, paths.get("cwd"), fail, f"nproc = {w.nproc}", "nproc")
        elif w.rdzv_endpoint is not None or w.rdzv_id is not None:
            key = "rdzv_endpoint" if w.rdzv_endpoint is not None else "rdzv_id"
            raise fail(key, f"{key} with nnodes = 1", "nnodes = 2 or more for a job across nodes "
                       f"(or no {key})")
        if w.multinode and w.rdzv_id is None:
            paths["rdzv_id"] = default_rdzv_id(w.name, self.text)
        self._sizes(w, fail)
        self._per_core(w, fail)
        argv_size = sum(len(a.encode()) + 1 for a in command or ())
        if argv_size > MAX_ARGV:
            raise fail("command", f"command holds {argv_size} bytes", f"at most {MAX_ARGV} bytes in all")
        env_size = sum(len(k) + len(v) + 2 for k, v in w.env.items())
        if env_size > MAX_ENV:
            raise fail("env", f"env holds {env_size} bytes", f"at most {MAX_ENV} bytes in all")
        if command and not w.shell and not _runnable(
                command[0], paths.get("cwd"), w.env.get("PATH", os.environ.get("PATH"))):
            raise fail("command", f"command[0] = {_show(command[0])}: no such program on PATH "
                       "and no such executable file", "a program on PATH or the path of an "
                       "executable file (relative to cwd)")
        if w.gpu_count is not None and w.gpu_count > self.slots:
            n, unit = self.slots, "GPU" if self.gpu_count > 0 else "slot"
            have = (f"this machine has {n} {unit}{'s' if n != 1 else ''}" if self.gpu_count > 0 else
                    f"the queue has {n} {unit}{'s' if n != 1 else ''} ([session] slots"
                    + (")" if self.slots_set else ", default: the usable cores)"))
            raise fail(count_key, f"the job asks for {w.gpu_count} {unit}s but {have}", f"at most {n}")
        if self.gpu_count > 0:
            for g in w.gpus:
                if g >= self.gpu_count:
                    n = self.gpu_count
                    have = f"{n} GPU{'s' if n > 1 else ''} ({'0' if n == 1 else f'0-{n - 1}'})"
                    raise fail("gpus", f"GPU {g} not present: this machine has {have}",
                               "GPU index 0" if n == 1 else f"GPU indexes 0 to {n - 1}")
        return w.with_(command=command, **paths)


    def _per_core(self, w: Workload, fail: Callable[..., ConfigError]) -> None:
        """Processes and threads a job starts, against this machine: `nproc = 100000` once had
        torchrun fork ranks until the load of a 2-core box reached 50."""
        cores = usable_cpus()
        most = cores * self.per_core
        for key in ("nproc", "threads", "num_workers"):
            n = getattr(w, key)
            if n is not None and n > most:
                now = (f"[session] oversubscribe = {self.per_core}" if self.per_core_set
                       else f"or [session] oversubscribe = N, now {self.per_core}")
                raise fail(key, f"{key} = {n} is more than {self.per_core} per usable core "
                           f"({cores} here)", f"at most {most} ({now}, up to {MAX_PER_CORE})")

    @staticmethod
    def _sizes(w: Workload, fail: Callable[..., ConfigError]) -> None:
        """The built-in trainer's sizes, checked up front: a batch no larger than the dataset
        and MAX_BATCH, and one batch of float32 images well inside the job's memory cap (a
        batch_size of 10**9 once grew a trainer to 23.5 GiB before the kernel's OOM killer)."""
        if w.is_command:
            return
        if w.dataset_size is not None and w.batch_size > w.dataset_size:
            raise fail("batch_size", f"batch_size = {w.batch_size} is larger than dataset_size = "
                       f"{w.dataset_size}", "a batch no larger than the dataset")
        if w.batch_size > MAX_BATCH:
            raise fail("batch_size", f"batch_size = {w.batch_size}", f"at most {MAX_BATCH}")
        cap = memory_cap_of(w.memory_limit)
        side = max(w.input_size, w.source_size or 0) if w.dataset != "synthetic" else w.input_size
        batch = w.batch_size * 3 * side * side * 4
        if cap is not None and batch * 2 > cap:
            raise fail("batch_size", f"batch_size = {w.batch_size}: one batch of {side}x{side} "
                       f"images is {batch / (1 << 20):.0f} MiB, and the job's memory cap is "
                       f"{cap / (1 << 20):.0f} MiB", "a batch that fits twice in memory_limit "
                       "(or a larger memory_limit)")

    @staticmethod
    def _multinode(w: Workload, command: tuple[str, ...] | None, cwd: str | None,
                   fail: Callable[..., ConfigError]) -> None:
        """A job across nodes: its rendezvous, and a torchrun for a command job's ranks."""
        if w.rdzv_endpoint is None:
            raise fail("nnodes", f"nnodes = {w.nnodes} without rdzv_endpoint",
                       'rdzv_endpoint = "HOST:PORT" (the same on every node)')
        if command:
            _torchrun_ranks(w, command, cwd, fail, f"nnodes = {w.nnodes}", "nnodes")


def _torchrun_ranks(w: Workload, command: tuple[str, ...], cwd: str | None,
                    fail: Callable[..., ConfigError], why: str, key: str) -> None:
    """A command job whose ranks gputop-dl starts under torchrun (`nnodes` > 1, or `nproc` > 1
    on one node): the command must not start torchrun itself, and a torchrun must exist."""
    first = os.path.basename(command[0]) if not w.shell else command[0].split(maxsplit=1)[0]
    if any(m in first for m in ("torchrun", "torch.distributed")) or \
            "torch.distributed.run" in command[:3]:
        raise fail("command", f"command starts {_show(first)} with {why}: "
                   "gputop-dl runs torchrun itself", 'the command each rank runs, like '
                   '["python", "train.py"]')
    if torchrun_for(None if w.shell else command[0], cwd,
                    w.env.get("PATH", os.environ.get("PATH"))) is None:
        raise fail(key, f"{why} needs torchrun to start the command's "
                   "ranks, and there is none", "torchrun on the job's PATH (env PATH) or "
                   "beside its python, or gputop-dl installed with torch")


DEFAULT_MEMORY_SHARE = 0.5  # a job's default memory cap: this share of the host's memory


def memory_cap_of(limit: int | None) -> int | None:
    """A job's memory cap in bytes: its memory_limit, else DEFAULT_MEMORY_SHARE of the host's
    memory (None where that cannot be read)."""
    if limit is not None:
        return limit
    total = host_memory()
    return None if total is None else int(total * DEFAULT_MEMORY_SHARE)


def usable_cpus() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def load_session(path: str | os.PathLike[str], *, gpu_count: int | None, only: Sequence[str] | None = None) -> SessionSpec:
    """Read and validate the workload file at `path` for a machine with `gpu_count` CUDA GPUs.

    `gpu_count` None or 0: no CUDA; cpu_fallback tables are applied and GPU indexes are not checked.
    `only`: keep just these workloads (in file order). Raises ConfigError (one line) on any mistake.
    """
    spath = os.fspath(path)
    text, data = read_toml(spath, "workload")
    ld = _Loader(spath, text, gpu_count or 0)
    for key in data:
        if key not in _TOP:
            hint = _did_you_mean(key, _TOP)
            what = f"unknown table [{key}]" if isinstance(data[key], dict) else f"unknown top-level key '{key}'"
            line = ld.lines.find((key,)) or ld.lines.find((), key)
            raise ConfigError(spath, what, where="top level", line=line,
                              expected=None if hint else "only [session], [defaults] and [[workload]]", hint=hint)
    session = ld.table(("session",), data.get("session", {}), SESSION_FIELDS)
    if "oversubscribe" in session:
        ld.per_core, ld.per_core_set = session.pop("oversubscribe"), True
    if not gpu_count and "slots" in session:
        ld.slots, ld.slots_set = session["slots"], True
    defaults = ld.table(("defaults",), data.get("defaults", {}), DEFAULT_FIELDS, extra=("cpu_fallback",))
    d_fallback = ld.table(("defaults", "cpu_fallback"), defaults.pop("cpu_fallback", {}), DEFAULT_FIELDS)

    tables = data.get("workload", [])
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise ConfigError(spath, "workload is not an array of tables", where="[workload]",
                          line=ld.lines.find(("workload",)) or ld.lines.find((), "workload"),
                          expected="[[workload]] tables (double brackets)")
    if not tables:
        raise ConfigError(spath, "no [[workload]] tables", expected="at least one")
    if len(tables) > MAX_WORKLOADS:
        raise ConfigError(spath, f"{len(tables)} [[workload]] tables", where="[[workload]]",
                          line=ld.lines.find(("workload",)),
                          expected=f"at most {MAX_WORKLOADS} workloads in one file (each is a "
                          "process started at once)")
    first_line: dict[str, int | None] = {}
    for i, t in enumerate(tables):
        tid = ("workload", i)
        if "name" not in t:
            raise ld.error(tid, None, _Bad("missing key 'name'", 'name = "..." matching [A-Za-z0-9_.-]+'))
        try:
            name = _as_name("name", t["name"])
        except _Bad as b:
            raise ld.error(tid, "name", b) from None
        if name in first_line:
            first = first_line[name]
            raise ld.error(tid, "name", _Bad(f"duplicate workload name {_show(name)}"
                                             + (f" (first at line {first})" if first else ""), "unique names"))
        first_line[name] = ld.lines.find(tid, "name")
        ld.names[i] = name
    if only:
        unknown = [n for n in only if n not in first_line]
        if unknown:
            raise ConfigError(spath, "unknown workload " + ", ".join(map(_show, unknown)), where="workload selection",
                              expected="one of " + ", ".join(map(_show, first_line)))
    cuda = bool(gpu_count and gpu_count > 0)
    workloads = []
    for i, t in enumerate(tables):
        tid = ("workload", i)
        own = ld.table(tid, t, FIELDS, extra=("cpu_fallback",))
        w_fallback = ld.table((*tid, "cpu_fallback"), own.pop("cpu_fallback", {}), DEFAULT_FIELDS)
        if only and ld.names[i] not in only:
            continue
        layers = [(("defaults",), defaults), (tid, own)]
        if not cuda:
            layers += [(("defaults", "cpu_fallback"), d_fallback), ((*tid, "cpu_fallback"), w_fallback)]
        workloads.append(ld.workload(i, layers))
    return SessionSpec(
        name=session.get("name", Path(spath).stem), path=spath,
        interval=session.get("interval", 1.0), baseline=session.get("baseline", "measure"),
        baseline_steps=session.get("baseline_steps", 8),
        baseline_timeout_s=session.get("baseline_timeout_s", 300.0),
        probe_s=session.get("probe_s", 5.0),
        workloads=tuple(workloads), cuda=cuda, cpu_fallback_reason=None,
        **{k: session[k] for k in ("policy", "slots", "cpu_aware", "ageing_s", "v") if k in session},
    )
