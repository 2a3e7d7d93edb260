"""The precedence of a job's slowdown figures (analyse/slowdown/figure.py): this file IS the
table. Every route in order, what it gives way to, and every pair of routes decided by the one
chooser that the live judge, `diagnose` and `launch` call; docs/slowdown.md lists the same."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

from gputop_dl.analyse.slowdown.figure import (ROUTES, SlowdownFigure, choose, measured)

OWN = ("own readings", "twin", "stored run")
# (kind, method, references, gives way to this route where the two agree)
TABLE = [
    ("measured", "step times", ("solo baseline",), None),
    ("probe", "step times", ("probe window",), None),
    ("probe", "loader writes", ("probe window",), ("probe", "py-spy steps")),
    ("probe", "loader CPU", ("probe window",), ("probe", "py-spy steps")),
    ("probe", "py-spy steps", ("probe window",), None),
    ("pace", "loader writes", OWN, None),
    ("pace", "loader CPU", OWN, ("estimate", "wait model")),
    ("pace", "loop counter", OWN, None),
    ("pace", "py-spy steps", OWN, ("estimate", "wait model")),
    ("estimate", "wait model", ("no waits",), None),
]


def fig(row, value, doubt=None):
    kind, method, refs, _ = row
    return SlowdownFigure(value, kind, method, refs[0], doubt=doubt)


def test_the_routes_are_the_table_in_its_order():
    assert [(r.kind, r.method, r.references, r.check) for r in ROUTES] == TABLE


@pytest.mark.parametrize("hi, lo", list(itertools.combinations(TABLE, 2)),
                         ids=lambda r: f"{r[0]}·{r[1]}")
def test_of_two_routes_the_higher_wins_unless_it_gives_way_to_the_lower(hi, lo):
    gives_way = hi[3] == lo[:2]
    a, near, far = fig(hi, 2.0), fig(lo, 1.9), fig(lo, 4.0)  # within and beyond CONTRADICT
    assert choose([near, a]) is (near if gives_way else a)  # the order given does not matter
    assert choose([far, a]) is a
    doubtful = fig(lo, 1.9, doubt="its intra-op pool spins")
    assert choose([doubtful, a]) is a  # a doubtful figure never holds a higher one back
    unknown = fig(hi, None)
    assert choose([unknown, near]) is near and choose([unknown]) is None


def test_launch_measures_by_its_steps_against_its_baseline_or_its_probe_window():
    assert measured(1.5, probe=False).route == ("measured", "step times")
    assert measured(1.5, probe=False).reference == "solo baseline"
    assert measured(1.5, probe=True).reference == "probe window"
    assert measured(None, probe=False) is None


def test_the_doc_lists_the_routes_in_the_tables_order():
    doc = (Path(__file__).parents[1] / "docs" / "slowdown.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| (\d+) \| (\w+) \| ([\w -]+?) \|", doc, re.M)
    assert [(k, m) for _, k, m in rows] == [(r[0], r[1]) for r in TABLE]
    for r in ROUTES:
        assert r.made_by.split(" ")[0] in doc


@pytest.mark.parametrize("method, reference, words", [
    ("loader writes", "own readings", "its loader's batches alone and now"),
    ("loader CPU", "twin", "its loader's CPU its twin's alone, its own now"),
    ("loop counter", "stored run", "its own loop counter a stored run's alone, its own now"),
    ("py-spy steps", "own readings", "its py-spy step times alone and now"),
])
def test_a_paces_line_says_its_method_and_reference(method, reference, words):
    from gputop_dl.present.verdict_text import passive_line

    line = passive_line({"name": "a", "slowdown": 2.1, "slowdown_source": "own pace",
                         "slowdown_method": method, "slowdown_reference": reference,
                         "cpu_wait": 0.5})
    assert f"by its own pace ({words})" in line
    assert ("loader" in line) == method.startswith("loader")  # a counter is no loader


def test_a_rows_details_say_where_its_slowdown_comes_from():
    from gputop_dl.present.tui.job_detail import _identity_rows
    from gputop_dl.present.verdict_text import provenance_text
    from gputop_dl.snapshot import JobSample

    j = JobSample(name="a", pid=1, launched=False, slowdown=2.1, slowdown_source="own pace",
                  slowdown_method="loader writes", slowdown_reference="twin")
    assert dict(_identity_rows(j))["slowdown"] == "2.10× pace · batches · twin"
    assert provenance_text(1.64, "measured", "step times", "solo baseline") == (
        "1.64× meas · steps · solo")
    assert provenance_text(None, "measured", None, None) == "–"


@pytest.mark.parametrize("mode, source, route, reference", [
    ("measure", "trainer", ("measured", "step times"), "solo baseline"),
    ("cache", "hook", ("measured", "step times"), "solo baseline"),
    ("probe", "trainer", ("probe", "step times"), "probe window"),
    ("probe", "py-spy", ("probe", "py-spy steps"), "probe window"),
])
def test_a_measured_verdicts_jobs_say_where_their_slowdown_comes_from(mode, source, route,
                                                                      reference):
    from gputop_dl.analyse.verdict import judge
    from gputop_dl.analyse.verdict_evidence import HostEvidence, JobEvidence

    jobs = [JobEvidence(name=n, device="cpu", gpus=(), steps=40, step_time_s=0.3, stall=0.1,
                        cpu_cores=1.0, solo_step_time_s=0.2, solo_stall=0.05,
                        solo_cpu_cores=1.0, solo_steps=40, source=source)
            for n in ("a", "b")]
    v = judge(jobs, HostEvidence(cpus=2, busy=1.0, psi_some10=0.5, load1=4.0), mode)
    SOURCE = {"measured": "measured", "probe": "probe"}
    for row in v.to_json()["jobs"]:
        assert row["slowdown"] == pytest.approx(1.5)
        assert (row["slowdown_source"], row["slowdown_method"], row["slowdown_reference"]) == (
            SOURCE[route[0]], route[1], reference)
