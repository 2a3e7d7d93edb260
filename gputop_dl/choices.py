"""The words a workload file and the command line accept for a few keys: one list, no imports.

Here and not in workload.py so that the command-line parser (on the monitor's first frame's
path) does not build the workload dataclasses to know four tuples.
"""

TRANSFORM_PRESETS = ("light", "heavy")
DATASETS = ("fake", "imagefolder", "synthetic")
OPTIMIZERS = ("sgd", "adam", "adamw")
BASELINES = ("measure", "cache", "probe", "none")
