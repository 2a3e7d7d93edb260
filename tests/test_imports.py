"""Import hygiene: the floors, torch and textual (the contracts in pyproject.toml
[tool.importlinter], run by lint-imports), and the monitor never loading torch at run time."""

import ast
import os
import subprocess
import sys

import pytest

PKG = os.path.join(os.path.dirname(__file__), "..", "gputop_dl")

MONITOR_MODULES = ["gputop_dl.cli", "gputop_dl.engine", "gputop_dl.control.launch", "gputop_dl.config", "gputop_dl.control.pause", "gputop_dl.engine.probe", "gputop_dl.engine.diagnose_plan", "gputop_dl.present.diagnosis", "gputop_dl.collect.fleet.nodes", "gputop_dl.collect.fleet.poll", "gputop_dl.present.fleet",
                   "gputop_dl.collect.nvml.gpus", "gputop_dl.collect.proc.host", "gputop_dl.collect.proc.procs",
                   "gputop_dl.collect.pyspy.run", "gputop_dl.record.store",
                   "gputop_dl.analyse.verdict", "gputop_dl.analyse.recorded.evidence",
                   "gputop_dl.analyse.recorded.summary", "gputop_dl.present.headless",
                   "gputop_dl.present.once", "gputop_dl.present.report",
                   "gputop_dl.text.markdown", "gputop_dl.collect.jobs.discover",
                   "gputop_dl.collect.jobs.found", "gputop_dl.collect.machine", "gputop_dl.runner", "gputop_dl.lab.commands", "gputop_dl.collect.pyspy.stall_sampler",
                   "gputop_dl.lab.sweep", "gputop_dl.lab.sweepfit", "gputop_dl.lab.sweep_report",
                   "gputop_dl.sched.policies", "gputop_dl.sched.simulate",
                   "gputop_dl.present.report.simulation", "gputop_dl.config.trace",
                   "gputop_dl.engine.queue_plan", "gputop_dl.present.prometheus",
                   "gputop_dl.present.report.tensorboard", "gputop_dl.collect.extras"]


def test_monitor_process_never_imports_torch():
    code = ("import sys, importlib\n"
            f"for m in {MONITOR_MODULES!r}: importlib.import_module(m)\n"
            "from gputop_dl.collect.machine import snapshot_once\n"
            "snapshot_once(settle_s=0.05)\n"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'torchvision'))\n"
            "print(bad)\n"
            "sys.exit(1 if bad else 0)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.shares_box("which modules a process loaded")
def test_real_launch_parent_never_imports_torch(tmp_path):
    """A whole `gputop-dl launch --headless` and `export`: torch loads only in the trainer child."""
    wl = tmp_path / "tiny.toml"
    wl.write_text('[session]\nname = "tiny"\ninterval = 0.2\nbaseline = "measure"\n'
                  'baseline_steps = 2\n[[workload]]\nname = "a"\nmodel = "synthetic"\n'
                  'input_size = 4\nnum_classes = 2\nbatch_size = 2\nnum_workers = 0\n'
                  'step_device_ms = 5.0\nepochs = 1\nsteps_per_epoch = 6\nwarmup_steps = 1\n')
    code = ("import sys\n"
            "from gputop_dl.cli import main\n"
            f"assert main(['launch', {str(wl)!r}, '--headless']) == 0\n"
            f"assert main(['export', {str(tmp_path / 'r.md')!r}]) == 0\n"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'torchvision'))\n"
            "print(bad)\n"
            "sys.exit(1 if bad else 0)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(os.environ), timeout=180)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert (tmp_path / "r.md").exists()


