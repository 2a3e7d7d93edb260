"""The lab experiments of the background, built in: model cost, batch-size sweep, operator profile.

`cost`, `sweep_worker` and `opprofile` import torch; `sweepfit`, `sweep` and `sweep_report` do not, so
the sweep's parent process stays torch-free (each batch runs in its own worker process).
"""
