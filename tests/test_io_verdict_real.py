"""The disk case end to end: two plain scripts that read their samples from one slow disk, started by
hand, run about twice as slow together; `gputop-dl --once --json` must call them I/O-bound and
name the filesystem, and the live judge (`diagnose --no-probe`, a few ticks) must estimate each
one's slowdown within 25 % of the scripts' own ratio (mean step together over alone).

The disk is made slow for them alone: both run in one cgroup whose reads are throttled
(cgroup v1 `blkio.throttle.read_bps_device`), and they read with O_DIRECT so the page cache
cannot hide the device. Needs root and the v1 blkio controller (CI's machine has both); the
skip says which is missing elsewhere.
"""

import contextlib
import json
import os
import statistics
import subprocess
import sys
import time

import pytest

from gputop_dl.engine.diagnose_plan import NO_PROBE_OBSERVE_S
from tests.external.data_file import make
from tests.fakes.orphan import orphan_shell
from tests.schema_check import check

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "tests", "external", "disk_reader.py")
BLKIO = "/sys/fs/cgroup/blkio"
RATE = 4 << 20  # bytes/s the two share: one 1 MiB step takes ~0.25 s alone, ~0.5 s together
# the seconds after `diagnose --no-probe` starts that its estimate is made of: its start-up and
# its observe phase (the py-spy burst after it is not in the estimate). The pair's split of
# the disk drifts: in one run a job read 41 % of the pair's bytes while the judge looked
# (estimate 2.36x) and ran 1.74x slower over the whole 19 s of diagnose
JUDGED_S = 3 + NO_PROBE_OBSERVE_S


def _disk_of(path: str) -> str | None:
    """'MAJ:MIN' of the whole disk a file is on (throttling takes disks, not partitions)."""
    dev = os.stat(path).st_dev
    sys_dev = f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}"
    if not os.path.exists(sys_dev):
        return None  # not a block device (overlay, tmpfs, NFS)
    if os.path.exists(os.path.join(sys_dev, "partition")):
        with open(os.path.join(sys_dev, "..", "dev"), encoding="ascii") as f:
            return f.read().strip()
    return f"{os.major(dev)}:{os.minor(dev)}"


def remove_cgroup(cg: str) -> None:
    """rmdir a cgroup once its last process has gone (they leave it as they exit)."""
    for _ in range(50):
        try:
            os.rmdir(cg)
            return
        except OSError:
            time.sleep(0.1)


@contextlib.contextmanager
def throttled_cgroup(data: str, rate_bps: int, tag: str):
    """A blkio cgroup whose reads from `data`'s disk are throttled to `rate_bps`, removed
    after."""
    cg = os.path.join(BLKIO, f"gputop-dl-{tag}-{os.getpid()}")
    os.makedirs(cg, exist_ok=True)
    try:
        with open(os.path.join(cg, "blkio.throttle.read_bps_device"), "w") as f:
            f.write(f"{_disk_of(data)} {rate_bps}\n")
        yield cg
    finally:
        remove_cgroup(cg)


def _why_not(data_dir: str) -> str | None:
    if os.geteuid() != 0:
        return "needs root to throttle a cgroup's reads"
    if not os.path.exists(os.path.join(BLKIO, "blkio.throttle.read_bps_device")):
        return "needs the cgroup v1 blkio controller with throttling (mounted at /sys/fs/cgroup/blkio)"
    if _disk_of(data_dir) is None:
        return "the temporary directory is not on a block device (tmpfs, overlay or network)"
    return None


class Reader:
    """A copy of the script started as a user would from a shell: not a child of this test
    process. Under xdist the test runs in a worker that has imported torch, and a training
    script started below a torch process is one of its loader workers to the discovery, so
    the shell that starts it exits and the script is re-parented (its stdout still comes
    here)."""

    def __init__(self, cg: str, data: str, *args: str):
        cmd = (f'echo $$ > {cg}/cgroup.procs || exit 1; "{sys.executable}" "{SCRIPT}" '
               f'--file "{data}" ' + " ".join(args) + ' & echo "pid $!"')
        self.sh, self.pid = orphan_shell(cmd, cwd=os.path.dirname(data))
        self.stdout = self.sh.stdout

    def alive(self) -> bool:
        try:
            os.kill(self.pid, 0)
            return True
        except ProcessLookupError:
            return False

    def kill(self) -> None:
        try:
            os.kill(self.pid, 9)
        except ProcessLookupError:
            pass


def _start(cg: str, data: str, *args: str) -> Reader:
    return Reader(cg, data, *args)


def _reports(p: Reader) -> list[dict]:
    out = p.stdout.read()  # until the script's end closes its stdout
    deadline = time.monotonic() + 30
    while p.alive() and time.monotonic() < deadline:  # a zombie is reaped by init
        time.sleep(0.05)
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


@pytest.mark.shares_box("its jobs' reads in a cgroup of their own, judged by pid; 3 of 3 passed "
                        "beside two busy loops and a training script")