def test_a_synthetic_trainer_starts_without_torchvision_or_dynamo():
    """The built-in trainer imports torchvision only for a torchvision model or dataset, and a
    synthetic job's SGD does not import torch._dynamo: a synthetic job (the scenarios, the
    tests' launches) starts about 2.5 + 1.2 s of CPU sooner; a real model still gets both."""
    code = ("import sys, torch\n"
            "from gputop_dl.injob.trainer.data import build_dataset\n"
            "from gputop_dl.injob.trainer.loop import build_model, build_optimizer\n"
            "from gputop_dl.workload import Workload\n"
            "w = Workload(name='a', model='synthetic', dataset='synthetic', input_size=4, "
            "num_classes=2, step_device_ms=0.0)\n"
            "build_dataset(w); m = build_model(w, torch.device('cpu'))\n"
            "m(torch.rand(2, 3, 4, 4)).sum().backward(); build_optimizer(w, m.parameters()).step()\n"
            "print('synthetic', 'torchvision' in sys.modules, 'torch._dynamo' in sys.modules)\n"
            "build_model(Workload(name='b', model='resnet18', num_classes=2), torch.device('cpu'))\n"
            "print('resnet18', 'torchvision' in sys.modules, 'torch._dynamo' in sys.modules)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split("\n")[:2] == ["synthetic False False", "resnet18 True True"], r.stdout


# --- the floors of the house: the import contract in pyproject.toml ([tool.importlinter]) -------

ROOT = os.path.join(os.path.dirname(__file__), "..")


def _lint_imports(root: str) -> subprocess.CompletedProcess:
    """import-linter over the package under `root`, with the contracts of `root`'s pyproject."""
    exe = os.path.join(os.path.dirname(sys.executable), "lint-imports")
    env = dict(os.environ, PYTHONPATH=os.path.abspath(root))
    return subprocess.run([exe, "--config", "pyproject.toml", "--no-cache"], cwd=root, env=env,
                          capture_output=True, text=True, timeout=120)


def test_the_layers_hold():
    r = _lint_imports(ROOT)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "BROKEN" not in r.stdout and "5 kept, 0 broken" in r.stdout


def test_the_contract_fails_on_a_deliberate_violation(tmp_path):
    """A copy of the package where the lab imports a presenter, a presenter builds an engine, a
    process reader imports torch and the found jobs above it, and a presenter outside the TUI
    imports textual: every contract must say so (a contract that cannot fail proves nothing)."""
    import shutil

    shutil.copytree(os.path.join(ROOT, "gputop_dl"), tmp_path / "gputop_dl",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(os.path.join(ROOT, "pyproject.toml"), tmp_path / "pyproject.toml")
    with open(tmp_path / "gputop_dl" / "lab" / "sweepfit.py", "a") as f:
        f.write("\nfrom gputop_dl.present import headless  # deliberate violation\n")
    with open(tmp_path / "gputop_dl" / "present" / "headless.py", "a") as f:
        f.write("\nfrom gputop_dl.engine import Engine  # deliberate violation\n"
                "from textual.app import App  # deliberate violation\n")
    with open(tmp_path / "gputop_dl" / "collect" / "proc" / "host.py", "a") as f:
        f.write("\ndef _x():\n    import torch  # deliberate violation, even inside a function\n"
                "    from gputop_dl.collect.jobs import found  # deliberate violation: up collect\n")
    r = _lint_imports(str(tmp_path))
    assert r.returncode != 0
    assert "0 kept, 5 broken" in r.stdout, r.stdout[-3000:]
    assert "gputop_dl.lab.sweepfit -> gputop_dl.present.headless" in r.stdout
    assert "gputop_dl.present.headless -> gputop_dl.engine" in r.stdout
    assert "gputop_dl.collect.proc.host -> torch" in r.stdout
    assert "gputop_dl.collect.proc.host -> gputop_dl.collect.jobs.found" in r.stdout
    assert "gputop_dl.present.headless -> textual" in r.stdout


def test_no_string_imports_of_the_package():
    """Imports are statements the contract can see: no importlib.import_module("gputop_dl...")
    or __import__ of our own modules (the start-up hook loads two files by path, on purpose:
    it runs in interpreters where gputop_dl may not be importable)."""
    for root, _, files in os.walk(PKG):
        for f in files:
            if not f.endswith(".py"):
                continue
            path = os.path.join(root, f)
            for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
                if not isinstance(node, ast.Call) or not node.args:
                    continue
                fn = node.func
                name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
                arg = node.args[0]
                if name in ("import_module", "__import__") and not (
                        isinstance(arg, ast.Constant) and isinstance(arg.value, str)
                        and not arg.value.startswith("gputop_dl")):
                    raise AssertionError(f"{os.path.relpath(path, PKG)}:{node.lineno}: "
                                         f"{name}({ast.unparse(arg)}) hides an import")


def test_the_monitors_first_frame_does_without_the_stores_reads_and_writes(tmp_path):
    """Speed: before the first frame the monitor checks the store
    (record/store_open.py) without importing its reads and writes or the workload parser's
    redaction (an existing database was scrubbed once already); the engine imports them
    after that frame."""
    code = ("import sys\n"
            "from gputop_dl.record.store_open import check_store\n"
            "check_store()\n"
            "sys.modules.pop('gputop_dl.workload', None)  # a new database is scrubbed: used it\n"
            "check_store()  # an existing one, as on every later start\n"
            "import gputop_dl.runner.monitor, gputop_dl.present.tui.app\n"
            "gputop_dl.runner.monitor.host_preview()\n"
            "bad = sorted(m for m in ('gputop_dl.record.store', 'gputop_dl.record.store_read',\n"
            "             'gputop_dl.record.store_write', 'gputop_dl.workload') if m in sys.modules)\n"
            "print(bad)\n"
            "sys.exit(1 if bad else 0)\n")
    r = python_with_home(code, tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr


def python_with_home(code: str, home) -> subprocess.CompletedProcess[str]:
    """`code` run by a new interpreter, with `home` for its data directory."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "GPUTOP_DL_HOME": str(home)})


def test_the_monitors_first_frame_does_without_the_snapshots_dataclasses(tmp_path):
    """The monitor's path to its first frame (the command line, the runner, the app's modules)
    does not import `gputop_dl.snapshot` (a dozen dataclasses, ~15 ms): the status words it
    needs are in `gputop_dl.statuses`; the snapshot comes with the first reading."""
    code = ("import sys\n"
            "sys.argv = ['gputop-dl', '--stall-budget', '0']\n"
            "import gputop_dl.cli as cli, gputop_dl.runner.monitor as mon\n"
            "from gputop_dl.present.tui import app\n"
            "mon.require_foreground = lambda why: None\n"
            "class Ran(Exception): pass\n"
            "def run(self, *a, **k): raise Ran\n"
            "app.GputopApp.run = run\n"
            "try:\n"
            "    cli.main()\n"
            "except Ran:\n"
            "    print('snapshot' if 'gputop_dl.snapshot' in sys.modules else 'without')\n")
    r = python_with_home(code, tmp_path)
    assert r.stdout.strip() == "without", r.stdout + r.stderr


def test_the_declared_textual_floor_is_the_release_the_suite_runs_on():
    """pyproject said textual>=0.80 while the TUI needs 0.86+ APIs: the floor a user installs
    is now the release the tests pin and run, and the app imports with it."""
    import importlib.metadata
    import re
    import tomllib
    from pathlib import Path

    project = tomllib.loads((Path(__file__).parent.parent / "pyproject.toml").read_text())["project"]
    [dep] = [d for d in project["dependencies"] if re.match(r"textual\b(?!-)", d)]
    [pin] = [d for d in project["optional-dependencies"]["test"] if re.match(r"textual==", d)]
    floor = re.search(r">=([0-9.]+)", dep).group(1)
    assert floor == pin.split("==")[1] == importlib.metadata.version("textual")
    from gputop_dl.present.tui.app import GputopApp  # noqa: F401


def import_cycles(package: str) -> list[list[str]]:
    """The package's modules that import each other round (strongly connected components of
    the import graph, TYPE_CHECKING imports included), largest first."""
    import grimp

    graph = grimp.build_graph(package, cache_dir=None)
    edges = {m: set(graph.find_modules_directly_imported_by(m)) & graph.modules
             for m in graph.modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for m in sorted(graph.modules):
        if m not in index:
            visit(m)
    return sorted(out, key=len, reverse=True)


def test_no_import_cycles():
    assert import_cycles("gputop_dl") == []


def test_the_cycle_check_finds_a_deliberate_cycle(tmp_path, monkeypatch):
    pkg = tmp_path / "cyclepkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from cyclepkg import b\n")
    (pkg / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                              "    from cyclepkg import a\n")
    (pkg / "c.py").write_text("from cyclepkg import a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert import_cycles("cyclepkg") == [["cyclepkg.a", "cyclepkg.b"]]
