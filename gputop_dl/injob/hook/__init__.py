"""Start-up hook for `command = [...]` workloads: step/epoch/stall events with no code changes.

`site/` holds only `sitecustomize.py`; the launcher prepends that folder to the job's
PYTHONPATH, so every Python process of the job runs it at start-up. It chains any other
sitecustomize, and only when GPUTOP_DL_EVENTS is set loads this folder as a private package
(by file path: the target interpreter may not have gputop_dl installed) and runs
`dlhook.install()`, which patches torch's DataLoader lazily, when the script imports it.
Modules: `dlhook` (entry, the Hook), `report` (events, torch facts), `tracker` (steps and
epochs), `loaderpatch` (the DataLoader patch), `postimport` (the lazy import finder),
`stepclock` (the phase clock), and one module per framework that drives the loader its own way
(`fw_lightning`, `fw_accelerate`, `fw_transformers`). They import nothing of gputop_dl outside this folder (injob/channel.py
comes by path), and nothing here imports torch.
"""

import os

SITE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "site")
ENV_HOOK = "GPUTOP_DL_HOOK"  # "0" in a workload's env: no hook (process-level metrics only)
ENV_HOOK_ROOT = "GPUTOP_DL_HOOK_ROOT"  # = dlhook.ENV_ROOT: set by the job's first Python process
