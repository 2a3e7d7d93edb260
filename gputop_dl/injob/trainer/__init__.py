"""The built-in training loop, run in its own process: `python -m gputop_dl.injob.trainer SPEC.json`.

This package (and only this package) imports torch; the monitor process never imports it.
"""
