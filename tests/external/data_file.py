"""A data file of random bytes for the disk scripts (disk_reader.py `--make`, and the tests that
write it themselves): it imports nothing heavy, so writing one costs no torch import."""

import os


def make(path: str, mib: int) -> None:
    """`mib` MiB of random bytes at `path`, flushed to the disk (no write-back left to time)."""
    with open(path, "wb") as f:
        for _ in range(mib):
            f.write(os.urandom(1 << 20))
        f.flush()
        os.fsync(f.fileno())
