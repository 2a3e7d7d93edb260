"""The kernel's view: the host (/proc, PSI, RAPL) and each process tree (CPU, wait, disk, memory, identity)."""
