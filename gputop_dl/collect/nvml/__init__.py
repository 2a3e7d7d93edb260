"""The GPUs through NVML: each device's figures, its counters and energy, the processes on it."""
