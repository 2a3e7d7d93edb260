"""Memory: the collector on fake /proc and cgroup files, the page-cache model, and the
live verdict's `memory-bound` kind on hand-made samples (no process, no clock)."""

from dataclasses import replace

import pytest

from gputop_dl.analyse.live.memory_share import (MIN_REFAULT_BPS, UNKNOWN, domains, memory_lines,
                                            memory_shares, memory_slowdown)
from gputop_dl.analyse.live.passive import PassiveJudge
from gputop_dl.collect.proc.host import parse_vmstat_refaults, read_psi_some10
from gputop_dl.collect.proc.memory import (NO_CGROUP, PAGE, MemoryReader, memory_fields,
                                      parse_cgroup, parse_flat, refault_pages)
from gputop_dl.snapshot import HostSample, JobSample, Snapshot

MB = 1_000_000


# --- the collector ------------------------------------------------------------------------
def test_parse_cgroup_finds_the_v2_path_and_the_v1_memory_one():
    hybrid = b"9:name=systemd:/\n4:memory:/jobs/a\n3:cpu,cpuacct:/\n0::/user.slice/a.scope\n"
    assert parse_cgroup(hybrid) == ("/user.slice/a.scope", "/jobs/a")
    assert parse_cgroup(b"0::/\n") == ("/", None)
    assert parse_cgroup(b"5:cpuacct,memory:/x\nbroken\n") == (None, "/x")


def test_refaults_from_v1_and_v2_memory_stat_and_vmstat():
    v2 = b"anon 100\nfile 200\nworkingset_refault_anon 3\nworkingset_refault_file 42\n"
    assert refault_pages(v2, v1=False) == 42
    v1 = b"cache 1\nworkingset_refault_file 5\ntotal_workingset_refault_file 9"
    assert refault_pages(v1, v1=True) == 9  # the group and its children (no final newline)
    assert refault_pages(b"workingset_refault 7\n", v1=False) == 7  # before Linux 5.9
    assert refault_pages(b"anon 1\n", v1=False) is None
    assert refault_pages(b"workingset_refault_file x\n", v1=False) is None
    assert parse_flat(b"high 3\nmax 4\nbad\n") == {"high": 3, "max": 4}
    vm = b"nr_free_pages 1\nworkingset_nodes 0\nworkingset_refault_anon 0\nworkingset_refault_file 123\n"
    assert parse_vmstat_refaults(vm) == 123
    assert parse_vmstat_refaults(b"nr_free_pages 1\nworkingset_refault 8\n") == 8
    assert parse_vmstat_refaults(b"nr_free_pages 1\n") is None


def test_psi_memory_some_and_full():
    data = (b"some avg10=12.50 avg60=1.00 avg300=0.00 total=1\n"
            b"full avg10=3.00 avg60=0.00 avg300=0.00 total=1\n")
    assert read_psi_some10(read=lambda p: data) == 0.125
    assert read_psi_some10(read=lambda p: data, kind=b"full") == 0.03


