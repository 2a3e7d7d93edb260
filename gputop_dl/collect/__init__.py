"""Samplers: read GPUs (NVML), the host and the training jobs, and produce snapshot values.

`machine.py` joins one tick's reads: `jobs/` (which processes train, as rows) over `proc/`
(the kernel's files for the host and each process tree), `pyspy/` (what py-spy reads of a
process) and `nvml/` (the GPUs). `fleet/` reads other nodes, `boxprofile/` profiles the box.
"""
