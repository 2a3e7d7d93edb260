"""Samplers: read GPUs (NVML), the host and the training jobs, and produce snapshot values."""
