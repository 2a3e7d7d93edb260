"""The box's storage: per filesystem holding a dataset path, its device and measured 128 KiB reads.

For each path (`--data DIR`, and the working directory): the mount it is on (`/proc/self/
mountinfo`), the device and whether it spins, then a sequential pass and random 128 KiB reads
of one file, each bounded in time. The file is a test file written into the folder and removed
after (where the folder takes writes), else the largest readable file found in it. Reads use
O_DIRECT with a page-aligned buffer (an anonymous mmap) so the page cache is bypassed; where
the filesystem refuses O_DIRECT (tmpfs, some FUSE and network filesystems) the reads go
through the page cache, `page_cache_bypassed` is false and the note says so.
"""

from __future__ import annotations

import errno
import mmap
import os
import random
import stat
import time

from gputop_dl.collect.proc.diskio import Mount, parse_mountinfo
from gputop_dl.collect.boxprofile.part import Part

__all__ = ["BLOCK", "read_rates", "profile_paths"]

BLOCK = 128 << 10
TEST_PREFIX = ".gputop-dl-readtest-"
MEMORY_FS = ("tmpfs", "ramfs")
MAX_SCAN = 2000  # directory entries looked at for an existing file to read


def _sys_text(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read().strip()
    except OSError:
        return None


def block_device(dev: int, sys: str = "/sys") -> Part:
    """{"name", "rotational", "model"} of a block device number (None where it is not one)."""
    base = os.path.join(sys, "dev/block", f"{os.major(dev)}:{os.minor(dev)}")
    if not os.path.exists(base):
        return {"name": None, "rotational": None, "model": None}
    real = os.path.realpath(base)
    name = os.path.basename(real)
    parent = os.path.dirname(real)  # a partition's parent is its disk
    disk = parent if os.path.exists(os.path.join(parent, "queue")) else real
    rot = _sys_text(os.path.join(disk, "queue/rotational"))
    return {"name": name, "rotational": None if rot is None else rot == "1",
            "model": _sys_text(os.path.join(disk, "device/model"))}


def _write_test_file(folder: str, size: int, seconds: float) -> str | None:
    """A file of up to `size` bytes (random data, fsynced) in `folder`, or None where the
    folder takes no writes. Writing stops early at `seconds` (at least 4 blocks)."""
    path = os.path.join(folder, f"{TEST_PREFIX}{os.getpid()}")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError:
        return None
    chunk = os.urandom(1 << 20)
    try:
        end, done = time.monotonic() + seconds, 0
        while done < size and (done < 4 * BLOCK or time.monotonic() < end):
            done += os.write(fd, chunk[: min(len(chunk), size - done)])
        os.fsync(fd)
        if hasattr(os, "posix_fadvise"):  # drop its clean pages: a buffered fallback reads cold
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    except OSError:
        os.close(fd)
        _remove(path)
        return None
    os.close(fd)
    return path


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _existing_file(folder: str) -> str | None:
    """The largest readable regular file under `folder` (a bounded look)."""
    best, best_size, seen = None, 0, 0
    for root, dirs, files in os.walk(folder):
        for f in files:
            seen += 1
            if seen > MAX_SCAN:
                return best
            p = os.path.join(root, f)
            try:
                st = os.stat(p)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode) and st.st_size > best_size and os.access(p, os.R_OK):
                best, best_size = p, st.st_size
        dirs.sort()
    return best


