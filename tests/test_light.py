"""The light install: without torch and torchvision, the monitor, serve, diagnose, export and
sessions work, and a built-in workload or a lab command says in one line what to install."""

from __future__ import annotations

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Runs in a child whose torch and torchvision cannot be found (as in a venv without them).
BLOCK = """
import importlib.abc, sys
class NoTorch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('torch', 'torchvision'):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, NoTorch())
"""

WORKLOAD = ('[session]\nname = "tiny"\n[[workload]]\nname = "a"\nmodel = "synthetic"\n'
            'epochs = 1\nsteps_per_epoch = 2\n')


def run_child(code: str, tmp_path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", BLOCK + code], capture_output=True, text=True,
                          cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT), timeout=120)


def test_without_torch_builtin_workloads_and_lab_commands_say_what_to_install(tmp_path):
    wl = tmp_path / "tiny.toml"
    wl.write_text(WORKLOAD)
    code = ("from gputop_dl.cli import main\n"
            "import json\n"
            f"codes = [main(['launch', {str(wl)!r}, '--headless']), main(['models']),\n"
            "         main(['sweep', '--model', 'resnet18', '--batch', '2'])]\n"
            "print(json.dumps(codes))\n"
            "assert not [m for m in sys.modules if m.split('.')[0] in ('torch', 'torchvision')]\n")
    r = run_child(code, tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1]) == [2, 2, 2]
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 3 and all("pip install 'gputop-dl[train]'" in x for x in lines), lines
    assert "tiny.toml: the built-in trainer (workload 'a') needs torch" in lines[0]
    assert lines[1].startswith("gputop-dl: error: gputop-dl models needs torch and torchvision")


def test_without_torch_once_serve_export_and_sessions_work(tmp_path):
    code = ("import io, json, contextlib, urllib.request\n"
            "from gputop_dl.cli import main\n"
            "buf = io.StringIO()\n"
            "with contextlib.redirect_stdout(buf):\n"
            "    assert main(['--once', '--json']) == 0\n"
            "snap = json.loads(buf.getvalue())\n"
            "assert snap['schema'].startswith('gputop-dl.snapshot') and snap['host']['cpus'] >= 1\n"
            "from gputop_dl.collect.nvml.gpus import Nvml\n"
            "from gputop_dl.runner import monitor_engine, start_metrics\n"
            "eng = monitor_engine(Nvml(), stall_budget=0)\n"
            "srv = start_metrics(eng, '127.0.0.1:0', 'serve')\n"
            "eng.tick()\n"
            "text = urllib.request.urlopen(srv.url, timeout=5).read().decode()\n"
            "assert 'gputop_dl_host_cpu_busy_ratio' in text\n"
            "srv.stop()\n"
            "from gputop_dl.record.store import Store, default_db_path\n"
            "from tests.fakes.reports import make_session\n"
            "import os; os.makedirs(os.path.dirname(default_db_path()), exist_ok=True)\n"
            "make_session(Store(default_db_path()))\n"
            f"assert main(['export', {str(tmp_path / 'r.md')!r}]) == 0\n"
            "assert main(['sessions']) == 0\n"
            "bad = [m for m in sys.modules if m.split('.')[0] in ('torch', 'torchvision')]\n"
            "assert not bad, bad\n")
    r = run_child(code, tmp_path)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert (tmp_path / "r.md").read_text().startswith("#")
