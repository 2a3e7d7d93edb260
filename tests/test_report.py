"""Session export (Markdown / JSON) and the sessions listing: structure, numbers, escaping,
interrupted sessions, atomic writes, the CLI, and one real launch -> export end to end."""

from __future__ import annotations

import json
import os
import re
import statistics
import textwrap
import time

import pytest
from markdown_it import MarkdownIt

from gputop_dl import cli
from gputop_dl.present.report import (
    ExportError,
    ExportUsageError,
    document,
    export_session,
    list_sessions,
    mermaid,
    render_markdown,
    session_json,
)
from gputop_dl.present.report import export as report_export
from gputop_dl.record.store import Store
from gputop_dl.text import fmt
from gputop_dl.text.markdown import fence, md_cell, write_atomic
from tests.fakes import reports as fx
from tests.schema_check import check

MD = MarkdownIt("commonmark").enable("table")


# --- helpers --------------------------------------------------------------------------------

def _inline_text(tok) -> str:
    """The visible text of an inline token (what a reader sees in the cell)."""
    out = []
    for c in tok.children or []:
        if c.type in ("text", "code_inline"):
            out.append(c.content)
        elif c.type in ("softbreak", "hardbreak"):
            out.append(" ")
    return "".join(out)


def tables(text: str) -> list[dict]:
    """Every table as {"header": [...], "rows": [[...], ...], "after": heading before it}."""
    toks = MD.parse(text)
    out, heading, cur, row, in_head = [], None, None, None, False
    for i, t in enumerate(toks):
        if t.type == "heading_open":
            heading = toks[i + 1].content
        elif t.type == "table_open":
            cur = {"header": [], "rows": [], "heading": heading}
        elif t.type == "thead_open":
            in_head = True
        elif t.type == "thead_close":
            in_head = False
        elif t.type == "tr_open":
            row = []
        elif t.type == "inline" and cur is not None and row is not None:
            row.append(_inline_text(t))
        elif t.type == "tr_close":
            (cur["header"].extend(row) if in_head else cur["rows"].append(row))
            row = None
        elif t.type == "table_close":
            out.append(cur)
            cur = None
    return out


def table_with(text: str, column: str) -> dict:
    found = [t for t in tables(text) if column in t["header"]]
    assert len(found) == 1, f"one table with column {column!r}, found {len(found)}"
    return found[0]


def rows_by_job(tbl: dict) -> dict[str, dict[str, str]]:
    return {r[0]: dict(zip(tbl["header"], r)) for r in tbl["rows"]}


def fences(text: str, info: str | None = None) -> list[str]:
    return [t.content for t in MD.parse(text) if t.type == "fence"
            and (info is None or t.info.strip() == info)]


def headings(text: str) -> list[str]:
    toks = MD.parse(text)
    return [_inline_text(toks[i + 1]) for i, t in enumerate(toks) if t.type == "heading_open"]


@pytest.fixture()
def store(tmp_path):
    s = Store(str(tmp_path / "sessions.db"))
    yield s
    s.close()


@pytest.fixture()
def fixture_report(store):
    sid = fx.make_session(store)
    data = session_json(store, sid)
    return sid, data, render_markdown(data)


# --- structure and numbers ------------------------------------------------------------------

def test_sections_in_order(fixture_report):
    _, _, text = fixture_report
    hs = headings(text)
    assert hs[0] == "gputop-dl report: mobilenet trio"
    order = ["Environment", "Workloads", "Results (co-run)", "Epoch times", "Solo baselines",
             "Verdict", "Charts", "Events"]
    assert [h for h in hs if h in order] == order


def test_results_table_holds_the_fixture_numbers(fixture_report):
    _, _, text = fixture_report
    tbl = table_with(text, "median epoch")
    assert tbl["header"] == ["job", "status", "epochs", "median epoch", "step", "samples/s",
                             "peak mem", "CPU cores", "data stall", "solo step", "solo stall",
                             "slowdown", "compute"]
    rows = rows_by_job(tbl)
    assert list(rows) == ["bs32", "bs64", "bs128"]
    keys = {"epochs": "epochs", "median_epoch": "median epoch", "step": "step",
            "samples/s": "samples/s", "peak_mem": "peak mem", "cores": "CPU cores",
            "stall": "data stall", "solo_step": "solo step", "solo_stall": "solo stall",
            "slowdown": "slowdown", "compute": "compute"}
    for job, want in fx.EXPECT.items():
        assert rows[job]["status"] == "done"
        for k, col in keys.items():
            assert rows[job][col] == want[k], (job, col)
    assert rows["bs128"]["status"] == "failed"
    assert rows["bs128"]["step"] == "–" and rows["bs128"]["slowdown"] == "–"


