"""Workload and session specs: the validated, resolved content of a workload file.

`gputop_dl.config` builds these from TOML; the launcher and the trainer consume them. They are
plain data (JSON round-trip via `to_dict`/`from_dict`) so a spec can be handed to the trainer
child process as a file.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import asdict, dataclass, field, fields, replace
from collections.abc import Mapping
from typing import Any, overload

REDACTED = "<redacted>"  # a secret (an env value, a secret-looking argument) wherever shown

# The one rule for what is a secret in a job's settings, used wherever gputop-dl records,
# exports, serves or shows a command. It works on arguments, never on a line re-split at its
# spaces (`--auth_header="Bearer X"` is one argument, its whole value hidden):
# - every `env` value;
# - the value of an option or a NAME=VALUE whose name has one of SECRET_WORDS as a word (split
#   at - _ .: --api-key, --hf_token, HF_TOKEN=, AWS_SECRET_ACCESS_KEY=; not --keep, --monkey)
#   or a word that ends in one of SECRET_ENDS (--accesstoken, --hftoken, --clientsecret; not
#   --tokenizer, --max_tokens) or starts with secret/passw (--secretkey);
# - in a URL: the password (scheme://user:PASSWORD@host), the whole user part of an http(s)
#   URL (https://TOKEN@github.com: git's token form), and each query value whose name is a
#   secret's (?token=X&access_key=Y);
# - the credential after Bearer or Basic (`-H "Authorization: Bearer X"`);
# - `-p X` / `-pX` of the programs whose -p is a password (mysql, sshpass, ...).
SECRET_WORDS = frozenset({"password", "passwd", "pwd", "pass", "passphrase", "token", "secret",
                          "key", "apikey", "credential", "credentials", "auth", "bearer",
                          "authorization", "cookie", "signature", "sig"})
_SECRET_PART = re.compile(r"(token|secret|passw(or)?d|passphrase|apikey|credentials?|bearer)$"
                          r"|^(secret|passw)")
PASSWORD_P = frozenset({"mysql", "mysqldump", "mysqladmin", "mariadb", "sshpass"})
_URL_PASSWORD = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://[^\s/:@]*:)([^\s/@]+)@")
_URL_HTTP_USER = re.compile(r"(https?://)([^\s/:@]+)@", re.I)
_SCHEME_CREDENTIAL = re.compile(r"\b(Bearer|Basic)\s+[^\s,;]+", re.I)  # an Authorization value
_QUERY = re.compile(r"([?&;])([A-Za-z0-9_.-]+)=([^&;#\s]*)")
_ASSIGN = re.compile(r"(-{0,2})([A-Za-z_][A-Za-z0-9_.-]*)=(.*)", re.S)


def secret_name(name: str) -> bool:
    """Whether an option or variable name names a secret (`--api-key`, `HF_TOKEN`,
    `--accesstoken`)."""
    words = re.split(r"[-_.]+", name.strip("-").lower())
    return any(w in SECRET_WORDS or _SECRET_PART.search(w) for w in words)


def _redact_url(arg: str) -> str:
    arg = _URL_PASSWORD.sub(rf"\1{REDACTED}@", arg)
    arg = _URL_HTTP_USER.sub(rf"\1{REDACTED}@", arg)
    if "?" in arg:
        arg = _QUERY.sub(lambda m: f"{m.group(1)}{m.group(2)}={REDACTED}"
                         if secret_name(m.group(2)) and m.group(3) else m.group(0), arg)
    return arg


def _redact_arg(arg: str) -> str:
    arg = _SCHEME_CREDENTIAL.sub(rf"\1 {REDACTED}", arg)
    m = _ASSIGN.fullmatch(arg)
    if m and secret_name(m.group(2)) and m.group(3):  # the whole value, spaces and all
        return f"{m.group(1)}{m.group(2)}={REDACTED}"
    if re.search(r"\s", arg):  # a command line in one argument (sh -c "...", python -c)
        return redact_line(arg) or arg
    return _redact_url(arg)


def _flag_before_value(arg: str) -> bool:
    """`--token` (its value is the next argument)."""
    return arg.startswith("-") and "=" not in arg and secret_name(arg)


def redact_args(args: list[str] | tuple[str, ...]) -> list[str]:
    """A command's arguments with what looks like a secret replaced by REDACTED (an argument
    that holds spaces and is no NAME=VALUE is read as a command line: `sh -c "... --token X"`)."""
    out: list[str] = []
    p_is_password = False
    for i, a in enumerate(args):
        a = str(a)
        if os.path.basename(a) in PASSWORD_P:
            p_is_password = True
        prev = str(args[i - 1]) if i else ""
        if i and (_flag_before_value(prev) or (p_is_password and prev == "-p")) \
                and not a.startswith("--"):
            out.append(REDACTED)
        elif p_is_password and a.startswith("-p") and len(a) > 2:
            out.append("-p" + REDACTED)
        else:
            out.append(_redact_arg(a))
    return out


def redact_line(line: str | None) -> str | None:
    """A command line as one string (a shell command, `gputop-dl launch ...`, a found
    process's command line) by the same rule, its spacing kept; a quoted value is redacted
    to its closing quote."""
    if not line:
        return line
    parts = re.split(r"(\s+)", line)  # words at even indexes, the spaces between at odd
    words = parts[::2]
    new = redact_args(words)
    out, quote = [new[0]], None
    for i in range(1, len(words)):
        if quote is not None:  # the rest of a quoted value that was redacted
            if words[i].endswith(quote):
                quote = None
            continue
        out += [parts[2 * i - 1], new[i]]
        if new[i] != words[i]:
            value = words[i].split("=", 1)[1] if new[i].endswith("=" + REDACTED) else words[i]
            if value[:1] in ("'", '"') and not (len(value) > 1 and value.endswith(value[0])):
                quote = value[0]
    return "".join(out)


def command_line(args: list[str] | tuple[str, ...]) -> str:
    """Arguments as one shell-quoted line, a redacted value left unquoted (`--token=<redacted>`)."""
    def one(a: str) -> str:
        plain = a.replace(REDACTED, "x")
        return a if REDACTED in a and shlex.quote(plain) == plain else shlex.quote(a)
    return " ".join(one(str(a)) for a in args)


def shown_command(args: list[str] | tuple[str, ...]) -> str:
    """A process's arguments as one line to show, store or serve: redacted argument by
    argument, then joined (a line is never re-split at its spaces to find its secrets)."""
    return command_line(redact_args(args))


@overload
def redact_secrets(config: dict[str, Any]) -> dict[str, Any]: ...
@overload
def redact_secrets(config: None) -> None: ...
def redact_secrets(config: dict[str, Any] | None) -> dict[str, Any] | None:
    """A workload's plain data with its `env` values replaced by REDACTED (keys kept) and the
    secret-looking arguments of its `command` too (a copy when there is something to hide)."""
    if not isinstance(config, dict):
        return config
    out = config
    env = config.get("env")
    if isinstance(env, dict) and any(v != REDACTED for v in env.values()):
        out = dict(out, env=dict.fromkeys(env, REDACTED))
    cmd = config.get("command")
    if isinstance(cmd, (list, tuple)) and all(isinstance(a, str) for a in cmd):
        new = ([redact_line(a) or "" for a in cmd] if config.get("shell") and len(cmd) == 1
               else redact_args(cmd))
        if new != list(cmd):
            out = dict(out, command=new)
    return out


@dataclass(frozen=True)
class Workload:
    """One [[workload]] after [defaults] were merged in (and, on CPU fallback, its cpu_fallback)."""

    name: str
    model: str = "mobilenet_v2"  # torchvision classification model name, or "synthetic"
    dataset: str = "fake"  # fake | imagefolder | synthetic
    root: str | None = None  # imagefolder root (absolute after validation)
    dataset_size: int | None = None  # fake/synthetic: images per epoch (default: steps*batch)
    source_size: int | None = None  # fake: side of the generated images (default 1.5 x input)
    input_size: int = 224
    num_classes: int = 1000
    batch_size: int = 32
    num_workers: int = 4
    transforms: str | tuple[str, ...] = "heavy"  # preset or explicit list of transform specs
    epochs: int = 3
    steps_per_epoch: int | None = None
    warmup_steps: int = 3
    optimizer: str = "sgd"
    lr: float = 0.01
    gpus: tuple[int, ...] = ()
    nproc: int | None = None  # DDP processes per node (default: len(gpus) on CUDA, 1 on CPU)
    # a job across nodes (docs/architecture.md): one `gputop-dl launch` per node, torchrun's c10d
    nnodes: int = 1  # nodes of the job; > 1 needs rdzv_endpoint
    rdzv_endpoint: str | None = None  # "HOST:PORT" of the rendezvous (the same on every node)
    rdzv_id: str | None = None  # the run's id (default: derived from the name and file)
    threads: int | None = None  # torch intra-op threads (OMP/MKL) in the trainer
    seed: int = 0
    # calibrated synthetic workload (dataset = "synthetic" / model = "synthetic")
    sample_cpu_ms: float = 0.0  # CPU work per sample in the dataset (in the loader)
    sample_io_ms: float = 0.0  # waiting per sample in the dataset (I/O-like, uses no CPU)
    step_device_ms: float = 0.0  # device work per step (waited on CPU, matrix products that fill the GPU on CUDA)
    step_cpu_ms: float = 0.0  # CPU work per step in the trainer's main thread
    # any program, measured from outside
    command: tuple[str, ...] | None = None
    cwd: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    shell: bool = False
    # as a job of `gputop-dl queue` (docs/scheduling.md)
    arrival: float = 0.0  # seconds after the queue's start
    priority: int = 0  # larger first (the priority policy)
    duration_s: float | None = None  # expected solo run time (else: a cached solo baseline)
    gpu_count: int | None = None  # `gpus = N`: GPUs (slots) as a count, placed by the queue
    # set when the file's cpu_fallback overrides were applied
    cpu_fallback_applied: tuple[str, ...] = ()
    # memory cap: bytes of RSS the job's processes may use together; None: the
    # default share of the host's memory (launch.memory_cap)
    memory_limit: int | None = None

    def to_dict(self, redact: bool = False) -> dict[str, Any]:
        """As plain data; `redact`: `env` values replaced by REDACTED, keys kept (what is
        stored, exported, written to the job's spec file or shown: the values may be secrets,
        and only the job's own environment needs them)."""
        d = asdict(self)
        for k, v in d.items():
            if isinstance(v, tuple):
                d[k] = list(v)
        return redact_secrets(d) if redact else d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Workload:
        names = {f.name for f in fields(cls)}
        kw = {}
        for k, v in d.items():
            if k not in names:
                continue
            if isinstance(v, list):
                v = tuple(v)
            kw[k] = v
        return cls(**kw)

    def with_(self, **changes: Any) -> Workload:
        return replace(self, **changes)

    @property
    def is_command(self) -> bool:
        return self.command is not None

    @property
    def multinode(self) -> bool:
        """The job spans nodes: this launch runs one node's share of it."""
        return self.nnodes > 1


@dataclass(frozen=True)
class SessionSpec:
    """The [session] table plus the workloads, ready to launch."""

    name: str
    path: str  # the workload file, as given
    interval: float = 1.0
    baseline: str = "measure"  # measure | cache | probe | none
    baseline_steps: int = 8  # measured steps per solo baseline (after warm-up)
    probe_s: float = 5.0  # probe: the longest one job runs alone, the others paused
    baseline_timeout_s: float = 300.0  # a command's solo run without its steps is stopped then
    workloads: tuple[Workload, ...] = ()
    cuda: bool = True  # False: no CUDA here, every workload fell back to the CPU
    cpu_fallback_reason: str | None = None
    # `gputop-dl queue`: the scheduling policy, its slots (no CUDA) and CPU-aware admission
    policy: str = "fifo"
    slots: int | None = None  # None: the usable cores (no CUDA) or the GPUs
    cpu_aware: bool | None = None  # None: on when solo profiles exist
    ageing_s: float = 600.0  # priority: seconds of waiting worth one priority level
    v: float = 1.0  # lyapunov: weight of the CPU-overcommit penalty
