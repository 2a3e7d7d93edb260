"""The memory case end to end: two plain scripts whose datasets fit in the page cache one at
a time but not together. Each alone finds its file cached; together they evict each other's
pages and wait on re-reads. `gputop-dl diagnose --no-probe --json` (the live judge over several
ticks) must call them memory-bound, and estimate each one's slowdown within 25 % of the
scripts' own ratio (its mean step together over its mean step alone).

Both run in one cgroup v1 memory group whose limit leaves BUDGET MiB of page cache above the
processes' own memory (no swap here: their anonymous memory stays, the cache gives way), and
in one v1 blkio group whose reads are throttled (a block that fell out of the cache costs what
it costs on a slow disk). Each script reads in its main process (`--workers 0`), so its own
process state says when its step waits on a read. Needs root and the v1 memory and blkio
controllers; the skip says which is missing. benchmarks/verdict_memory.py repeats it and
prints the numbers.
"""

import json
import os
import subprocess
import sys
import time

import pytest

from tests.fakes.orphan import orphan_shell

from tests.external.data_file import make
from tests.test_io_verdict_real import BLKIO, JUDGED_S, ROOT, SCRIPT, _disk_of

SIZE, BUDGET, RATE = 64, 80, 16  # MiB each file, MiB of cache for both, MiB/s of reads

MEMORY = "/sys/fs/cgroup/memory"


def why_not(data_dir: str) -> str | None:
    if os.geteuid() != 0:
        return "needs root to make cgroups"
    if not os.path.exists(os.path.join(MEMORY, "memory.limit_in_bytes")):
        return "needs the cgroup v1 memory controller (mounted at /sys/fs/cgroup/memory)"
    if not os.path.exists(os.path.join(BLKIO, "blkio.throttle.read_bps_device")):
        return "needs the cgroup v1 blkio controller with throttling"
    if _disk_of(data_dir) is None:
        return "the temporary directory is not on a block device"
    return None


