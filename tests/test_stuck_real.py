"""Stuck, not slow, with real jobs: a hung loader is called stuck and named; a busy pause and a
slow loop are not; the alerts reach a loopback webhook and a command once."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from gputop_dl.collect.pyspy import run as pyspy
from gputop_dl.collect.nvml.gpus import Nvml
from gputop_dl.present.report.document import session_json
from gputop_dl.record.store import Store
from gputop_dl.runner.alerts import Alerter
from gputop_dl.runner.engines import launch_engine, open_spec
from tests.conftest import write
from tests.fakes.orphan import orphan_shell
from tests.schema_check import check

# hangs and alerts, timed in seconds (a threshold of 3 s, called within it + 10 s): no slowdown
# or contention is measured, so these need not hold the box alone (tests/conftest.py)
pytestmark = [pytest.mark.shares_box("hangs and alerts, timed in seconds"),
              pytest.mark.skipif(pyspy.pyspy_path() is None, reason="py-spy is not installed")]

JOBS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "stuck_jobs.py")
STUCK_AFTER = 3.0  # seconds: the threshold's floor in these tests (60 by default)


def job_file(tmp_path, *args, mark=None):
    argv = [sys.executable, JOBS, *map(str, args)]
    if args[0] == "ddp":  # two ranks on gloo
        argv = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                JOBS, *map(str, args)]
    return write(tmp_path, "w.toml", '[session]\nname = "stuck"\ninterval = 0.5\n'
                 'baseline = "none"\n[[workload]]\nname = "job"\nwarmup_steps = 1\n'
                 f'command = {json.dumps(argv)}\n'
                 + (f'env = {{STUCK_JOBS_MARK = {json.dumps(str(mark))}}}\n' if mark else ''))


class Watch:
    """A launch engine over one job, its snapshots kept; stopped (and its job) on exit."""

    def __init__(self, tmp_path, *args, alerter=None):
        nvml = Nvml()
        self.mark = tmp_path / "hung-at"  # the wall times the job wrote as it hung
        self.engine = launch_engine(open_spec(job_file(tmp_path, *args, mark=self.mark), nvml),
                                    nvml, stuck_after=STUCK_AFTER)
        self.rows, self.walls, self.t0 = [], [], None
        self.engine.subscribe(self._take)
        if alerter is not None:
            self.engine.subscribe(alerter)

    def _take(self, snap):
        for j in snap.jobs:
            if j.launched:
                self.rows.append((time.monotonic(), j))
                self.walls.append(snap.time)

    def wall_of(self, row):
        """The snapshot time of a row `until` returned."""
        return next(w for r, w in zip(reversed(self.rows), reversed(self.walls)) if r is row)

    def hung_at(self):
        """The wall time the job wrote as it hung (None: not yet)."""
        return float(self.mark.read_text().split()[0]) if self.mark.exists() else None

    def __enter__(self):
        self.t0 = time.monotonic()
        self.engine.start()
        return self

    def __exit__(self, *exc):
        self.engine.request_stop()
        assert self.engine.join(30)

    def until(self, pred, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            running = self.engine.running  # before the look: its last snapshot is then in
            if self.rows and pred(self.rows[-1][1]):
                return self.rows[-1]
            if not running:
                return None
            time.sleep(0.1)
        return None


def denied(w):
    return w.engine.stuck.denied is not None


def test_a_loader_whose_worker_sleeps_is_stuck_and_named(tmp_path):
    with Watch(tmp_path, "loader-hang", 20) as w:
        got = w.until(lambda j: j.status == "stuck", 60)
        if got is None and denied(w):
            pytest.skip(f"py-spy may not read the job here: {w.engine.stuck.denied}")
        assert got is not None, [(round(t - w.t0, 1), j.status, j.step) for t, j in w.rows[-5:]]
        t, j = got
        st = j.stuck
        assert st.where == "dataloader" and st.frame.startswith("stuck_jobs.py:")
        assert st.worker_pid in j.pids and "__getitem__" in st.worker_frame
        assert st.threshold_s >= STUCK_AFTER and st.for_s >= st.threshold_s
        assert st.dumps >= 2 and st.progress == "steps"
        # called within threshold + 10 s of the moment it hung
        assert 0 < w.wall_of(got) - w.hung_at() <= st.threshold_s + 10, w.wall_of(got) - w.hung_at()
        sid = w.engine.session_id
    store = Store(readonly=True)
    try:
        evs = store.events(sid, job="job", ev="stuck")
        doc = session_json(store, sid)  # the export: when it stopped and where
    finally:
        store.close()
    assert len(evs) == 1 and evs[0]["where"] == "dataloader" and evs[0]["since"] > 0
    told = [e for e in doc["events"] if e["ev"] == "stuck" and e["job"] == "job"]
    assert len(told) == 1 and told[0]["data"]["where"] == "dataloader"
    assert "DataLoader" in told[0]["text"]


def test_a_stack_dump_in_flight_when_the_session_ends_does_not_outlive_it(tmp_path, monkeypatch):
    """py-spy stood in for by a script that writes its PID, then waits 2 s before it runs the
    real one: the session is stopped while it waits, and when the engine has ended neither it
    nor a py-spy it started is left."""
    started = tmp_path / "dumps"
    slow = tmp_path / "slow-py-spy"
    slow.write_text(f'#!/bin/sh\necho $$ >> "{started}"\nsleep 2\nexec "{pyspy.pyspy_path()}" "$@"\n')
    slow.chmod(0o755)
    monkeypatch.setattr(pyspy, "pyspy_path", lambda: str(slow))
    with Watch(tmp_path, "lock", 10) as w:
        deadline = time.monotonic() + 60
        while not started.exists() and time.monotonic() < deadline and w.engine.running:
            time.sleep(0.05)  # until the first dump has begun
        assert started.exists(), "no dump began"
        w.engine.request_stop()
        assert w.engine.join(30)
        for pid in map(int, started.read_text().split()):
            with pytest.raises(ProcessLookupError):
                os.kill(pid, 0)  # gone, and reaped


def test_a_ddp_rank_that_stops_leaves_the_other_in_the_collective(tmp_path):
    """Two ranks on gloo; after 10 steps rank 1 sleeps in its own code: rank 0 waits in the
    all-reduce, and rank 1 is named as the one not in it."""
    with Watch(tmp_path, "ddp", 10) as w:
        got = w.until(lambda j: j.status == "stuck", 90)
        if got is None and denied(w):
            pytest.skip(f"py-spy may not read the job here: {w.engine.stuck.denied}")
        assert got is not None, [(round(t - w.t0, 1), j.status, j.step) for t, j in w.rows[-5:]]
        t, j = got
        st = j.stuck
        ranks = {r.rank: r.pid for r in j.distributed.ranks}
        assert st.where == "collective" and st.pid == ranks[0]
        assert st.frame.startswith("stuck_jobs.py:") and st.frame.endswith(" ddp")
        assert [r for r, _ in st.missing_ranks] == [1]
        assert st.missing_ranks[0][1].endswith("rank_work_that_never_ends")
        assert 0 < w.wall_of(got) - w.hung_at() <= st.threshold_s + 10, w.wall_of(got) - w.hung_at()


def test_a_busy_checkpoint_without_steps_is_not_stuck(tmp_path):
    with Watch(tmp_path, "checkpoint", 40, 9) as w:
        ended = w.until(lambda j: j.status in ("done", "failed"), 60)
        assert ended is not None and ended[1].status == "done"
        assert not any(j.status == "stuck" for _, j in w.rows)
        # it did stand without a step for longer than the threshold
        ages = [j.progress_age_s for _, j in w.rows if j.progress_age_s is not None]
        assert ages and max(ages) > 2 * STUCK_AFTER


def test_a_slow_loop_is_not_stuck(tmp_path):
    """Steps asleep (no CPU, the same stack) of 1.5 s, every 4th of 4.5 s: past the 3 s floor,
    but not past 10 times its step time."""
    with Watch(tmp_path, "slow", 8, 4.5) as w:
        ended = w.until(lambda j: j.status in ("done", "failed"), 60)
        assert ended is not None and ended[1].status == "done"
        assert not any(j.status == "stuck" for _, j in w.rows)


class Hook(BaseHTTPRequestHandler):
    got: list = []

    def do_POST(self):  # noqa: N802 - http.server's name
        n = int(self.headers.get("Content-Length", 0))
        Hook.got.append(json.loads(self.rfile.read(n)))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_a_lock_deadlock_is_told_once_to_a_webhook_and_a_command(tmp_path):
    server = HTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    out = tmp_path / "alerts.jsonl"
    cmd = [sys.executable, "-c", "import os, sys; open(sys.argv[1], 'a').write("
           "sys.stdin.read().strip() + ' ' + os.environ['GPUTOP_DL_EVENT'] + '\\n')", str(out)]
    Hook.got = []
    alerter = Alerter(cmd, f"http://127.0.0.1:{server.server_port}/hook")
    try:
        with Watch(tmp_path, "lock", 10, alerter=alerter) as w:
            got = w.until(lambda j: j.status == "stuck", 60)
            if got is None and denied(w):
                pytest.skip(f"py-spy may not read the job here: {w.engine.stuck.denied}")
            assert got is not None and got[1].stuck.where == "lock"
            n = len(w.rows)
            w.until(lambda j: len(w.rows) > n + 6, 10)  # more ticks, still stuck: no new event
        alerter.close(20)
    finally:
        server.shutdown()
    ours = [check(e) for e in Hook.got if e["job"] == "job"]  # (the box's other jobs may hang)
    assert len(ours) == 1 and ours[0]["event"] == "stuck"
    assert ours[0]["stuck"]["where"] == "lock" and "stuck" in ours[0]["text"]
    lines = [json.loads(ln.rsplit(" ", 1)[0]) | {"env": ln.rsplit(" ", 1)[1]}
             for ln in out.read_text().splitlines()]
    ours = [e for e in lines if e["job"] == "job"]
    assert len(ours) == 1 and ours[0]["env"] == "stuck" and ours[0]["stuck"]["where"] == "lock"


class Detached:
    """A process this one did not start (re-parented to init): its PID and whether it runs."""

    def __init__(self, pid: int):
        self.pid = pid

    def ppid(self) -> int:
        with open(f"/proc/{self.pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])

    def poll(self) -> int | None:
        try:
            with open(f"/proc/{self.pid}/stat") as f:
                return None if f.read().rsplit(")", 1)[1].split()[0] not in "ZX" else 0
        except OSError:
            return 0


def once_json():
    out = subprocess.run([sys.executable, "-m", "gputop_dl", "--once", "--json"],
                         capture_output=True, text=True, timeout=120, check=True)
    return json.loads(out.stdout)


@pytest.mark.parametrize("args,stuck", [(("loader-hang", 20), True),
                                        (("checkpoint", 5, 60), False)])
def test_once_judges_over_its_own_window(args, stuck, tmp_path):
    """A found job: `--once` calls the hung loader stuck over its window (and says how long),
    never the busy checkpoint."""
    # started as from a shell: not a child of this test process (an xdist worker that imported
    # torch is a found job itself, and a torch process's torch child counts as its worker), in
    # its own session (a loader worker asleep in __getitem__ outlives its parent)
    err = tmp_path / "job.err"
    line = " ".join(map(str, [sys.executable, JOBS, *args]))
    _, pid = orphan_shell(f'setsid {line} >/dev/null 2>{err} & echo "pid $!"')
    assert Detached(pid).ppid() != os.getpid()  # re-parented to init, as from a login shell
    p = Detached(pid)
    try:
        deadline, got, seen = time.monotonic() + 60, None, []
        while time.monotonic() < deadline:
            time.sleep(3)
            snap = once_json()
            job = next((j for j in snap["jobs"] if j["pid"] == p.pid), None)
            if job is None:  # not found yet (importing torch)
                seen = [(j["pid"], j["name"], j.get("found_by")) for j in snap["jobs"]]
                seen.append(snap.get("notes"))
                continue
            got = job
            if job["status"] == "stuck" or (not stuck and time.monotonic() > deadline - 45):
                break
        if got is None:  # what ran, what --once saw, what the job said
            import psutil

            tree = ([(q.pid, q.name(), q.status()) for q in
                     psutil.Process(p.pid).children(recursive=True)] if p.poll() is None else None)
            raise AssertionError((p.pid, p.poll(), tree, seen, err.read_text()[-2000:]))
        assert (got["status"] == "stuck") == stuck, got["status"]
        if stuck:
            st = got["stuck"]
            assert st["where"] == "dataloader" and 2 <= st["window_s"] <= 15
            assert st["worker_pid"] in got["pids"]
        else:
            assert got["stuck"] is None and got["cpu_cores"] > 0.1
    finally:
        os.killpg(p.pid, signal.SIGKILL)


@pytest.fixture
def users():
    from tests.fakes.users import Users, why_not

    why = why_not()
    if why:
        pytest.skip(why)
    u = Users.make()
    yield u
    u.close()


def test_without_root_a_users_own_hang_is_stuck_and_anothers_is_not_judged(users):
    """As the job's own user (no root), `--once` dumps its stacks and calls it stuck; another
    user's py-spy may not attach, so nothing is called stuck and the snapshot goes on."""
    gputop = os.path.join(os.path.dirname(sys.executable), "gputop-dl")
    with open(JOBS) as f:
        job = users.write("stuck_jobs.py", f.read())
    users.popen("alice", [sys.executable, job, "loader-hang", "20"])

    def alices(who):
        out = users.run(who, [gputop, "--once", "--json"], timeout=120)
        assert out.returncode == 0, out.stderr
        return next((j for j in json.loads(out.stdout)["jobs"]
                     if j["user"] == "gputopdl_alice" and "stuck_jobs.py" in (j["cmdline"] or "")),
                    None)

    deadline, got = time.monotonic() + 90, None
    while time.monotonic() < deadline and (got is None or got["status"] != "stuck"):
        time.sleep(3)
        got = alices("alice")
    assert got is not None and got["status"] == "stuck", got and got["status"]
    assert got["stuck"]["where"] == "dataloader" and "__getitem__" in got["stuck"]["worker_frame"]
    seen = alices("bob")
    assert seen is not None and seen["status"] == "running" and seen["stuck"] is None
