"""A fake `pynvml` for the real CLI: put this folder first on PYTHONPATH and `gputop-dl` (the
monitor, `--once`, `launch`, `serve`) reads `tests.fakes.nvml.FakePynvml` instead of a driver.

    PYTHONPATH=tests/fakes/pynvml_site:$PWD \
    GPUTOP_DL_FAKE_NVML="gpus=2;power_w=250;gpu0=gputop_dl.injob.trainer;gpu1=calibrated.py" \
    gputop-dl --once --json

`GPUTOP_DL_FAKE_NVML` is `key=value` pairs split by `;`:

- `gpus=N` (default 2) fake H100s; `power_w=W` each one's power draw (default 300);
- `gpuK=TEXT`: every process whose command line contains TEXT is a compute process on GPU K
  (looked up at each NVML call, so a job started later is found);
- `name=NAME` every GPU's name (e.g. `NVIDIA GH200 480GB`: module-scope power);
- `no_energy=1` the energy counter answers NOT_SUPPORTED (as before Volta);
- `frozen=1` the counter answers but never moves (some virtual GPUs);
- `driver=none`: nvmlInit fails as on a box without the NVIDIA driver.

The counter grows by the power × the real clock (the fake's own semantics: mJ, one new value
per update period). The monitor's own process is never listed, nor a shell (`sh -c "python
train.py ..."` names the text too) or a command line that sets `GPUTOP_DL_FAKE_NVML`.
"""

from __future__ import annotations

import os
import sys

import psutil

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__)))))
if _ROOT not in sys.path:
    sys.path.append(_ROOT)

from tests.fakes.nvml import FakeProcess, FakePynvml  # noqa: E402


_SHELLS = {"sh", "bash", "dash", "zsh", "tmux: server", "tmux"}


def _config() -> dict[str, str]:
    out: dict[str, str] = {}
    for part in os.environ.get("GPUTOP_DL_FAKE_NVML", "").split(";"):
        key, _, value = part.partition("=")
        if key.strip():
            out[key.strip()] = value.strip()
    return out


class _ByCommandLine(FakePynvml):
    """FakePynvml whose compute processes are the live processes matching each GPU's text."""

    def __init__(self, conf: dict[str, str]) -> None:
        super().__init__(gpus=int(conf.get("gpus", "2")), init_error=(
            FakePynvml.NVML_ERROR_DRIVER_NOT_LOADED if conf.get("driver") == "none" else None))
        self._match = {int(k[3:]): v for k, v in conf.items()
                       if k[:3] == "gpu" and k[3:].isdigit() and v}
        for g in self.gpus:
            g.power_mw = int(float(conf.get("power_w", "300")) * 1000)
            if "name" in conf:
                g.name = conf["name"]
            if conf.get("no_energy") == "1":
                g.unsupported.add("energy")
            g.energy_frozen = conf.get("frozen") == "1"

    def nvmlDeviceGetComputeRunningProcesses(self, h):  # type: ignore[no-untyped-def]
        text = self._match.get(h.index)
        if text is not None:
            me = os.getpid()
            pids = []
            for p in psutil.process_iter(["cmdline", "name"]):
                cmd = " ".join(p.info["cmdline"] or ())
                if (p.pid != me and text in cmd and p.info["name"] not in _SHELLS
                        and "GPUTOP_DL_FAKE_NVML" not in cmd):
                    pids.append(p.pid)
            self.gpus[h.index].processes = [FakeProcess(pid=pid) for pid in pids]
        return super().nvmlDeviceGetComputeRunningProcesses(h)


sys.modules[__name__] = _ByCommandLine(_config())  # type: ignore[assignment]