def test_environment_and_workloads_tables(fixture_report):
    _, _, text = fixture_report
    env = dict(table_with(text, "item")["rows"])
    assert env["CPU"] == "Intel(R) Xeon(R) CPU E5-2620 v4 @ 2.10GHz, 16 vCPUs usable of 32"
    assert env["GPU"] == "NVIDIA TITAN Xp × 4"
    assert env["Driver / CUDA"] == "535.54.03 / 12.2"
    assert env["Memory"] == "64.0 GiB"
    for key, val in (("OS / kernel", "Linux 5.15.0-91-generic"), ("Python", "3.11.7"),
                     ("torch", "2.3.1"), ("torchvision", "0.18.1")):
        assert env[key] == val
    wl = table_with(text, "transforms")
    assert wl["header"] == ["job", "model", "batch", "input", "dataset", "transforms", "workers",
                            "device(s)"]
    rows = rows_by_job(wl)
    assert rows["bs32"] == {"job": "bs32", "model": "mobilenet_v2", "batch": "32",
                            "input": "224×224", "dataset": "fake", "transforms": "heavy",
                            "workers": "4", "device(s)": "GPU 0"}
    assert rows["bs128"]["device(s)"] == "GPU 2, 3"


def test_solo_and_epoch_tables(fixture_report):
    _, _, text = fixture_report
    solo = rows_by_job(table_with(text, "step CV"))
    assert set(solo) == {"bs32", "bs64"}  # the failed job has no baseline
    assert solo["bs32"]["step"] == "200 ms" and solo["bs32"]["CPU cores"] == "2.00"
    assert solo["bs64"]["data stall"] == "2%" and solo["bs64"]["source"] == "measured"
    ep = rows_by_job(table_with(text, "solo (est.)"))
    assert [ep["bs32"][f"epoch {i}"] for i in (1, 2, 3)] == ["29.0 s", "28.5 s", "28.0 s"]
    assert ep["bs32"]["solo (est.)"] == "11.4 s"  # 28.5 s / 2.5


def test_verdict_section(fixture_report):
    _, _, text = fixture_report
    verdict = text.split("## Verdict", 1)[1].split("## Charts", 1)[0]
    assert "**concurrent: CPU-bound**" in verdict and "confidence: 80%" in verdict
    for line in fx.VERDICT["evidence_lines"] + fx.VERDICT["recommendations"]:
        assert line in verdict
    assert "- bs32: step 0.500 s vs solo 0.200 s (2.50×)" in verdict
    assert "- **bs64**: step 0.800 s vs solo 0.400 s (2.00×)" in verdict  # name added once
    ev = dict(table_with(text, "evidence")["rows"])
    assert ev["stp"] == "0.9" and ev["slowdowns"] == "bs32 2.5, bs64 2"


def test_no_verdict(store):
    sid = fx.make_session(store, verdict=None)
    data = session_json(store, sid)
    assert data["verdict"] is None
    text = render_markdown(data)
    assert "No verdict recorded." in text and "**Verdict:** no verdict recorded" in text


def test_charts_are_mermaid_xycharts_with_at_most_60_points(store):
    sid = fx.make_session(store, ticks=400)
    text = render_markdown(session_json(store, sid))
    charts = fences(text, "mermaid")
    titles = [re.search(r'title "([^"]*)"', c).group(1) for c in charts]
    assert titles == ["Epoch time (s): bars co-run median, line solo est.",
                      "Host CPU busy (percent)", "CPU cores per job", "GPU utilisation (percent)",
                      "GPU memory used (GiB)"]
    for c in charts:
        assert c.startswith("xychart-beta\n")
        for series in re.findall(r"^\s*(?:line|bar) \[(.*)\]$", c, re.M):
            vals = [float(v) for v in series.split(",")]
            assert 1 <= len(vals) <= 60
    util = re.findall(r"line \[(.*)\]", charts[3])
    assert [float(s.split(",")[0]) for s in util] == [0, 25, 50, 75]
    assert 'x-axis ["bs32", "bs64"]' in charts[0]
    assert "bar [28.5, 30]" in charts[0] and "line [11.4, 15]" in charts[0]


def test_no_gpu_session_says_why(store):
    sid = fx.make_session(store, gpu=False)
    text = render_markdown(session_json(store, sid))
    env = dict(table_with(text, "item")["rows"])
    assert env["GPU"].startswith("No NVIDIA GPU: the NVIDIA driver is not loaded")
    assert env["Driver / CUDA"] == "– / –"
    assert "GPU utilisation" not in text and "No GPU charts" in text
    assert "**No CUDA**" in text


