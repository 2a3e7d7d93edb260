"""Code that runs inside the training process, not in the monitor.

`hook/` is loaded into a `command` job's Python processes at start-up (by file path, through
`hook/site/sitecustomize.py` first on the job's PYTHONPATH); `trainer/` is the built-in
training loop, its own process (`python -m gputop_dl.injob.trainer SPEC.json`); `channel.py`
is the event file both write and the monitor reads (the hook loads it by path too). Nothing
here may import the monitor's floors, and this file imports nothing: the trainer's process
loads it first.
"""
