"""Twins: two jobs that run the same command but for arguments that do not change a step's work.

A user who starts a second copy of a training script by hand gives it another output folder,
seed or run name, or another learning rate (a sweep by hand); it still makes the same batches
and the same steps at the same cost alone, so the first copy's pace alone is the second's too
(analyse/slowdown/pace.py: a loader's pace follows its trainer's). Two command lines are twins when
they are equal once the options named for where a run writes, what it is called, how it is
seeded, and the optimizer's figures and the run's length are left out (IGNORED, matched on the
option's name without dashes, "-" or "_", lowercased, by prefix; the value after it goes with
it). Anything else that differs (a batch size, a number of workers, a model, a dataset, a
precision, a positional argument) makes them different jobs. Only strings, no I/O.
"""

from __future__ import annotations

import functools
import shlex

# options that name where a run writes, what it is called or how it is seeded, and the
# optimizer's figures and the run's length, which leave a step's work as it is (prefixes of the
# option's name without its dashes, "-" and "_", lowercased: "--outf", "--output-dir",
# "--save_dir", "--seed", "--manualSeed", "--run-name", "--log-interval", "--lr",
# "--weight-decay", "--epochs", "--max_steps", "--num_train_epochs" are left out;
# "--batch-size", "--arch", "--amp" are not)
IGNORED = ("outf", "output", "outdir", "outpath", "save", "log", "seed", "manualseed", "name",
           "run", "exp", "ckpt", "checkpoint", "wandb", "tensorboard", "project", "tag", "notes",
           "resume", "lr", "learningrate", "momentum", "weightdecay", "wd", "beta", "gamma",
           # the run's length (Lightning's max_epochs/max_steps/max_time, transformers'
           # num_train_epochs/max_steps, a time budget)
           "epoch", "niter", "maxepoch", "maxstep", "maxtime", "maxiter", "numepoch",
           "numtrainepoch", "nepoch", "seconds", "duration", "timelimit")


def _option(tok: str) -> str | None:
    """The option's name without dashes and value, lowercased ("--outf=x" -> "outf"); None: not
    an option (a value, a positional argument, a negative number)."""
    if not tok.startswith("-") or len(tok) < 2 or tok[1:2].isdigit() or tok[1:2] == ".":
        return None
    return tok.lstrip("-").split("=", 1)[0].lower()


def _ignored(name: str) -> bool:
    return name.replace("-", "").replace("_", "").startswith(IGNORED)


@functools.lru_cache(maxsize=256)  # asked for each job that has no pace alone, every tick
def _split(command: str) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """The tokens kept, and the (option, value) pairs left out, of a shell command line."""
    try:
        toks = shlex.split(command)
    except ValueError:  # an unbalanced quote: the line as one token
        return (command,), ()
    kept: list[str] = []
    left: list[tuple[str, str]] = []
    i = 0
    while i < len(toks):
        tok, name = toks[i], _option(toks[i])
        if name is None or not _ignored(name):
            kept.append(tok)
            i += 1
            continue
        opt, eq, value = tok.partition("=")
        if eq:
            left.append((opt, value))
            i += 1
        elif i + 1 < len(toks) and _option(toks[i + 1]) is None:
            left.append((opt, toks[i + 1]))
            i += 2
        else:  # a flag ("--save"): no value
            left.append((opt, ""))
            i += 1
    return tuple(kept), tuple(left)


def key(command: str) -> tuple[str, ...]:
    """What twins share: the command line without its IGNORED options and their values."""
    return _split(command)[0]


@functools.lru_cache(maxsize=256)  # asked for each job paced by a twin, every tick
def differ(a: str, b: str) -> tuple[str, ...]:
    """The IGNORED options whose values differ between two twins' command lines, as written in
    them ("--outf", "--seed"), in the order they come in `b`, then those only `a` has."""
    la, lb = dict(_split(a)[1]), _split(b)[1]
    names = [n for n, v in lb if la.get(n) != v] + [n for n in la if n not in dict(lb)]
    return tuple(dict.fromkeys(names))
