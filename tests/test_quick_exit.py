"""quick_exit.exit_now: buffered output kept, the exit code given, no interpreter teardown."""

import subprocess
import sys

PROG = """
import atexit, sys
from gputop_dl.quick_exit import exit_now
atexit.register(lambda: print("teardown ran", flush=True))
sys.stdout.write("kept out"); sys.stderr.write("kept err")
exit_now(7)
"""


def test_exit_now_flushes_both_streams_and_skips_the_teardown():
    p = subprocess.run([sys.executable, "-c", PROG], capture_output=True, text=True, timeout=60)
    assert p.returncode == 7
    assert p.stdout == "kept out" and p.stderr == "kept err"  # no atexit line: no teardown


def test_exit_now_passes_over_a_closed_stream():
    prog = PROG.replace('sys.stdout.write("kept out");', "sys.stdout.close();")
    p = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, timeout=60)
    assert p.returncode == 7 and p.stderr == "kept err"
