"""Shared test fakes: NVML, /proc, snapshot sources, recorded sessions and fleets.

Test modules import fakes from here and never from each other.
"""