def read_rates(path: str, seconds: float, random_reads: bool = True, seed: int = 0) -> Part:
    """Sequential (one pass, at most `seconds`) and random 128 KiB reads (for `seconds`) of
    `path`: {"seq_bps", "rand_bps", "rand_iops", "page_cache_bypassed", "bytes_read", "note"}."""
    out: Part = {"seq_bps": None, "rand_bps": None, "rand_iops": None,
                 "page_cache_bypassed": False, "note": None}
    direct = getattr(os, "O_DIRECT", 0)
    try:
        fd = os.open(path, os.O_RDONLY | direct)
        out["page_cache_bypassed"] = bool(direct)
    except OSError as exc:
        if exc.errno != errno.EINVAL or not direct:
            out["note"] = f"cannot read {path}: {exc.strerror or exc}"
            return out
        fd = os.open(path, os.O_RDONLY)
        out["note"] = ("the filesystem refuses O_DIRECT: read through the page cache, so these "
                       "are cache rates, not the device's")
    buf = mmap.mmap(-1, BLOCK)  # page-aligned, as O_DIRECT needs
    try:
        size = os.fstat(fd).st_size
        blocks = size // BLOCK
        if blocks < 1:
            out["note"] = f"{path}: smaller than one 128 KiB block"
            return out
        done, t0 = 0, time.perf_counter()
        end = t0 + seconds
        for i in range(blocks):
            n = os.preadv(fd, [buf], i * BLOCK)
            if n <= 0:
                break
            done += n
            if time.perf_counter() >= end:
                break
        out["seq_bps"] = done / max(time.perf_counter() - t0, 1e-9)
        out["bytes_read"] = done
        if random_reads:
            rng = random.Random(seed)
            count, t0 = 0, time.perf_counter()
            end = t0 + seconds
            while True:
                os.preadv(fd, [buf], rng.randrange(blocks) * BLOCK)
                count += 1
                if time.perf_counter() >= end:
                    break
            secs = time.perf_counter() - t0
            out["rand_iops"] = count / secs
            out["rand_bps"] = count * BLOCK / secs
    except OSError as exc:
        out["note"] = f"reading {path} failed: {exc.strerror or exc}"
    finally:
        buf.close()
        os.close(fd)
    return out


def _mounts(proc: str) -> dict[int, Mount]:
    try:
        with open(os.path.join(proc, "self/mountinfo"), "rb") as f:
            return parse_mountinfo(f.read())
    except OSError:
        return {}


def profile_paths(paths: list[str], *, seconds: float, file_size: int, proc: str = "/proc",
                  sys: str = "/sys", measure: bool = True) -> tuple[list[Part], list[str]]:
    """One entry per filesystem holding one of `paths` (first path named wins), and one note
    line per path that cannot be used (missing, unreadable)."""
    mounts, out, notes = _mounts(proc), [], []
    by_dev: dict[int, Part] = {}
    for p in paths:
        try:
            st = os.stat(p)
        except FileNotFoundError:
            notes.append(f"--data {p}: does not exist")
            continue
        except OSError as exc:
            notes.append(f"--data {p}: cannot be looked at ({exc.strerror or exc})")
            continue
        folder = p if stat.S_ISDIR(st.st_mode) else os.path.dirname(os.path.abspath(p))
        if not os.access(p, os.R_OK) or (stat.S_ISDIR(st.st_mode) and not os.access(p, os.X_OK)):
            notes.append(f"--data {p}: not readable by this user")
            continue
        if st.st_dev in by_dev:
            by_dev[st.st_dev]["paths"].append(p)
            continue
        m = mounts.get(st.st_dev)
        entry = {"paths": [p], "mount": m.point if m else None, "fstype": m.fstype if m else None,
                 "source": m.source if m else None, **block_device(st.st_dev, sys),
                 "file": None, "test_file": False, "seq_bps": None, "rand_bps": None,
                 "rand_iops": None, "page_cache_bypassed": None, "seconds": seconds,
                 "note": None if measure else "not measured (--quick)"}
        by_dev[st.st_dev] = entry
        out.append(entry)
        if measure:
            _measure(entry, p if not stat.S_ISDIR(st.st_mode) else None, folder, seconds, file_size)
    return out, notes


def _measure(entry: Part, named_file: str | None, folder: str, seconds: float, size: int) -> None:
    test = None if named_file else _write_test_file(folder, size, seconds * 4)
    target = named_file or test or _existing_file(folder)
    if target is None:
        entry["note"] = "no file to read: the folder takes no writes and holds no readable file"
        return
    try:
        r = read_rates(target, seconds)
    finally:
        if test:
            _remove(test)
    entry.update(file=None if test else target, test_file=bool(test),
                 file_bytes=r.get("bytes_read"),
                 **{k: r[k] for k in ("seq_bps", "rand_bps", "rand_iops", "page_cache_bypassed")})
    if r["note"]:
        entry["note"] = r["note"]
    if entry["fstype"] in MEMORY_FS:
        entry["page_cache_bypassed"] = False
        entry["note"] = (f"{entry['fstype']} lives in memory (no device under it): these are "
                         "memory rates, not a disk's")