class FakeCgroups:
    """/proc/PID/cgroup and a cgroup folder with memory files, v1 or v2."""

    def __init__(self, tmp, v1: bool, limit: str):
        self.proc, self.v2root, self.v1root = tmp / "proc", tmp / "cg", tmp / "cg1"
        (self.proc / "7").mkdir(parents=True)
        (self.proc / "7" / "cgroup").write_text(
            "4:memory:/jobs/a\n0::/\n" if v1 else "0::/jobs/a\n")
        self.dir = (self.v1root if v1 else self.v2root) / "jobs" / "a"
        self.dir.mkdir(parents=True)
        self.v1 = v1
        if v1:
            (self.dir / "memory.limit_in_bytes").write_text(limit)
        else:
            (self.dir / "memory.max").write_text(limit)
            (self.dir / "memory.high").write_text("max\n")
        self.set(0, 0)

    def set(self, refaults, hits):
        if self.v1:
            (self.dir / "memory.stat").write_text(
                f"cache 1\ntotal_workingset_refault_file {refaults}\n")
            (self.dir / "memory.failcnt").write_text(f"{hits}\n")
            (self.dir / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 0\n")
        else:
            (self.dir / "memory.stat").write_text(f"anon 1\nworkingset_refault_file {refaults}\n")
            (self.dir / "memory.events").write_text(
                f"low 0\nhigh 0\nmax {hits}\noom 0\noom_kill 0\noom_group_kill 0\n")

    def reader(self):
        return MemoryReader(7, proc=str(self.proc), cgroup_root=str(self.v2root),
                            v1_root=str(self.v1root), read=lambda p, *a: open(p, "rb").read())


@pytest.mark.parametrize("v1, limit", [(False, "104857600\n"), (True, "104857600\n")])
def test_reader_gives_the_groups_refault_rate_and_limit_events(tmp_path, v1, limit):
    fake = FakeCgroups(tmp_path, v1, limit)
    r = fake.reader()
    first = r.read(now=1.0)
    assert first.refault_bps is None and first.cgroup == ("v1:" if v1 else "") + "/jobs/a"
    assert first.limited is True
    fake.set(refaults=500, hits=30)
    m = r.read(now=3.0)  # the second reading (--once's): read
    assert m.refault_bps == pytest.approx(500 * PAGE / 2.0)
    fake.set(refaults=900, hits=40)
    assert r.read(now=4.0) == m  # then every other tick: the last reading in between
    assert dict(m.events)["max"] == 30 and dict(m.events)["oom_kill"] == 0
    f = memory_fields(type("TS", (), {"memory": m})())
    assert f["mem_refault_bytes_per_s"] == round(500 * PAGE / 2.0) and f["mem_limited"] is True
    assert memory_fields(None)["mem_refault_bytes_per_s"] is None


def test_unlimited_group_and_no_memory_controller(tmp_path):
    fake = FakeCgroups(tmp_path, False, "max\n")
    assert fake.reader().read(now=1.0).limited is False
    (fake.proc / "7" / "cgroup").write_text("0::/elsewhere\n")  # no such folder here
    gone = fake.reader().read(now=1.0)
    assert gone.note == NO_CGROUP and gone.refault_bps is None and gone.cgroup is None


# --- the model ----------------------------------------------------------------------------
def job(name, pid, rate, *, cg=None, limited=None, refault=None, blocked=1.0, f=0.05, **kw):
    return JobSample(name=name, pid=pid, launched=False, pids=(pid,), cpu_cores=0.05,
                     cpu_wait_fraction=f, io_read_bytes_per_s=rate, io_device=65024,
                     io_device_label="vda (/, ext4)", io_blocked=blocked, mem_cgroup=cg,
                     mem_limited=limited, mem_refault_bytes_per_s=refault, **kw)


def host(refault, some=0.02, io=0.02, full=0.0):
    return HostSample(cpus=2, cpu_busy=0.1, io_pressure_some10=io, memory_pressure_some10=some,
                      memory_pressure_full10=full, memory_refault_bytes_per_s=refault)


def test_domains_are_the_limited_cgroup_or_the_host():
    a = job("a", 1, 4 * MB, cg="v1:/box", limited=True, refault=6 * MB)
    b = job("b", 2, 4 * MB, cg="v1:/box", limited=True, refault=6 * MB)
    c = job("c", 3, 1 * MB, cg="/user.slice", limited=False)
    d = domains([a, b, c], host(refault=9 * MB))
    assert d["a"].name == "v1:/box" and d["a"].refault_bps == 6 * MB
    assert d["a"].readers == ("a", "b") and d["a"].read_bps == 8 * MB
    # the host's count holds the limited group's 6 MB/s: 3 MB/s are the host domain's own
    assert d["c"].name == "host" and d["c"].refault_bps == 3 * MB and d["c"].readers == ("c",)
    shares = memory_shares([a, b, c], host(refault=9 * MB))
    assert shares["a"] == (0.75, True) and shares["c"] == (1.0, False)
    # a reader outside a thrashing limited group is not charged with its re-reads
    assert memory_shares([a, b, c], host(refault=6 * MB))["c"] == (0.0, False)


def test_memory_slowdown_takes_the_re_reads_off_the_wait():
    assert memory_slowdown(0.5, 1.0, None) == pytest.approx(2.0)  # all re-reads: alone cached
    assert memory_slowdown(0.5, 0.0, None) == 1.0  # no re-read, the device not shared
    assert memory_slowdown(0.5, 0.0, 2.0) == pytest.approx(1 / (1 - 0.25))  # the io model's
    assert memory_slowdown(0.5, 0.5, 2.0) == pytest.approx(1 / (1 - 0.5 * 0.75))


def run(jobs, h, ticks=4):
    judge = PassiveJudge()
    for t in range(ticks):
        v, est = judge.verdict(jobs, h, t=float(t))
    return v, est


def test_two_jobs_whose_data_no_longer_fits_together_are_memory_bound():
    """Two readers in one limited cgroup, nearly all of their storage reads re-reads."""
    jobs = [job("a", 1, 4 * MB, cg="v1:/box", limited=True, refault=7.6 * MB, blocked=0.5),
            job("b", 2, 4 * MB, cg="v1:/box", limited=True, refault=7.6 * MB, blocked=0.5,
                mem_events=(("max", 900),))]
    v, est = run(jobs, host(refault=7.6 * MB, io=0.3))
    assert v.kind == "memory-bound", v.reason
    assert v.title == "concurrent: memory-bound"
    q = 7.6 / 8
    assert est["a"].mem_q == pytest.approx(q, abs=0.001)
    # the io model's fetch speed-up (2 readers alike: f = 2) applies to what is left
    assert est["a"].slowdown == pytest.approx(1 / (1 - 0.5 * (1 - (1 - q) / 2)), rel=0.01)
    assert est["a"].cause == "memory" and est["a"].mem_wait == pytest.approx(0.5 * q, abs=0.001)
    assert "no longer fits in the page cache of memory cgroup v1:/box" in v.reason
    assert "PSI memory some 2%" in v.reason
    assert any("memory.high" in r for r in v.recommendations)
    assert any("cgroup v1:/box hit its limit: max 900" in x for x in v.evidence_lines)
    assert v.evidence["refault_share"]["a"] == pytest.approx(q, abs=0.001)
    snap = Snapshot(time=0.0, gpu_status="ok",
                    jobs=tuple(__import__("gputop_dl.analyse.live.passive", fromlist=["x"])
                               .annotate(jobs, est)))
    js = snap.to_json()["jobs"][0]
    assert js["waits_on"] == "memory"
    assert js["waits"]["memory"] == pytest.approx(0.5 * q, abs=0.001)
    assert js["waits"]["io"] == pytest.approx(0.5 - 0.5 * q, abs=0.001)
    assert snap.to_json()["jobs"][1]["mem_events"] == {"max": 900}


def test_data_that_fits_is_not_memory_bound():
    """The same reads with no refaults: the pages read are new (a first epoch), not lost."""
    jobs = [job("a", 1, 4 * MB, cg="/", limited=False, blocked=0.5),
            job("b", 2, 4 * MB, cg="/", limited=False, blocked=0.5)]
    v, est = run(jobs, host(refault=MIN_REFAULT_BPS // 2, io=0.3))
    assert v.kind == "io-bound" and est["a"].mem_q == 0.0 and est["a"].cause == "io"
    calm, est = run(jobs, host(refault=0, io=0.01))
    assert calm.kind == "parallel" and est["a"].mem_wait == 0.0


def test_one_job_re_reading_its_own_data_is_not_blamed_on_the_others():
    jobs = [job("a", 1, 4 * MB, cg="/", limited=False, blocked=0.5),
            job("idle", 2, 0, cg="/", limited=False, blocked=0.0)]
    v, est = run(jobs, host(refault=4 * MB))
    assert v.kind == "parallel" and est["a"].mem is None and est["a"].mem_q == 1.0
    assert any("does not fit alone either" in x for x in v.evidence_lines)


def test_no_refault_counter_anywhere_is_unknown_in_one_line():
    """A kernel without workingset counters and no readable memory cgroup (e.g. a container
    without /sys/fs/cgroup): memory is not judged, said once; the disk model still works."""
    jobs = [job("a", 1, 4 * MB, blocked=0.5, mem_note=NO_CGROUP),
            job("b", 2, 4 * MB, blocked=0.5, mem_note=NO_CGROUP)]
    h = HostSample(cpus=2, cpu_busy=0.1, io_pressure_some10=0.3)  # no PSI memory, no vmstat
    v, est = run(jobs, h)
    assert v.kind == "io-bound" and est["a"].mem_q is None and est["a"].mem_wait is None
    assert [x for x in v.evidence_lines if x.startswith("memory:")] == [UNKNOWN]
    assert memory_lines(jobs, h) == [UNKNOWN]
    js = Snapshot(time=0.0, gpu_status="ok", jobs=tuple(jobs)).to_json()["jobs"][0]
    assert js["waits"]["memory"] is None and js["mem_events"] is None


# --- every output -------------------------------------------------------------------------
def test_store_export_markdown_tensorboard_and_serve_carry_memory(tmp_path):
    import time

    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    from gputop_dl.present.prometheus import SnapshotCollector
    from gputop_dl.present.report.document import session_json
    from gputop_dl.present.report.markdown import render_markdown
    from gputop_dl.record.store import Store

    store = Store(str(tmp_path / "s.db"))
    sid = store.create_session("monitor", file=None, command="gputop-dl", kind="monitor",
                               environment={"cpus": 2}, spec={"interval": 1.0})
    store.upsert_job(sid, "reader.py", launched=False, config=None, status="running")
    t0 = time.time() - 10
    for i, refault in enumerate((1 * MB, 2 * MB, 3 * MB)):
        j = job("reader.py", 7, 4 * MB, refault=refault, memory_wait_fraction=0.4)
        store.add_job_sample(sid, t0 + i, j, None)
    store.commit()
    assert [r[1:] for r in store.job_memory(sid, "reader.py")] == [
        (1 * MB, 0.4), (2 * MB, 0.4), (3 * MB, 0.4)]
    doc = session_json(store, sid)
    assert doc["jobs"][0]["memory"] == {"refault_bytes_per_s": 2 * MB,
                                        "max_refault_bytes_per_s": 3 * MB, "memory_wait": 0.4,
                                        "samples": 3}
    md = render_markdown(doc)
    assert "## Memory" in md and "| reader.py | 2.0 MB/s | 3.0 MB/s | 40% | 3 |" in md
    store.close()

    c = SnapshotCollector(hostname="node1")
    j = job("reader.py", 7, 4 * MB, refault=2 * MB, memory_wait_fraction=0.4)
    c.feed(Snapshot(time=time.time(), gpu_status="ok", host=host(refault=3 * MB, some=0.05,
                                                                  full=0.01), jobs=(j,)))
    reg = CollectorRegistry(auto_describe=False)
    reg.register(c)
    got = {s.name: s.value for fam in text_string_to_metric_families(generate_latest(reg).decode())
           for s in fam.samples}
    assert got["gputop_dl_job_memory_wait_ratio"] == 0.4
    assert got["gputop_dl_job_memory_refault_bytes_per_second"] == 2 * MB
    assert got["gputop_dl_host_memory_refault_bytes_per_second"] == 3 * MB
    assert got["gputop_dl_host_memory_pressure_full_ratio"] == 0.01


@pytest.mark.parametrize("v1", [False, True])
def test_a_limit_on_a_parent_group_makes_it_the_jobs_domain(tmp_path, v1):
    """Slurm's shape: the limit on the job's group, the process in an unlimited task group
    below it. The domain is the job's group; its refaults and limit events are read there."""
    root = (tmp_path / "cg1") if v1 else (tmp_path / "cg")
    proc = tmp_path / "proc"
    (proc / "7").mkdir(parents=True)
    (proc / "7" / "cgroup").write_text(
        "4:memory:/slurm/job_9/step_0/task_0\n0::/\n" if v1
        else "0::/slurm/job_9/step_0/task_0\n")
    job, task = root / "slurm" / "job_9", root / "slurm" / "job_9" / "step_0" / "task_0"
    task.mkdir(parents=True)
    for d in (root / "slurm", job, job / "step_0", task):
        if v1:
            (d / "memory.limit_in_bytes").write_text(
                "1073741824\n" if d == job else "9223372036854771712\n")
        else:
            (d / "memory.max").write_text("1073741824\n" if d == job else "max\n")
            (d / "memory.high").write_text("max\n")

    def counts(refaults, hits):
        stat = (f"total_workingset_refault_file {refaults}\n" if v1
                else f"workingset_refault_file {refaults}\n")
        (job / "memory.stat").write_text(stat)
        (task / "memory.stat").write_text(stat.replace(str(refaults), "0"))
        if v1:
            (job / "memory.failcnt").write_text(f"{hits}\n")
            (job / "memory.oom_control").write_text("oom_kill 0\n")
        else:
            (job / "memory.events").write_text(f"high 0\nmax {hits}\noom 0\noom_kill 0\n")

    counts(0, 0)
    r = MemoryReader(7, proc=str(proc), cgroup_root=str(tmp_path / "cg"),
                     v1_root=str(tmp_path / "cg1"), read=lambda p, *a: open(p, "rb").read())
    first = r.read(now=1.0)
    pre = "v1:" if v1 else ""
    assert (first.cgroup, first.limited, first.domain) == (
        pre + "/slurm/job_9/step_0/task_0", False, pre + "/slurm/job_9")
    counts(300, 5)
    m = r.read(now=3.0)
    assert m.refault_bps == pytest.approx(300 * PAGE / 2.0) and dict(m.events)["max"] == 5


def test_two_jobs_each_in_its_own_limited_parent_are_two_domains():
    """Two Slurm jobs, each re-reading in its own limit: not one host domain shared, so not
    memory-bound together; each does not fit alone (a line, no estimate)."""
    a = job("a", 1, 4 * MB, cg="v1:/slurm/job_1/step_0", limited=False, mem_domain="v1:/slurm/job_1",
            refault=4 * MB)
    b = job("b", 2, 4 * MB, cg="v1:/slurm/job_2/step_0", limited=False, mem_domain="v1:/slurm/job_2",
            refault=4 * MB)
    h = replace(host(refault=8 * MB), memory_limited_refaults=(
        ("v1:/slurm/job_1", 4 * MB), ("v1:/slurm/job_2", 4 * MB)))
    d = domains([a, b], h)
    assert d["a"].name == "v1:/slurm/job_1" and d["a"].readers == ("a",)
    assert d["b"].name == "v1:/slurm/job_2" and d["b"].refault_bps == 4 * MB
    assert memory_shares([a, b], h) == {"a": (1.0, False), "b": (1.0, False)}
    assert len(memory_lines([a, b], h)) == 2  # each: its data does not fit alone either


def test_the_details_screen_shows_the_disk_and_the_page_caches_domain():
    from gputop_dl.present.tui.job_detail import job_detail_lines
    from gputop_dl.text.fmt import rate

    def rows(j):
        return {line.split()[0]: line for line in job_detail_lines(j, None).plain.splitlines()
                if line[:1].isalpha()}

    slurm = job("a", 1, 4 * MB, cg="v1:/slurm/job_1/step_0", limited=False,
                mem_domain="v1:/slurm/job_1", refault=3 * MB, io_wait_fraction=0.4)
    got = rows(slurm)
    assert rate(4 * MB) in got["disk"] and "vda" in got["disk"] and "40%" in got["disk"]
    assert "v1:/slurm/job_1 " in got["memory"] and rate(3 * MB) in got["memory"]
    host_job = job("c", 3, 1 * MB, cg="/user.slice", limited=False, refault=0)
    assert "/user.slice" in rows(host_job)["memory"] and "v1:" not in rows(host_job)["memory"]
    bare = JobSample(name="d", pid=4, launched=False)  # nothing read: no rows
    assert not {"disk", "memory"} & set(rows(bare))
