"""Jobs that span nodes: the workload keys, torchrun's c10d argv, the node leader's reports, the
ranks read from each rank's environment, and the real thing: two `gputop-dl launch` processes on
this machine as two "nodes" that meet at a c10d rendezvous on 127.0.0.1 (gloo on the CPU)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gputop_dl.injob.channel import rank_info, reports_here
from gputop_dl.analyse.live.distributed import group_distributed
from gputop_dl.collect.fleet.nodes import read_fleet
from gputop_dl.collect.proc.procs import TreeSample
from gputop_dl.collect.jobs.ranks import RankReader, rank_cpu
from gputop_dl.config import ConfigError, default_rdzv_id, load_session
from gputop_dl.control.launch import build_argv
from gputop_dl.present.report.document import session_json
from gputop_dl.present.report.markdown import render_markdown
from gputop_dl.record.store import Store
from gputop_dl.snapshot import RankProc
from gputop_dl.workload import Workload

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = os.path.dirname(sys.executable)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write(tmp_path, body: str, name: str = "w.toml") -> str:
    p = tmp_path / name
    p.write_text(body)
    return str(p)


# --- the workload keys ------------------------------------------------------------------------

@pytest.mark.parametrize("keys,says", [
    ('nnodes = 0', "key 'nnodes' (line 3): nnodes = 0, expected a positive integer"),
    ('nnodes = 2', "key 'nnodes' (line 3): nnodes = 2 without rdzv_endpoint, expected "
                   'rdzv_endpoint = "HOST:PORT"'),
    ('nnodes = 2\nrdzv_endpoint = "127.0.0.1"', "key 'rdzv_endpoint' (line 4): rdzv_endpoint "
                                                 '= "127.0.0.1" is not HOST:PORT'),
    ('nnodes = 2\nrdzv_endpoint = "h:70000"', "is not HOST:PORT, expected HOST:PORT of the "
                                               "rendezvous"),
    ('rdzv_endpoint = "h:29400"', "key 'rdzv_endpoint' (line 3): rdzv_endpoint with nnodes = 1, "
                                  "expected nnodes = 2 or more"),
    ('nnodes = 2\nrdzv_endpoint = "h:1"\nrdzv_id = "a b"', "key 'rdzv_id' (line 5): rdzv_id = "
                                                           '"a b" has characters other than'),
    ('nnodes = 2\nrdzv_endpoint = "h:1"\ncommand = ["torchrun", "train.py"]',
     "command starts \"torchrun\" with nnodes = 2: gputop-dl runs torchrun itself"),
])
def test_bad_multinode_keys_are_one_line_naming_file_and_key(tmp_path, keys, says):
    path = write(tmp_path, f'[[workload]]\nname = "ddp"\n{keys}\n')
    with pytest.raises(ConfigError) as e:
        load_session(path, gpu_count=0)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"{path}: [[workload]] 'ddp'") and says in msg, msg


def test_a_command_job_across_nodes_without_torchrun_is_one_line_and_exit_2(tmp_path):
    """gputop-dl itself may run from a light install: with no torchrun for the job and no torch
    here, `launch` says so in one line before anything starts."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    os.symlink("/bin/sh", bin_ / "sh")
    path = write(tmp_path, '[[workload]]\nname = "ddp"\nnnodes = 2\nrdzv_endpoint = "h:1"\n'
                           f'command = ["sh", "-c", "true"]\nenv = {{ PATH = "{bin_}" }}\n')
    from gputop_dl.collect import extras
    orig = extras.missing
    extras.missing = lambda modules=extras.TRAIN_MODULES: list(modules)
    try:
        with pytest.raises(ConfigError) as e:
            load_session(path, gpu_count=0)
    finally:
        extras.missing = orig
    assert "nnodes = 2 needs torchrun to start the command's ranks, and there is none" in str(e.value)
    # the CLI: one line, exit 2 (a light install is played by `missing` saying "no torch")
    env = dict(os.environ, PYTHONPATH=ROOT, GPUTOP_DL_HOME=str(tmp_path / "home"),
               PATH=str(bin_))
    p = subprocess.run([sys.executable, "-c", "import gputop_dl.collect.extras as x; "
                        "x.missing = lambda m=x.TRAIN_MODULES: list(m); "
                        "from gputop_dl.cli import main; import sys; "
                        f"sys.exit(main(['launch', {path!r}, '--headless']))"],
                       capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 2, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and "needs torchrun" in p.stderr, p.stderr


def test_the_default_rdzv_id_is_the_same_for_the_same_file_on_every_node(tmp_path):
    body = '[[workload]]\nname = "ddp"\nnnodes = 2\nrdzv_endpoint = "10.0.0.1:29400"\n'
    a = load_session(write(tmp_path, body, "a.toml"), gpu_count=0).workloads[0]
    (tmp_path / "node2").mkdir()
    b = load_session(write(tmp_path, body, "node2/a.toml"), gpu_count=0).workloads[0]
    assert a.rdzv_id == b.rdzv_id == default_rdzv_id("ddp", body)
    assert a.rdzv_id.startswith("ddp-") and len(a.rdzv_id) == 14
    c = load_session(write(tmp_path, body + "epochs = 4\n", "c.toml"), gpu_count=0).workloads[0]
    assert c.rdzv_id != a.rdzv_id  # another file: another run
    own = load_session(write(tmp_path, body + 'rdzv_id = "mine"\n', "d.toml"), gpu_count=0)
    assert own.workloads[0].rdzv_id == "mine"
    assert load_session(write(tmp_path, '[[workload]]\nname = "x"\n', "e.toml"),
                        gpu_count=0).workloads[0].rdzv_id is None


# --- the argv ---------------------------------------------------------------------------------

def test_a_job_across_nodes_starts_under_torchrun_c10d_without_standalone():
    w = Workload(name="ddp", model="synthetic", nnodes=2, nproc=3, rdzv_endpoint="10.0.0.1:29400",
                 rdzv_id="run7")
    argv = build_argv(w, "/s/ddp.json", cuda=False)
    assert argv == [sys.executable, "-m", "torch.distributed.run", "--nnodes=2",
                    "--nproc-per-node=3", "--rdzv-backend=c10d",
                    "--rdzv-endpoint=10.0.0.1:29400", "--rdzv-id=run7",
                    "-m", "gputop_dl.injob.trainer", "/s/ddp.json"]
    # one node: unchanged
    one = build_argv(Workload(name="a", nproc=2), "/s/a.json", cuda=False)
    assert "--standalone" in one and not any(a.startswith("--rdzv") for a in one)


def test_a_command_job_across_nodes_runs_its_command_once_per_rank_under_its_torchrun(tmp_path):
    venv = tmp_path / "venv" / "bin"
    venv.mkdir(parents=True)
    for name in ("python", "torchrun"):
        (venv / name).write_text("#!/bin/sh\n")
        (venv / name).chmod(0o755)
    w = Workload(name="ddp", command=("python", "train.py"), nnodes=2, nproc=1,
                 rdzv_endpoint="h:29400", rdzv_id="r")
    argv = build_argv(w, "/s/x.json", cuda=False, env={"PATH": str(venv)})
    assert argv[0] == str(venv / "torchrun")  # beside the job's python, found on its PATH
    assert argv[1:] == ["--nnodes=2", "--nproc-per-node=1", "--rdzv-backend=c10d",
                        "--rdzv-endpoint=h:29400", "--rdzv-id=r", "--no-python", "python",
                        "train.py"]
    sh = w.with_(command=("python train.py | tee log",), shell=True)
    assert build_argv(sh, "/s/x.json", cuda=False, env={"PATH": str(venv)})[-4:] == [
        "--no-python", "/bin/sh", "-c", "python train.py | tee log"]
    # no torchrun on the job's PATH: this interpreter's torch.distributed.run (torch is here)
    bare = build_argv(w, "/s/x.json", cuda=False, env={"PATH": str(tmp_path)})
    assert bare[:3] == [sys.executable, "-m", "torch.distributed.run"]


# --- who reports, and the ranks of a tree ----------------------------------------------------

def test_the_first_rank_of_each_node_reports_with_its_global_rank():
    assert reports_here({}) and reports_here({"RANK": "0"}) and not reports_here({"RANK": "1"})
    node2 = {"RANK": "2", "LOCAL_RANK": "0", "WORLD_SIZE": "4", "GROUP_RANK": "1",
             "GROUP_WORLD_SIZE": "2", "TORCHELASTIC_RUN_ID": "r1"}
    assert reports_here(node2) and not reports_here(dict(node2, RANK="3", LOCAL_RANK="1"))
    assert rank_info(node2) == {"rank": 2, "local_rank": 0, "world_size": 4, "group_rank": 1,
                                "nnodes": 2, "run_id": "r1"}
    assert rank_info({"RANK": "x", "LOCAL_RANK": ""}) == {}  # unreadable: unknown, left out


def test_rank_reader_finds_the_ranks_under_the_agent_not_their_workers_and_caches():
    """agent 10 -> ranks 11, 12 (each with a loader worker that inherits RANK); 13 denies
    access (unknown, never an error); reads happen once per PID."""
    envs = {10: {}, 11: {"RANK": "2", "LOCAL_RANK": "0", "WORLD_SIZE": "4", "GROUP_RANK": "1",
                         "TORCHELASTIC_RUN_ID": "r"},
            12: {"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "4", "GROUP_RANK": "1",
                 "TORCHELASTIC_RUN_ID": "r"}, 13: None}
    envs[21], envs[22] = envs[11], envs[12]
    reads = []

    def read_env(pid):
        reads.append(pid)
        e = envs.get(pid)
        return None if e is None else rank_info(e)

    cmap = {10: [11, 12, 13], 11: [21], 12: [22]}
    r = RankReader(read_env)
    d = r.read(10, cmap)
    assert d.run_id == "r" and d.world_size == 4 and d.group_rank == 1 and d.nnodes is None
    assert d.ranks == (RankProc(2, 0, 11, 1), RankProc(3, 1, 12, 1))
    assert sorted(reads) == [10, 11, 12, 13]  # the workers 21, 22 are never read
    r.read(10, cmap)
    assert sorted(reads) == [10, 11, 12, 13]  # cached
    ts = TreeSample(pids=(10, 11, 12, 13, 21, 22), cpu_cores=2.0, rss=0, threads=6,
                    cpu_by_pid={10: 0.05, 11: 1.0, 21: 0.5, 12: 0.25, 22: 0.0})
    assert rank_cpu(d, ts, cmap) == ((2, 1.5), (3, 0.25))  # a rank with its loader workers
    assert rank_cpu(d, TreeSample(pids=(10,), cpu_cores=None, rss=0, threads=1), cmap) == ()
    assert r.read(10, {10: [13]}) is None  # the ranks ended: not distributed (any more)
    assert RankReader(read_env).read(99, {}) is None  # a vanished root


def test_a_process_caught_inside_exec_is_read_again():
    from gputop_dl.collect.jobs import ranks

    reads = iter([ranks.NOT_YET, {"rank": 0, "local_rank": 0, "world_size": 2}])
    r = RankReader(lambda pid: next(reads))
    assert r.read(10, {}) is None  # its environment read empty: not kept as "no rank"
    d = r.read(10, {})
    assert d is not None and d.ranks[0].pid == 10 and d.world_size == 2


def test_rank_reader_reads_real_processes(tmp_path):
    env = dict(os.environ, RANK="5", LOCAL_RANK="1", WORLD_SIZE="8", TORCHELASTIC_RUN_ID="x")
    p = subprocess.Popen(["sleep", "30"], env=env)
    try:
        # Popen can return while the child is still inside execve, its environment not yet in
        # place (it reads empty): wait for it, as a tick would read it again
        end = time.monotonic() + 30
        with open(f"/proc/{p.pid}/environ", "rb") as f:
            while not f.read() and time.monotonic() < end:
                f.seek(0)
                time.sleep(0.01)
        d = RankReader().read(os.getpid(), {os.getpid(): [p.pid]})
        assert d.ranks == (RankProc(5, 1, p.pid, None),) and d.world_size == 8
    finally:
        p.kill()
        p.wait()
    assert RankReader().read(p.pid, {}) is None  # gone: unknown, not an error


# --- the real thing ---------------------------------------------------------------------------

TWO_NODES = """\
[session]
name = "two-nodes"
interval = 0.25

[[workload]]
name = "ddp"
model = "synthetic"
input_size = 8
num_classes = 4
batch_size = 4
num_workers = 0
epochs = 2
steps_per_epoch = 80
warmup_steps = 2
step_device_ms = 20.0
nnodes = 2
nproc = 1
rdzv_endpoint = "127.0.0.1:{port}"
"""


def _scrape_ranks(err_path, seen: dict, stop: threading.Event) -> None:
    """Poll the node's /metrics (its URL printed on stderr) for the rank series while it runs."""
    url = None
    while not stop.is_set():
        if url is None:
            with open(err_path) as f:
                url = next((ln.split()[-1] for ln in f if "serving http" in ln), None)
        if url:
            try:
                with urllib.request.urlopen(url, timeout=2) as r:
                    text = r.read().decode()
                for fam in text_string_to_metric_families(text):
                    for s in fam.samples:
                        if s.labels.get("job_name") != "ddp":
                            continue
                        if s.name == "gputop_dl_job_rank_info":
                            seen.setdefault("rank", s.labels)
                        if s.name == "gputop_dl_job_info" and s.labels["run_id"]:
                            seen.setdefault("info", s.labels)
                if "rank" in seen and "info" in seen:
                    seen["address"] = url.split("/")[2]
                    return
            except OSError:
                pass
        time.sleep(0.1)


def run_two_nodes(tmp_path, wl: str, *args: str, watch=None) -> float:
    """Two `gputop-dl launch wl --headless *args`, one GPUTOP_DL_HOME each (node0, node1), and
    `watch(n, stderr path, stop)` in a thread beside each; both must exit 0. Seconds taken."""
    procs, threads = [], []
    stop = threading.Event()
    t0 = time.monotonic()
    for n in range(2):
        env = dict(os.environ, PYTHONPATH=ROOT, GPUTOP_DL_HOME=str(tmp_path / f"node{n}"),
                   PATH=PY + os.pathsep + os.environ.get("PATH", ""))
        out, err = (open(tmp_path / f"node{n}.{k}", "w") for k in ("out", "err"))
        with out, err:
            procs.append(subprocess.Popen([sys.executable, "-m", "gputop_dl", "launch", wl,
                                           "--headless", *args], env=env, stdout=out, stderr=err))
        if watch:
            threads.append(threading.Thread(target=watch, daemon=True,
                                            args=(n, tmp_path / f"node{n}.err", stop)))
    for t in threads:
        t.start()
    try:
        for p in procs:
            p.wait(timeout=120)
    finally:
        stop.set()
        for p in procs:
            if p.poll() is None:
                p.kill()
    for n, p in enumerate(procs):
        assert p.returncode == 0, (n, (tmp_path / f"node{n}.out").read_text()[-3000:],
                                   (tmp_path / f"node{n}.err").read_text()[-3000:])
    return time.monotonic() - t0


@contextlib.contextmanager
def node_session(tmp_path, n: int, name: str):
    """Node n's recorded session: (store, session id, the job's row)."""
    st = Store(str(tmp_path / f"node{n}" / "sessions.db"), readonly=True)
    try:
        sid = st.sessions()[0].id
        yield st, sid, next(j for j in st.jobs(sid) if j["name"] == name)
    finally:
        st.close()


@pytest.mark.shares_box("two nodes meet and report")
def test_two_nodes_on_one_machine_meet_at_c10d_and_each_records_its_rank_end_to_end(tmp_path):
    """Two `gputop-dl launch` processes, each its own GPUTOP_DL_HOME, the same file with
    nnodes = 2: both exit 0, the rendezvous formed (world size 2), node 0 records rank 0 and
    node 1 rank 1 under one run id, each node's leader reported step times, and each node's
    exporter showed its rank while the job ran, which the fleet view groups into one complete run."""
    wl = write(tmp_path, TWO_NODES.format(port=free_port()))
    seen, fleet = [{}, {}], []

    def watch(n, err, stop):
        _scrape_ranks(err, seen[n], stop)
        while n == 1 and not stop.is_set() and not fleet:  # the fleet view's reading of both
            addrs = [s.get("address") for s in seen]
            runs = group_distributed(read_fleet(addrs)) if all(addrs) else []
            # this test's run: the launches' job "ddp" (another test's torchrun may run too)
            mine = [r for r in runs if any(nd["job"] == "ddp" for nd in r["nodes"])]
            if mine and mine[0]["complete"]:
                fleet.append(mine[0])
            time.sleep(0.1)

    took = run_two_nodes(tmp_path, wl, "--metrics", "127.0.0.1:0", watch=watch)
    runs, steps, rank = set(), {}, {}
    for n in range(2):
        with node_session(tmp_path, n, "ddp") as (st, sid, job):
            d = job["info"]["distributed"]
            assert d["world_size"] == 2 and d["nnodes"] == 2, d
            # which launch is node 0 is the rendezvous's choice; one rank per node, local 0
            rank[n] = d["group_rank"]
            assert [(r["rank"], r["local_rank"]) for r in d["ranks"]] == [(rank[n], 0)], d
            runs.add(d["run_id"])
            started = st.events(sid, job="ddp", ev="started", phase="co-run")
            assert started[0]["rank"] == rank[n] and started[0]["world_size"] == 2
            steps[n] = [e["t_step"] for e in st.events(sid, job="ddp", ev="step")]
            assert len(steps[n]) == 160, len(steps[n])
            assert job["info"]["solo"] is None  # no solo baseline: never a made-up one
            v = st.session(sid).verdict
            assert v["evidence"]["no_solo"] == {"ddp": "spans 2 nodes: no solo baseline"}
            doc = session_json(st, sid)  # the export, JSON and Markdown
            assert doc["jobs"][0]["distributed"] == d
            md = render_markdown(doc)
            assert "## Distributed jobs" in md and f"| ddp | {d['run_id']} | 2 | {rank[n]} | 2 | " \
                f"{rank[n]} (local 0, pid {d['ranks'][0]['pid']}) |" in md, md
    assert len(runs) == 1 and next(iter(runs)).startswith("ddp-")
    assert sorted(rank.values()) == [0, 1]
    for n in range(2):
        assert seen[n].get("rank", {}).get("rank") == str(rank[n]), (n, seen[n])
        assert seen[n]["rank"]["world_size"] == "2" and seen[n]["rank"]["local_rank"] == "0"
        assert seen[n]["info"]["run_id"] in runs and seen[n]["info"]["world_size"] == "2"
    # the fleet view grouped the two nodes' ranks into one complete run
    assert fleet and fleet[0]["run_id"] in runs and fleet[0]["world_size"] == 2, fleet
    assert fleet[0]["ranks_seen"] == [0, 1] and fleet[0]["missing_ranks"] == []
    # each launch also lists the other's torchrun as a job found on this host (one host plays
    # both nodes here): the same rank processes count once, under the launch's own job
    assert sorted((nd["job"], nd["ranks"]) for nd in fleet[0]["nodes"]) == \
        [("ddp", [0]), ("ddp", [1])], fleet
    assert all(x["job"] != "ddp" for x in fleet[0]["duplicates"]), fleet
    med = {n: sorted(s)[len(s) // 2] for n, s in steps.items()}
    print(f"\ntwo nodes: {took:.1f} s in all; median step node0 {med[0] * 1000:.1f} ms, "
          f"node1 {med[1] * 1000:.1f} ms")
    assert took < 90


AR_SCRIPT = """\
import os, time, torch, torch.distributed as dist
from torch.utils.data import DataLoader, TensorDataset
dist.init_process_group("gloo")
data = DataLoader(TensorDataset(torch.ones(24, 2)), batch_size=2)
for epoch in range(2):
    for (x,) in data:
        t = x.sum().reshape(1)
        dist.all_reduce(t)
        time.sleep(0.01)
print("rank", os.environ["RANK"], "sum", float(t), flush=True)
dist.destroy_process_group()
"""


@pytest.mark.shares_box("two nodes meet and report")
def test_a_command_job_across_two_nodes_reports_from_each_node_end_to_end(tmp_path):
    """A user's own script (a gloo all_reduce loop over a DataLoader) under gputop-dl's
    torchrun with --no-python: each node's start-up hook reports its leader's steps."""
    (tmp_path / "ar.py").write_text(AR_SCRIPT)
    port = free_port()
    wl = write(tmp_path, f'[session]\ninterval = 0.25\nbaseline = "none"\n[[workload]]\n'
                         f'name = "ar"\ncommand = ["{sys.executable}", "ar.py"]\n'
                         f'nnodes = 2\nnproc = 1\nrdzv_endpoint = "127.0.0.1:{port}"\n'
                         'warmup_steps = 1\ncwd = "."\n')
    run_two_nodes(tmp_path, wl)
    ranks = []
    for n in range(2):
        with node_session(tmp_path, n, "ar") as (st, sid, job):
            argv = job["info"]["argv"]
            assert "--no-python" in argv and argv[-2:] == [sys.executable, "ar.py"]
            d = job["info"]["distributed"]
            ranks.append(d["group_rank"])
            assert [r["rank"] for r in d["ranks"]] == [ranks[-1]] and d["world_size"] == 2
            assert len(st.events(sid, job="ar", ev="step")) == 24  # 2 epochs of 12 batches
            started = st.events(sid, job="ar", ev="started")
            assert started[0]["rank"] == ranks[-1] and started[0]["run_id"] == d["run_id"]
            log = open(os.path.join(os.path.dirname(st.path), "sessions", sid, "ar.log")).read()
            assert f"rank {ranks[-1]} sum 8.0" in log
    assert sorted(ranks) == [0, 1]


def test_the_job_details_show_the_run_and_the_ranks_on_this_node():
    from gputop_dl.present.tui.job_detail import job_detail_lines
    from gputop_dl.snapshot import Distributed, JobSample

    d = Distributed(run_id="r1", world_size=4, nnodes=2, group_rank=1,
                    ranks=(RankProc(2, 0, 901, 1), RankProc(3, None, 902, 1)))
    text = job_detail_lines(JobSample(name="x", pid=900, launched=True, distributed=d), None).plain
    assert "run        r1 · node 1 of 2 · world size 4" in text
    assert "ranks here 2 (local 0, pid 901), 3 (local –, pid 902)" in text
    plain = job_detail_lines(JobSample(name="x", pid=900, launched=True), None).plain
    assert "ranks here" not in plain and "run " not in plain


def test_a_queue_refuses_a_job_across_nodes_in_one_line(tmp_path, capsys):
    from gputop_dl.cli import main

    path = write(tmp_path, '[[workload]]\nname = "ddp"\nmodel = "synthetic"\nnnodes = 2\n'
                           'rdzv_endpoint = "127.0.0.1:29400"\n')
    assert main(["queue", path, "--headless"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "[[workload]] 'ddp' key 'nnodes': nnodes = 2 in a " \
        "queue, expected jobs on this node only" in err, err


def test_a_found_torchrun_job_lists_its_ranks_from_their_environment(tmp_path):
    """A job gputop-dl did not start (a torchrun agent and two ranks, real processes in a
    faked /proc tree): its row carries the run and the ranks, read from the ranks' real
    environment, the same reader as for launched jobs."""
    from gputop_dl.collect.jobs.discover import Discoverer
    from gputop_dl.collect.jobs.found import FoundJobs

    from tests.fakes.procs import TORCH_MAPS, Clock, FakeProc
    agent = subprocess.Popen(["sleep", "60"])
    ranks = [subprocess.Popen(["sleep", "60"], env=dict(
        os.environ, RANK=str(r + 2), LOCAL_RANK=str(r), WORLD_SIZE="4", GROUP_RANK="1",
        GROUP_WORLD_SIZE="2", TORCHELASTIC_RUN_ID="found1")) for r in (0, 1)]
    try:
        fp = FakeProc(str(tmp_path / "proc"))
        fp.add(10, 1, ["bash"])
        fp.add(agent.pid, 10, ["python", "-m", "torch.distributed.run", "train.py"], TORCH_MAPS)
        for p in ranks:
            fp.add(p.pid, agent.pid, ["python", "train.py"], TORCH_MAPS)
        found = FoundJobs(stall=False, discoverer=Discoverer(fp.root, own_pid=1, clock=Clock()))
        found.refresh()
        found.sample()
        time.sleep(0.3)
        found.refresh()
        jobs, _ = found.sample()  # the second tick: CPU per rank (sleep uses next to none)
        (job,) = jobs
        assert [r for r, _ in job.rank_cpu_cores] == [2, 3]
        assert all(0 <= c < 0.2 for _, c in job.rank_cpu_cores)
        d = job.distributed
        assert job.pid == agent.pid and d.run_id == "found1" and d.world_size == 4
        assert (d.nnodes, d.group_rank) == (2, 1)
        assert d.ranks == (RankProc(2, 0, ranks[0].pid, 1), RankProc(3, 1, ranks[1].pid, 1))
    finally:
        for p in (agent, *ranks):
            p.kill()
            p.wait()
