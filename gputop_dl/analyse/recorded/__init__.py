"""Figures of a recorded session or co-run: its jobs' results, window, evidence, queue and energy."""