def test_events_and_failure_tail(fixture_report):
    _, data, text = fixture_report
    ev = table_with(text, "event")
    assert ev["header"] == ["time", "since start", "job", "phase", "event", "detail"]
    kinds = [(r[2], r[4]) for r in ev["rows"]]
    assert ("bs128", "failed") in kinds and ("bs128", "note") in kinds
    assert kinds.count(("bs128", "failed")) == 1
    assert ("bs32", "baseline") in kinds and ("bs32", "done") in kinds
    failed = [r for r in ev["rows"] if r[4] == "failed"][0]
    assert failed[5] == "cuda-oom: " + fx.OOM_MESSAGE and failed[1] == "+0:13"
    assert "bs128: failed" in headings(text)
    assert fences(text, "text") == ["\n".join(fx.STDERR_TAIL) + "\n"]


def test_series_downsampled_by_bucket_means(store):
    sid = fx.make_session(store, ticks=600)
    s = session_json(store, sid)["series"]
    assert s["points"] == 60 and len(s["t"]) == 60
    assert s["bucket_s"] == pytest.approx(599 / 60, abs=1e-3)
    busy = s["host"]["cpu_busy"]
    assert len(busy) == 60 and busy[0] == 0.5 and busy[-1] == 0.97
    assert busy[1] == 0.97  # the co-run began at t0 + 10 s, bucket 1 starts at t0 + 9.98 s
    assert [g["index"] for g in s["gpus"]] == [0, 1, 2, 3]
    assert all(v == 0.25 for v in s["gpus"][1]["util"])
    assert s["gpus"][3]["mem_total"] == 12 * fx.GIB


def test_downsample_helper():
    assert mermaid.downsample([1, 2, 3], 5) == [1, 2, 3]
    assert mermaid.downsample(list(range(120)), 60) == [i * 2 + 0.5 for i in range(60)]
    assert mermaid.downsample([None, None, 1, 3], 2) == [None, 2]


# --- JSON -----------------------------------------------------------------------------------

def test_json_has_the_contract_fields(fixture_report):
    sid, data, _ = fixture_report
    data = check(json.loads(json.dumps(data)))  # plain JSON
    assert data["schema"] == "gputop-dl.session/1"
    assert data["id"] == sid and data["name"] == "mobilenet trio" and data["state"] == "finished"
    env = data["environment"]
    for key, typ in (("cpu_model", str), ("cpus", int), ("gpus", list), ("driver", str),
                     ("torch", str)):
        assert isinstance(env[key], typ), key
    v = data["verdict"]
    assert v["kind"] == "cpu-bound" and isinstance(v["reason"], str)
    assert isinstance(v["evidence"], dict) and isinstance(v["recommendations"], list)
    types = {"name": str, "status": str, "epochs": list, "step_time_s": (float, type(None)),
             "samples_per_s": (float, type(None)), "stall_fraction": (float, type(None)),
             "solo_step_time_s": (float, type(None)), "slowdown": (float, type(None)),
             "cpu_cores": (float, type(None)), "peak_gpu_mem": (int, type(None))}
    for j in data["jobs"]:
        assert "failure" in j
        for key, typ in types.items():
            assert isinstance(j[key], typ), (j["name"], key)
        for e in j["epochs"]:
            assert isinstance(e["epoch"], int) and isinstance(e["time_s"], float)
        assert j["status"] in ("done", "failed", "stopped")
    bs32 = data["jobs"][0]
    assert bs32["step_time_s"] == 0.5 and bs32["slowdown"] == 2.5
    assert bs32["peak_gpu_mem"] == 4378853376 and bs32["cpu_cores"] == 2.4
    assert [e["time_s"] for e in bs32["epochs"]] == fx.EPOCH_TIMES["bs32"]
    assert data["jobs"][2]["failure"] == "cuda-oom: " + fx.OOM_MESSAGE
    for key in ("stall_fraction", "slowdown", "solo_step_time_s"):  # unknown is null, never 0
        assert data["jobs"][2][key] is None


def test_markdown_renders_from_the_json_file_alone(fixture_report):
    _, data, text = fixture_report
    assert render_markdown(json.loads(json.dumps(data))) == text


def test_export_json_and_md_carry_the_same_session(store, tmp_path):
    sid = fx.make_session(store)
    store.close()
    db = str(tmp_path / "sessions.db")
    pj = export_session(None, str(tmp_path / "r.json"), db)
    pm = export_session(sid[:17], str(tmp_path / "r.md"), db)
    data = check(json.loads(open(pj, encoding="utf-8").read()))
    assert data["id"] == sid
    assert open(pm, encoding="utf-8").read() == render_markdown(data)