def drop_cache(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


class Job:
    """A copy of the script in both cgroups, started from a shell that exits (re-parented, as a
    user's script started by hand is)."""

    def __init__(self, cgs: list[str], data: str, seconds: float, workers: int):
        join = "; ".join(f"echo $$ > {cg}/cgroup.procs" for cg in cgs)
        cmd = (f'{join} || exit 1; "{sys.executable}" "{SCRIPT}" --file "{data}" --buffered '
               f'--seconds {seconds} --report-every 4 --compute-ms 40 --workers {workers} & echo "pid $!"')
        self.sh, self.pid = orphan_shell(cmd)
        self.reports: list[dict] = []

    def first_report(self) -> None:
        line = self.sh.stdout.readline()
        assert line.startswith("{"), line
        self.reports.append(json.loads(line))

    def kill(self) -> None:
        try:
            os.kill(self.pid, 9)
        except ProcessLookupError:
            pass

    def finish(self) -> list[dict]:
        out = self.sh.stdout.read()
        self.reports += [json.loads(x) for x in out.splitlines() if x.startswith("{")]
        return [r for r in self.reports if "recent_step_s" in r]


def in_group(cgs: list[str], *argv: str) -> None:
    """Run a command inside the cgroups (its reads charged to them)."""
    join = "; ".join(f"echo $$ > {cg}/cgroup.procs" for cg in cgs)
    subprocess.run(["sh", "-c", f"{join} && exec " + " ".join(argv)], check=True)


def group_rss(mem_cg: str) -> int:
    with open(os.path.join(mem_cg, "memory.stat"), encoding="ascii") as f:
        stat = dict(line.split() for line in f)
    return int(stat["total_rss"]) + int(stat["total_shmem"])


def write(path: str, text: str) -> None:
    with open(path, "w", encoding="ascii") as f:
        f.write(text)


def refaults(mem_cg: str) -> int:
    with open(os.path.join(mem_cg, "memory.stat"), encoding="ascii") as f:
        return int(dict(line.split() for line in f)["total_workingset_refault_file"])


def start(files: list[str], cgs: list[str], seconds: float) -> tuple[list[Job], float]:
    """The scripts started in the groups with their files cached, then the limit and the
    throttle set: (jobs, when)."""
    mem_cg, blk_cg = cgs
    write(os.path.join(mem_cg, "memory.limit_in_bytes"), "-1")
    write(os.path.join(blk_cg, "blkio.throttle.read_bps_device"), f"{_disk_of(files[0])} 0\n")
    for f in files:
        drop_cache(f)  # no copy outside the group serves it
        in_group(cgs, "cat", f, ">", "/dev/null")  # into the cache, charged to the group
    jobs = [Job(cgs, f, seconds, 0) for f in files]
    for j in jobs:
        j.first_report()
    write(os.path.join(blk_cg, "blkio.throttle.read_bps_device"),
          f"{_disk_of(files[0])} {RATE << 20}\n")
    write(os.path.join(mem_cg, "memory.limit_in_bytes"),
          str(group_rss(mem_cg) + (BUDGET << 20)))
    return jobs, time.time()


def own_step(reports: list[dict], after: float) -> float:
    steps = sorted(r["recent_step_s"] for r in reports if r["t"] > after)
    return steps[len(steps) // 2]


def mean_step(reports: list[dict], lo: float, hi: float = float("inf")) -> float:
    """The script's mean step between `lo` and `hi`, from its own step counts and times (its
    throughput: a step that re-reads many evicted pages counts for its whole length, where the
    median of its steps leaves the long ones out)."""
    rs = [r for r in reports if lo <= r["t"] <= hi]
    assert len(rs) >= 2, "fewer than two reports in the window"
    return (rs[-1]["t"] - rs[0]["t"]) / (rs[-1]["step"] - rs[0]["step"])


@pytest.mark.shares_box("its jobs' reads in cgroups of their own, judged by pid; 6 of 6 passed "
                        "beside two busy loops, 3 of them with a training script too")
def test_two_jobs_whose_data_no_longer_fits_together_are_memory_bound(tmp_path):
    why = why_not(str(tmp_path))
    if why:
        pytest.skip(why)
    files = [str(tmp_path / f"{n}.bin") for n in "ab"]
    for f in files:
        make(f, SIZE)
    cgs = [os.path.join(MEMORY, f"gputop-dl-test-{os.getpid()}"),
           os.path.join(BLKIO, f"gputop-dl-mtest-{os.getpid()}")]
    for cg in cgs:
        os.makedirs(cg, exist_ok=True)
    jobs: list[Job] = []
    try:
        jobs, t_solo = start(files[:1], cgs, 6)
        solo_reports = jobs[0].finish()
        solo = own_step(solo_reports, t_solo + 1)  # its file fits: cache hits
        solo_mean = mean_step(solo_reports, t_solo + 1)
        jobs, t_set = start(files, cgs, 90)  # killed once the judge has looked
        # wait for the event: the group has re-read a file's worth of evicted pages
        deadline = time.monotonic() + 60
        base = refaults(cgs[0])
        while refaults(cgs[0]) - base < (SIZE << 20) // 4096 and time.monotonic() < deadline:
            time.sleep(0.2)
        env = dict(os.environ, PYTHONPATH=ROOT)
        t0 = time.time()
        # the pair alone (--pid): other tests' jobs may train beside it (it shares the box)
        diag = subprocess.run([sys.executable, "-m", "gputop_dl", "diagnose", "--no-probe",
                               "--json", "--seconds", "18",
                               "--pid", ",".join(str(j.pid) for j in jobs)],
                              capture_output=True, text=True, timeout=120, env=env)
        assert diag.returncode == 0, diag.stderr
        found = json.loads(diag.stdout)
        for j in jobs:
            j.kill()
        own = [j.finish() for j in jobs]
    finally:
        for j in jobs:
            j.kill()
        for cg in cgs:
            for _ in range(50):  # a cgroup goes once its last process has gone
                try:
                    os.rmdir(cg)
                    break
                except OSError:
                    time.sleep(0.1)
    # the setup itself: alone its file fits; together each waits on re-reads. Truth: each
    # script's mean step while the judge looked over its mean step alone (its throughput); the
    # median of its steps (printed beside) leaves out the steps that re-read most and read
    # 1.43x where the mean said 1.87x (docs/benchmarks.md)
    truths = {j.pid: mean_step(rep, t0, t0 + JUDGED_S) / solo_mean for j, rep in zip(jobs, own)}
    medians = {j.pid: statistics_median([r["recent_step_s"] for r in rep
                                         if t0 <= r["t"] <= t0 + JUDGED_S]) / solo
               for j, rep in zip(jobs, own)}
    v = found["verdict"]
    ev = v.get("evidence") or {}
    brief = [(j["name"], j.get("slowdown"), (ev.get("io_wait") or {}).get(j["name"]),
              (ev.get("memory_wait") or {}).get(j["name"]),
              (ev.get("refault_share") or {}).get(j["name"])) for j in v.get("jobs") or []]
    ests = {j["pid"]: j["slowdown"] for j in found["jobs"] if j["name"].startswith("disk_reader.py")}
    print(f"\nMEM-PAIR solo {solo_mean:.3f}s truth {truths} (medians {medians}) est {ests} "
          f"kind {v['kind']} brief {brief}")
    # the pair about 1.3x or more, each slowed (their split of the re-reads is uneven: one run
    # was 1.23x and 1.83x, each estimate within 13 % of its own)
    assert sum(truths.values()) / len(truths) >= 1.3, truths
    assert all(t > 1.1 for t in truths.values()), (solo, truths, v["kind"], brief)
    assert v["kind"] == "memory-bound", f"{v['kind']}: {brief}; {v['reason'][:300]}"
    assert "no longer fits in the page cache" in v["reason"]
    assert sorted(ests) == sorted(truths)
    for pid, s in ests.items():
        assert abs(s - truths[pid]) / truths[pid] <= 0.25, (ests, truths)


def statistics_median(xs: list[float]) -> float:
    xs = sorted(xs)
    assert xs, "no step reported while the judge looked"
    return xs[len(xs) // 2]
