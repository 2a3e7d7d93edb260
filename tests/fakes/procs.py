"""A faked /proc (stat, maps, cmdline, environ files under a tmp dir) and a settable clock."""

from __future__ import annotations

import os

TORCH_MAPS = (b"7f00-7f01 r-xp 0 08:01 1 /usr/bin/python3.11\n"
              b"7f02-7f03 r-xp 0 08:01 2 /venv/lib/python3.11/site-packages/torch/lib/libtorch_cpu.so\n")
PY_MAPS = b"7f00-7f01 r-xp 0 08:01 1 /usr/bin/python3.11\n"
GPU_MAPS = b"7f00-7f01 rw-s 0 00:05 3 /dev/nvidia0\n7f02-7f03 r-xp 0 08:01 4 /opt/app/bin/solver\n"
BASH_MAPS = b"55aa-55ab r-xp 0 08:01 5 /usr/bin/bash\n"


class FakeProc:
    """Writes /proc/PID/{stat,maps,cmdline,environ} files under a tmp dir."""

    def __init__(self, root):
        self.root = root
        os.makedirs(root, exist_ok=True)

    def add(self, pid, ppid, cmd, maps=b"", start=None, env=b"HOME=/root\0", state="S",
            cpu_ticks=0, threads=1, comm=None):
        d = os.path.join(self.root, str(pid))
        os.makedirs(d, exist_ok=True)
        comm = comm or (os.path.basename(cmd[0])[:15] if cmd else "kworker")
        # fields 5..21 (pgrp .. itrealvalue): utime is the 14th field, num_threads the 20th
        rest = " ".join(["0"] * 9 + [str(cpu_ticks), "0", "0", "0", "0", "0", str(threads), "0"])
        with open(os.path.join(d, "stat"), "w") as f:
            f.write(f"{pid} ({comm}) {state} {ppid} {rest} {start if start is not None else 1000 + pid} 0 0\n")
        for name, data in (("maps", maps), ("cmdline", b"\0".join(a.encode() for a in cmd) + b"\0"),
                           ("environ", env)):
            with open(os.path.join(d, name), "wb") as f:
                f.write(data)

    def remove(self, pid, what=None):
        d = os.path.join(self.root, str(pid))
        if what:
            os.remove(os.path.join(d, what))
        else:
            for f in os.listdir(d):
                os.remove(os.path.join(d, f))
            os.rmdir(d)


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t