def test_json_export_is_strict_json(store, tmp_path):
    verdict = dict(fx.VERDICT, evidence={"stp": float("nan"), "efficiency": float("inf")})
    fx.make_session(store, verdict=verdict, name="naïve × run")
    out = export_session(None, str(tmp_path / "r.json"), str(tmp_path / "sessions.db"))
    raw = open(out, encoding="utf-8").read()
    data = check(json.loads(raw, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}")))
    assert data["verdict"]["evidence"] == {"stp": None, "efficiency": None}
    assert "naïve × run" in raw


# --- escaping -------------------------------------------------------------------------------

HOSTILE_NAME = "a|b`c`<script>alert(1)</script>\nx"
HOSTILE_MSG = ("bad | pipe ``` fence <img src=x onerror=alert(1)> & [link](javascript:alert(1))"
               "\r\n- item")
HOSTILE_CMD = "gputop-dl launch 'x | y' `rm -rf /` <b>bold</b>\n# heading"
HOSTILE_TAIL = ["line with ``` and ```` runs", "<script>alert('tail')</script>", "| a | b |"]


@pytest.fixture()
def hostile(store):
    sid = fx.make_session(store, name="evil | <b>name</b>",
                          job_names=(HOSTILE_NAME, "*bold* _em_ ~~s~~", "1. list"),
                          failure=HOSTILE_MSG, stderr_tail=HOSTILE_TAIL, command=HOSTILE_CMD,
                          extra_config={"transforms": ["Resize(256)", "x|y", "<i>"],
                                        "model": "m`o`del"})
    return render_markdown(session_json(store, sid))


def _flat(s: str) -> str:
    return " ".join(s.splitlines())


def test_hostile_text_cannot_break_tables(hostile):
    for tbl in tables(hostile):
        for row in tbl["rows"]:
            assert len(row) == len(tbl["header"]), (tbl["header"], row)
    res = table_with(hostile, "median epoch")
    assert [r[0] for r in res["rows"]] == [_flat(HOSTILE_NAME), "*bold* _em_ ~~s~~", "1. list"]
    assert res["rows"][0][2] == "3/3"  # the numbers stay in their columns
    wl = table_with(hostile, "transforms")
    assert wl["rows"][0][1] == "m`o`del" and wl["rows"][0][5] == "Resize(256), x|y, <i>"
    ev = table_with(hostile, "event")
    failed = [r for r in ev["rows"] if r[4] == "failed"][0]
    assert failed[2] == "1. list" and failed[5] == "cuda-oom: " + _flat(HOSTILE_MSG)


def test_hostile_text_injects_no_html_or_markup(hostile):
    md = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
    toks = md.parse(hostile)
    inline = [c for t in toks for c in (t.children or [])]
    kinds = {t.type for t in toks} | {c.type for c in inline}
    assert not kinds & {"html_inline", "html_block", "link_open", "s_open", "image"}
    # emphasis only where the report itself puts it, never from a job name
    for i, c in enumerate(inline):
        if c.type in ("em_open", "strong_open"):
            assert inline[i + 1].content not in ("bold", "em")
    # "1. list" as a job name starts no list; the only ordered list is the recommendations
    assert sum(t.type == "ordered_list_open" for t in toks) == 1
    html = md.render(hostile)
    for bad in ("<script", "<img", "<b>", "<i>", "javascript:alert(1)\""):
        assert bad not in html
    assert headings(hostile)[0] == "gputop-dl report: " + "evil | <b>name</b>"


def test_hostile_code_blocks_keep_their_text(hostile):
    cmd = fences(hostile, "sh")
    assert cmd == [HOSTILE_CMD + "\n"]
    tail = fences(hostile, "text")
    assert tail == ["\n".join(HOSTILE_TAIL) + "\n"]
    for chart in fences(hostile, "mermaid"):
        assert "`" not in chart and "<" not in chart
        for quoted in re.findall(r'"([^"\n]*)"', chart):
            assert not set(quoted) & set('"`<>|[]{}\\')


def test_escaping_helpers():
    assert md_cell("a|b") == "a\\|b"
    assert md_cell("") == "–" and md_cell(None) == "–"
    assert md_cell("x\ny\r\nz") == "x y z"
    assert fence("a ```` b").startswith("`````\n")
    assert fence("plain") == "```\nplain\n```"
    assert mermaid.label('a"b`c<d>[e]') == "a_b_c_d__e_"


# --- interrupted and running sessions -------------------------------------------------------

def test_interrupted_session_still_exports(store):
    sid = fx.make_interrupted(store)
    assert store.session(sid).state == "interrupted"
    data = session_json(store, sid)
    assert data["state"] == "interrupted" and data["ended"] is None
    assert data["duration_s"] == pytest.approx(89.0, abs=0.5)  # up to the last heartbeat
    text = render_markdown(data)
    assert "**State:** **interrupted**" in text
    rows = rows_by_job(table_with(text, "median epoch"))
    assert rows["bs64"]["status"] == "interrupted"  # as in the JSON
    assert {j["name"]: j["status"] for j in data["jobs"]}["bs64"] == "interrupted"
    assert rows["bs64"]["step"] == "800 ms"  # what was recorded up to then
    assert rows["bs32"]["status"] == "done"
    last = table_with(text, "event")["rows"][-1]
    assert last[4] == "interrupted" and last[1] == "+1:29"
    assert last[5].endswith("still running then: bs64")


def test_running_session_is_marked_partial(store):
    sid = fx.make_session(store, state=None)
    store.db.execute("UPDATE sessions SET heartbeat=? WHERE id=?", (time.time(), sid))
    store.commit()
    text = render_markdown(session_json(store, sid))
    assert "**running**: the session is still being recorded" in text


# --- atomic write ---------------------------------------------------------------------------

def _leftovers(d) -> list[str]:
    return sorted(n for n in os.listdir(d) if n.endswith(".tmp"))


def test_failed_render_leaves_no_file(store, tmp_path, monkeypatch):
    fx.make_session(store)
    out = tmp_path / "out"
    out.mkdir()

    def boom(data):
        raise RuntimeError("render failed")

    monkeypatch.setattr(report_export, "render_markdown", boom)
    with pytest.raises(RuntimeError):
        export_session(None, str(out / "r.md"), str(tmp_path / "sessions.db"))
    assert os.listdir(out) == []


def test_failed_write_keeps_the_old_file_and_no_temp(store, tmp_path, monkeypatch):
    fx.make_session(store)
    target = tmp_path / "r.json"
    target.write_text("old report\n")

    def fail_fsync(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", fail_fsync)
    with pytest.raises(ExportError, match="No space left"):
        export_session(None, str(target), str(tmp_path / "sessions.db"))
    assert target.read_text() == "old report\n"
    assert _leftovers(tmp_path) == []


def test_write_replaces_atomically(tmp_path):
    p = tmp_path / "a.md"
    p.write_text("old")
    write_atomic(str(p), "new")
    assert p.read_text() == "new" and _leftovers(tmp_path) == []
    assert oct(p.stat().st_mode & 0o777) != oct(0o600)  # not mkstemp's private mode


# --- export_session errors ------------------------------------------------------------------

def test_export_errors(store, tmp_path):
    db = str(tmp_path / "sessions.db")
    with pytest.raises(ExportError, match="gputop-dl launch"):
        export_session(None, str(tmp_path / "r.md"), db)  # empty database
    with pytest.raises(ExportError, match="gputop-dl launch"):
        export_session(None, str(tmp_path / "r.md"), str(tmp_path / "missing.db"))
    fx.make_session(store)
    with pytest.raises(ExportUsageError, match="unknown report format"):
        export_session(None, str(tmp_path / "r.html"), db)
    with pytest.raises(ExportUsageError, match="no session"):
        export_session("nope", str(tmp_path / "r.md"), db)
    fx.make_session(store)
    with pytest.raises(ExportUsageError, match="ambiguous"):
        export_session("20", str(tmp_path / "r.md"), db)


# --- CLI ------------------------------------------------------------------------------------

@pytest.fixture()
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUTOP_DL_HOME", str(tmp_path / "home"))
    return tmp_path


def test_cli_export_without_sessions(home, capsys):
    assert cli.main(["export", str(home / "r.md")]) == 2  # nothing to export is bad usage
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "gputop-dl launch" in err
    assert not (home / "r.md").exists()


def test_cli_export_bad_extension(home, capsys):
    assert cli.main(["export", str(home / "r.txt")]) == 2
    assert "expected a .md or .json" in capsys.readouterr().err


def test_cli_export_and_sessions(home, capsys):
    os.makedirs(home / "home")
    st = Store(str(home / "home" / "sessions.db"))
    sid_old = fx.make_interrupted(st, name="old run")
    sid = fx.make_session(st)
    st.db.execute("UPDATE sessions SET started=started+1 WHERE id=?", (sid,))
    st.commit()
    st.close()
    assert cli.main(["export", str(home / "r.md")]) == 0
    assert capsys.readouterr().out.strip() == f"wrote {home / 'r.md'}"
    assert (home / "r.md").read_text().startswith("# gputop-dl report: mobilenet trio")
    assert cli.main(["export", str(home / "old.json"), "--session", sid_old]) == 0
    assert json.loads((home / "old.json").read_text())["state"] == "interrupted"
    assert cli.main(["export", str(home / "x.md"), "--session", "zzz"]) == 2
    capsys.readouterr()
    assert cli.main(["sessions"]) == 0
    out = capsys.readouterr().out
    for s in (sid, sid_old, "mobilenet trio", "old run", "finished", "interrupted",
              "concurrent: CPU-bound"):
        assert s in out
    assert out.index(sid) < out.index(sid_old)  # newest first
    rows = list_sessions()
    assert [r["state"] for r in rows] == ["finished", "interrupted"]
    assert rows[0]["jobs"] == 3 and rows[0]["duration_s"] == pytest.approx(89.0, abs=1.5)


def test_cli_sessions_empty(home, capsys):
    assert cli.main(["sessions"]) == 0
    assert "gputop-dl launch" in capsys.readouterr().out


# --- end to end: a real launch, then export ---------------------------------------------------

E2E_TOML = textwrap.dedent("""\
    [session]
    name = "e2e synthetic"
    interval = 0.2
    baseline = "measure"
    baseline_steps = 3

    [defaults]
    model = "synthetic"
    dataset = "synthetic"
    input_size = 8
    num_classes = 10
    batch_size = 4
    num_workers = 0
    epochs = 2
    steps_per_epoch = 5
    warmup_steps = 1
    sample_cpu_ms = 1
    step_device_ms = 10

    [[workload]]
    name = "tiny"
    """)


@pytest.mark.shares_box("the export holds what the store holds")
def test_end_to_end_launch_then_export(home, capsys):
    wl = home / "w.toml"
    wl.write_text(E2E_TOML)
    assert cli.main(["launch", str(wl), "--headless"]) == 0
    capsys.readouterr()
    assert cli.main(["export", str(home / "r.json")]) == 0
    assert cli.main(["export", str(home / "r.md")]) == 0
    data = check(json.loads((home / "r.json").read_text()))
    text = (home / "r.md").read_text()
    assert data["name"] == "e2e synthetic" and data["state"] == "finished"
    (job,) = data["jobs"]
    assert job["name"] == "tiny" and job["status"] == "done" and len(job["epochs"]) == 2
    assert job["solo_step_time_s"] and job["slowdown"] and job["step_time_s"] > 0.005
    # the launch's verdict carries the comparison with the box's peaks: no profile stored here
    peaks = data["verdict"]["evidence"]["box_peaks"]
    assert peaks["profile"] is None and "gputop-dl machine" in peaks["note"]
    # the report's numbers are this run's numbers
    st = Store(str(home / "home" / "sessions.db"))
    try:
        epochs = st.events(data["id"], job="tiny", ev="epoch", phase="co-run")
    finally:
        st.close()
    assert [e["time_s"] for e in job["epochs"]] == [e["time_s"] for e in epochs]
    assert [(e["loss"], e["train_accuracy"]) for e in job["epochs"]] == \
        [(e["loss"], e["accuracy"]) for e in epochs]  # what the trainer measured
    assert all(0 <= e["train_accuracy"] <= 1 and e["loss"] > 0 for e in job["epochs"])
    row = rows_by_job(table_with(text, "median epoch"))["tiny"]
    assert row["epochs"] == "2/2" and row["status"] == "done"
    assert row["step"] == fmt.secs(job["step_time_s"])
    assert row["slowdown"] == fmt.num(job["slowdown"], ".2f", "×")
    assert row["samples/s"] == fmt.num(job["samples_per_s"], ".1f")
    assert row["peak mem"].endswith("(host RSS)")
    env = dict(table_with(text, "item")["rows"])
    assert "vCPUs" in env["CPU"] and env["torch"] not in ("", "–")
    assert rows_by_job(table_with(text, "step CV"))["tiny"]["source"] == "measured"
    assert fences(text, "mermaid")
    # its verdict over time: recorded as the run went, the first from none, the
    # last the session's verdict, each a change of kind
    changes = data["verdict_changes"]
    assert data["verdict_changes_recorded"] is True and changes and changes[0]["from"] is None
    assert changes[-1]["to"] == data["verdict"]["kind"]
    assert all(a["to"] == b["from"] != b["to"] for a, b in zip(changes, changes[1:]))
    assert all(data["started"] <= c["t"] <= data["ended"] for c in changes)
    assert [r[3] for r in table_with(text, "worst slowdown")["rows"]] == [c["to"] for c in changes]


# --- the aggregated (SQL) summary equals a plain computation over the raw records ---------

def _reference_summary(store, sid) -> list[dict]:
    """Per-job figures computed the obvious way, from every raw step event and sample."""
    import statistics

    from gputop_dl.analyse.stats.jobstats import step_stats

    out = []
    for job in store.jobs(sid):
        name, warm = job["name"], int((job["config"] or {}).get("warmup_steps", 3))
        steps = store.events(sid, job=name, ev="step", phase="co-run")
        st = step_stats(steps, warmup=warm, window=0)
        t_warm = steps[warm]["t"] if len(steps) > warm else None
        corun = [s for s in store.job_samples(sid, name) if s[2] == "co-run"]
        cores = [s[3] for s in corun if s[3] is not None and (t_warm is None or s[0] >= t_warm)]
        rss = [s[4] for s in corun if s[4] is not None]
        out.append({"steps": len(steps), "step_time_s": st.step_time_s,
                    "stall_fraction": st.stall_fraction, "samples_per_s": st.samples_per_s,
                    "cpu_cores": round(statistics.fmean(cores), 3) if cores else None,
                    "peak_rss": max(rss) if rss else None})
    return out


def _assert_summary_matches_raw(store, sid):
    from gputop_dl.analyse.recorded.summary import summarize

    got = summarize(store, sid)
    assert got.sampled == {}
    keys = ("steps", "step_time_s", "stall_fraction", "samples_per_s", "cpu_cores", "peak_rss")
    assert [{k: j.to_json()[k] for k in keys} for j in got.jobs] == _reference_summary(store, sid)
    assert [e["ev"] for e in got.events] == [
        e["ev"] for e in store.events(sid) if e["ev"] in ("failed", "note", "baseline")]


def test_summary_matches_raw_records(store):
    _assert_summary_matches_raw(store, fx.make_session(store))
    _assert_summary_matches_raw(store, fx.make_interrupted(store))
    _assert_summary_matches_raw(store, fx.make_session(store, gpu=False, verdict=None))


def test_long_run_step_stats_are_sampled_and_say_so(store, monkeypatch):
    sid = fx.make_session(store)
    from gputop_dl.analyse.recorded import summary

    monkeypatch.setattr(summary, "STEP_SAMPLE_CAP", 10)
    data = session_json(store, sid)
    bs32 = data["jobs"][0]
    assert bs32["step_stats_sampled"] == {"steps": 10, "of": 28, "every": 3}
    assert bs32["steps"] == 30 and bs32["step_time_s"] == 0.5
    assert bs32["stall_fraction"] == pytest.approx(0.4)
    assert "every 3th step (10 of 28 after warm-up)" in render_markdown(data)


def test_long_series_read_every_kth_second(store, monkeypatch):
    sid = fx.make_session(store, ticks=300)
    monkeypatch.setattr(document, "SERIES_ROW_CAP", 400)
    s = session_json(store, sid)["series"]
    assert s["every_s"] == {"host": 1, "gpus": 3, "jobs": 3}  # 3 jobs (one never sampled)
    assert all(v == 0.25 for v in s["gpus"][1]["util"])
    assert all(v == 2.4 for v in s["jobs"][0]["cpu_cores"])


def test_a_command_job_shows_what_its_hook_saw_not_the_file_defaults(store):
    """A `command` workload's model/data defaults do not apply: its batch is the one the start-up
    hook saw, its planned epochs are unknown, the input/dataset columns are dashes."""
    sid = store.create_session("cmd", file="c.toml", command="gputop-dl launch c.toml",
                               kind="launch", environment={"cpus": 2})
    cfg = {"name": "mnist", "command": ["python", "main.py"], "batch_size": 32, "epochs": 3,
           "input_size": 224, "dataset": "fake", "num_workers": 4, "warmup_steps": 1}
    store.upsert_job(sid, "mnist", launched=True, config=cfg, status="running")
    evs = [{"ev": "started", "t": 10.0, "pid": 5, "batch_size": 64, "epochs": None,
            "steps_per_epoch": 4}]
    t = 10.0
    for ep in (1, 2):
        for step in range(1, 5):
            t += 0.1
            evs.append({"ev": "step", "t": t, "epoch": ep, "step": step, "t_data": 0.01,
                        "t_step": 0.1, "samples": 64})
        evs.append({"ev": "epoch", "t": t, "epoch": ep, "time_s": 0.4, "steps": 4})
    store.add_events(sid, "mnist", "co-run", evs)
    store.upsert_job(sid, "mnist", launched=True, config=None, status="done", ended=t)
    store.end_session(sid, "finished")
    data = session_json(store, sid)
    text = render_markdown(data)
    wl = rows_by_job(table_with(text, "transforms"))["mnist"]
    assert wl["batch"] == "64" and wl["input"] == wl["dataset"] == wl["workers"] == "–"
    assert wl["model"].startswith("command: python main.py")
    res = rows_by_job(table_with(text, "median epoch"))["mnist"]
    assert res["epochs"] == "2" and res["samples/s"] == "640.0"


# --- analyse/recorded/window.py: the report's co-run window and host means ---------------------------

def test_corun_window_ends_with_the_last_job_or_the_session():
    from gputop_dl.analyse.recorded.window import corun_window

    assert corun_window([], [], 2, 50.0) == (None, None)
    assert corun_window([12.0, 10.0], [40.0, 30.0], 2, 50.0) == (10.0, (10.0, 40.0))
    assert corun_window([12.0, 10.0], [30.0], 2, 50.0) == (10.0, (10.0, 50.0))  # one still ran


def test_corun_host_means_weight_buckets_by_samples_and_take_edge_buckets():
    from gputop_dl.analyse.recorded.window import corun_host_means

    series = {"bucket_s": 10.0, "t": [5.0, 15.0, 25.0, 35.0],
              "host": {"cpu_busy": [0.1, 0.5, 1.0, 0.2], "load1": [1.0, None, 3.0, 9.0],
                       "psi_some10": [None, None, None, None]}}
    counts = [10, 10, 5, 10]
    # window 1010-1021 s, session start 1000: buckets [10,20) and [20,30) overlap it
    out = corun_host_means(series, counts, (1010.0, 1021.0), 1000.0)
    assert out["cpu_busy_mean"] == pytest.approx((0.5 * 10 + 1.0 * 5) / 15)
    assert out["load1_mean"] == 3.0 and out["psi_some10_mean"] is None
    assert out["cpu_busy_max"] == 1.0
    empty = {"cpu_busy_mean": None, "load1_mean": None, "psi_some10_mean": None,
             "cpu_busy_max": None}
    assert corun_host_means(series, counts, None, 1000.0) == empty
    assert corun_host_means(None, [], (0.0, 1.0), 0.0) == empty


def test_the_console_summary_step_is_the_median_and_says_so(store):
    """A few long steps move the mean, not the median: the summary's column is the median, and
    its header and caption say so (an earlier header called it the mean)."""
    from rich.console import Console

    from gputop_dl.analyse.recorded.summary import summarize
    from gputop_dl.present.headless import summary_table

    sid = fx.make_session(store)
    name = store.jobs(sid)[0]["name"]
    steps = store.events(sid, job=name, ev="step", phase="co-run")
    t = steps[-1]["t"]
    store.add_events(sid, name, "co-run", [
        {"ev": "step", "t": t + 5.0 * (i + 1), "epoch": 3, "step": i + 1, "t_data": 0.0,
         "t_step": 5.0, "samples": 32} for i in range(3)])
    times = [s["t_step"] for s in store.events(sid, job=name, ev="step", phase="co-run")[3:]]
    job = summarize(store, sid).jobs[0]
    assert job.step_time_s == statistics.median(times) != pytest.approx(statistics.fmean(times))
    con = Console(width=220, record=True)
    con.print(summary_table([job]))
    text = con.export_text()
    assert "median step" in text and "mean step" not in text
    assert fmt.secs(statistics.median(times)) in text


def test_per_job_sparklines_show_each_jobs_course_and_range(store):
    """Each job's step time, data wait and CPU over the session as a sparkline
    with the range it spans (a blank where nothing was measured), beside the Mermaid charts."""
    sid = fx.make_session(store, ticks=120)
    text = render_markdown(session_json(store, sid))
    t = table_with(text, "step time")
    assert t["header"] == ["job", "step time", "data wait", "CPU cores"]
    first = dict(zip(t["header"], t["rows"][0]))
    assert first["step time"] == "▄" * 48 + " 500 ms–500 ms"  # the fixture's steady step: flat
    assert first["data wait"].endswith(" 30%–30%") and "Per job over the session (0 →" in text
    from gputop_dl.present.report.charts_md import _spark_cell

    # a job that slowed down and recovered, with a stretch unmeasured in between
    cell = _spark_cell([0.1] * 40 + [None] * 20 + [0.3] * 20 + [0.1] * 16, fmt.secs)
    assert cell == "`" + "▁" * 20 + " " * 10 + "█" * 10 + "▁" * 8 + "` 100 ms–300 ms", cell