def test_two_jobs_on_one_throttled_disk_are_io_bound_with_their_slowdowns(tmp_path):
    why = _why_not(str(tmp_path))
    if why:
        pytest.skip(why)
    data = str(tmp_path / "shard.bin")
    make(data, 64)
    cg = os.path.join(BLKIO, f"gputop-dl-test-{os.getpid()}")
    os.makedirs(cg, exist_ok=True)
    procs: list[Reader] = []
    try:
        with open(os.path.join(cg, "blkio.throttle.read_bps_device"), "w") as f:
            f.write(f"{_disk_of(data)} {RATE}\n")
        solo_reports = _reports(_start(cg, data, "--steps", "14", "--report-every", "2"))
        solo = solo_reports[-1]
        # its mean step alone (each report is the mean of its 2 steps; the first: warm-up)
        solo_mean = statistics.mean(r["recent_step_s"] for r in solo_reports[1:]
                                    if "recent_step_s" in r)
        # until killed (a fixed 30 s once ran out before `diagnose` had looked, on a busy box,
        # and `--once` then found neither): their step times together are the reports they
        # print while gputop-dl looks
        procs = [_start(cg, data, "--seconds", "600", "--report-every", "2") for _ in range(2)]
        # wait for the event: each script has reported 3 times (6 steps) together, so that
        # the host's I/O pressure (a 10 s average) has risen with them
        early: dict[int, list[float]] = {}  # the reports read here count in the truth too
        for p in procs:
            for _ in range(3):
                line = p.stdout.readline()
                assert line.startswith("{"), line
                early.setdefault(p.pid, []).append(json.loads(line)["recent_step_s"])
        env = dict(os.environ, PYTHONPATH=ROOT)
        once = subprocess.run([sys.executable, "-m", "gputop_dl", "--once", "--json"],
                              capture_output=True, text=True, timeout=60, env=env)
        assert once.returncode == 0, once.stderr
        snap = check(json.loads(once.stdout))
        # the live judge over several ticks: the figures to check; --once judges one second,
        # whose read rates scatter by a quarter on a busy box. `diagnose --no-probe` observes a
        # third of --seconds, at most 6 s: 18 gives its judge 6 ticks (10 gave it 3, whose
        # share of the disk drifted from the pair's over the seconds their truth spans)
        t0 = time.time()
        # the pair alone (--pid): other tests' jobs may train beside it (it shares the box)
        diag = subprocess.run([sys.executable, "-m", "gputop_dl", "diagnose", "--no-probe",
                               "--json", "--seconds", "18",
                               "--pid", ",".join(str(p.pid) for p in procs)],
                              capture_output=True, text=True, timeout=120, env=env)
        assert diag.returncode == 0, diag.stderr
        found = check(json.loads(diag.stdout))
        for p in procs:
            p.kill()
        later = {p.pid: [r for r in _reports(p) if "recent_step_s" in r] for p in procs}
        own = {p.pid: statistics.median(early[p.pid][1:] + [  # the first: warm-up
                   r["recent_step_s"] for r in later[p.pid]]) for p in procs}
        window = {pid: [r["recent_step_s"] for r in rs if t0 <= r["t"] <= t0 + JUDGED_S]
                  for pid, rs in later.items()}
    finally:
        for p in procs:
            p.kill()
        remove_cgroup(cg)
    # --once: the readings (one second of them: its verdict may waver on a busy box, so the
    # verdict is checked on the live judge below)
    readers = [j for j in snap["jobs"] if j["pid"] in own]  # not another test's readers
    assert len(readers) == 2
    for j in readers:
        assert j["io_device_label"] and j["io_read_bytes_per_s"] > 0, j
    # each job against its own ratio (the pair's split of the disk is uneven and drifts: one
    # run's whole-run ratios were 1.99 and 1.53), over the span the judge looked at
    whole = {pid: o / solo["median_step_s"] for pid, o in own.items()}
    assert all(len(w) >= 3 for w in window.values()), window
    # truth: each job's mean step while the judge looked over its mean step alone (each report
    # is the mean of its 2 steps): its throughput, as the estimate is (a share of time), and as
    # the memory pair's test takes it; the medians (printed beside) leave the long steps out
    # and read +31 % below an estimate the mean put at +19 % (docs/benchmarks.md)
    truths = {pid: statistics.mean(w) / solo_mean for pid, w in window.items()}
    medians = {pid: round(statistics.median(w) / solo["median_step_s"], 3)
               for pid, w in window.items()}
    v = found["verdict"]
    psi = (v.get("evidence") or {}).get("io_pressure_some10")
    ev = v.get("evidence") or {}
    brief = [(j["name"], j.get("slowdown"), (ev.get("io_wait") or {}).get(j["name"]),
              (ev.get("io_read_bytes_per_s") or {}).get(j["name"])) for j in v.get("jobs") or []]
    ests = {j["pid"]: j["slowdown"] for j in found["jobs"] if j["name"].startswith("disk_reader.py")}
    print(f"\nIO-PAIR solo {solo_mean:.3f}s truth {truths} medians {medians} whole run {whole} "
          f"est {ests} kind {v['kind']} PSI {psi} brief {brief}")
    # the setup itself: the pair about 2x (each job's part of that is its share of the disk)
    # (beside two busy loops on the 2 cores: 2.54, the step times' spread wider; the means
    # while the judge looked, the truth below, 2.00 and 1.98)
    assert 1.5 <= statistics.mean(whole.values()) <= 3.0, whole
    assert v["kind"] == "io-bound", f"{v['kind']}: PSI io {psi}; {brief}; {v['reason'][:200]}"
    assert "wait on reads from" in v["reason"]
    assert sorted(ests) == sorted(truths)
    for pid, s in ests.items():
        assert abs(s - truths[pid]) / truths[pid] <= 0.25, (ests, truths)
