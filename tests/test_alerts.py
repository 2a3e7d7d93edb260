"""Alert events (present/alert_events.py) and their delivery (runner/alerts.py): once per event,
bounded retries, a failing hook said in one line and never raised."""

import json
from dataclasses import replace
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from gputop_dl.errors import UsageError
from gputop_dl.present.alert_events import AlertEvents
from gputop_dl.runner.alerts import (
    Alerter, check_webhook, parse_command, post_webhook, run_command)
from gputop_dl.snapshot import JobSample, Snapshot
from gputop_dl.stuck import Stuck
from tests.schema_check import check

ST = Stuck(since=100.0, for_s=70.0, threshold_s=60.0, where="lock", frame="t.py:3 work",
           stack=("t.py:3 work",), pid=5, dumps=2, states="S")


def snap(t, *jobs):
    return Snapshot(time=t, gpu_status="ok", jobs=tuple(jobs))


def job(status="running", stuck=None, launched=True, pid=5):
    return JobSample(name="train", pid=pid, launched=launched, status=status, stuck=stuck,
                     failure="exit 1" if status == "failed" else None)


def test_an_event_per_stuck_spell_and_per_failure():
    a = AlertEvents("box")
    seq = [job(), job("stuck", ST), job("stuck", ST), job(), job("stuck", ST), job("failed"),
           job("failed")]
    got = [[check(e)["event"] for e in a.update(snap(float(i), j))] for i, j in enumerate(seq)]
    assert got == [[], ["stuck"], [], [], ["stuck"], ["failed"], []]


def test_a_found_job_that_had_failed_before_the_first_look_is_no_news():
    a = AlertEvents("box")
    assert a.update(snap(0.0, job("failed", launched=False))) == []


def test_the_event_says_where_and_how_to_look():
    (ev,) = AlertEvents("box").update(snap(1.0, job("stuck", ST)))
    assert ev["host"] == "box" and ev["stuck"]["where"] == "lock" and ev["pid"] == 5
    assert "py-spy dump --pid 5" in ev["text"] and ev["line"] in ev["text"]


class Flaky(BaseHTTPRequestHandler):
    fail_first = 0
    seen: list = []

    def do_POST(self):  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers["Content-Length"]))
        Flaky.seen.append(json.loads(body))
        self.send_response(500 if len(Flaky.seen) <= Flaky.fail_first else 200)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    s = HTTPServer(("127.0.0.1", 0), Flaky)
    threading.Thread(target=s.serve_forever, daemon=True).start()
    Flaky.seen = []
    yield f"http://127.0.0.1:{s.server_port}/"
    s.shutdown()


@pytest.mark.parametrize("fail_first,ok,posts", [(0, True, 1), (2, True, 3), (5, False, 3)])
def test_the_webhook_is_retried_three_times_at_most(server, fail_first, ok, posts):
    Flaky.fail_first = fail_first
    err = post_webhook(server, {"text": "x"}, tries=3, pause_s=0.01)
    assert (err is None) == ok and len(Flaky.seen) == posts
    if not ok:
        assert "500" in err and "3 tries" in err


def test_a_dead_webhook_is_one_line_and_the_monitor_goes_on():
    said = []
    a = Alerter(None, "http://127.0.0.1:9/", say=said.append, tries=2, pause_s=0.01, host="box")
    a(snap(1.0, job("stuck", ST)))
    a(snap(2.0, job("stuck", ST)))  # the same spell: not again
    a.close(10)
    assert len(said) == 1 and said[0].startswith("alert webhook failed (stuck train)")
    assert a.sent == 0


def test_the_command_gets_json_on_stdin_and_variables_without_a_shell(tmp_path):
    out = tmp_path / "got"
    prog = ("import json, os, sys; d = json.load(sys.stdin); open(sys.argv[1], 'w').write("
            "json.dumps([d['event'], os.environ['GPUTOP_DL_WHERE'], os.environ['GPUTOP_DL_JOB']]))")
    (ev,) = AlertEvents("box").update(snap(1.0, job("stuck", ST)))
    assert run_command([sys.executable, "-c", prog, str(out)], ev) is None
    assert json.loads(out.read_text()) == ["stuck", "lock", "train"]
    assert run_command(parse_command("sh -c 'echo $0 >&2; exit 3' 'no; shell'"), ev) == "exit 3: no; shell"


def test_a_command_that_hangs_is_killed_at_its_timeout():
    t0 = time.monotonic()
    err = run_command([sys.executable, "-c", "import time; time.sleep(30)"], {"event": "stuck",
                      "job": "j", "host": "h", "text": "t"}, timeout_s=0.5)
    assert err == "killed after 0.5 s" and time.monotonic() - t0 < 10


@pytest.mark.parametrize("bad", ["", "  ", "'unclosed"])
def test_a_bad_command_is_a_usage_error(bad):
    with pytest.raises(UsageError):
        parse_command(bad)


@pytest.mark.parametrize("url,ok", [("https://hooks.example/x", True), ("ftp://x/y", False),
                                    ("hooks.example", False)])
def test_the_webhook_must_be_http(url, ok):
    if ok:
        assert check_webhook(url) == url
    else:
        with pytest.raises(UsageError):
            check_webhook(url)


@pytest.mark.parametrize("args", [["--stuck-after", "0"], ["--stuck-after", "inf"],
                                  ["serve", "--stuck-after", "nan"],
                                  ["serve", "--alert-webhook", "file:///etc/passwd"],
                                  ["--once", "--stuck-after", "5"]])
def test_bad_stuck_flags_are_one_line_and_exit_2(args):
    p = subprocess.run([sys.executable, "-m", "gputop_dl", *args], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "Traceback" not in p.stderr


def test_serve_exports_the_stuck_gauges():
    from gputop_dl.present.prometheus import SnapshotCollector
    from tests.test_serve import one, render

    c = SnapshotCollector(hostname="node1")
    moving = replace(job(pid=6), name="moving", progress_age_s=0.5)
    c.feed(snap(1.0, replace(job("stuck", ST), progress_age_s=70.0), moving,
                replace(job("done", pid=8), name="ended")))
    got = render(c)
    assert one(got, "gputop_dl_job_stuck", job_name="train") == 1.0
    assert one(got, "gputop_dl_job_stuck", job_name="moving") == 0.0
    assert not [s for s in got["gputop_dl_job_stuck"] if s[0]["job_name"] == "ended"]
    assert one(got, "gputop_dl_job_stuck_where_info", job_name="train", where="lock",
               frame="t.py:3 work") == 1.0
    assert one(got, "gputop_dl_job_seconds_since_progress", job_name="train") == 70.0
    assert one(got, "gputop_dl_job_seconds_since_progress", job_name="moving") == 0.5
