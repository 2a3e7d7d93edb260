"""The jobs' processes: start and stop their groups, pause and resume their trees, and the guards.

`watchdog.py` and `pause_guard.py` also run as stdlib-only processes of their own (by file
path, `python -I`), so nothing here may import anything at package level.
"""
