"""The launch's verdict after the judge (analyse/launch_verdict.py), on hand-made verdicts: no
engine, no process. What each job became, the baselines that failed or cannot be measured, and
what ran beside the solo figures, as evidence and fixes."""

from gputop_dl.analyse.launch_verdict import JobEnd, ProbeRun, finish
from gputop_dl.analyse.live.outside_load import SoloWindow
from gputop_dl.analyse.verdict_types import JobVerdict, Verdict
from gputop_dl.snapshot import ProcLoad

ENDS = [JobEnd("a", "running", steps=40), JobEnd("b", "running", steps=38)]
JUDGED = Verdict(kind="cpu-bound", confidence=0.9, reason="r",
                 recommendations=("measure each job alone (baseline = \"measure\")", "other"),
                 jobs=(JobVerdict(name="a", slowdown=1.8), JobVerdict(name="b", slowdown=1.7)))
LOOP = ProcLoad(pid=4242, cores=1.0, user="ana", command="python3 -c 'while True: pass'")


def test_nothing_to_add_leaves_the_judges_verdict_as_it_is():
    assert finish(JUDGED, ENDS, 2) == JUDGED


def test_jobs_left_out_and_baselines_failed_are_evidence():
    v = finish(JUDGED, ENDS, 2, died={"c": "FileNotFoundError"}, failed_solo={"d": "exit 1"})
    assert v.evidence["died_at_start"] == {"c": "FileNotFoundError"}
    assert v.evidence["failed_baseline"] == {"d": "exit 1"}
    assert v.kind == "cpu-bound" and len(v.evidence_lines) == 2


def test_how_each_job_ended_is_said_only_at_the_end_of_too_little_data():
    thin = JUDGED.replace(kind="insufficient-data")
    ends = [JobEnd("a", "failed", "exit 3", 1), JobEnd("b", "done", steps=2)]
    assert finish(thin, ends, 2) == thin  # still running: "so far" is the judge's to say
    said = finish(thin, ends, 2, final=True).evidence_lines[-1]
    assert "a failed (exit 3) after 1 co-run step;" in said and "b done after 2 co-run steps" in said
    assert finish(JUDGED, ends, 2, final=True) == JUDGED  # a verdict: nothing to explain


def test_jobs_across_nodes_have_no_solo_and_measuring_alone_is_not_offered():
    some = finish(JUDGED, ENDS, 2, across={"a": "spans 2 nodes"})
    assert some.evidence["no_solo"] == {"a": "spans 2 nodes"}
    assert some.recommendations == JUDGED.recommendations  # b may still be measured alone
    every = finish(JUDGED, ENDS, 2, across={"a": "spans 2 nodes", "b": "spans 2 nodes"})
    assert not any("measure each job alone" in r for r in every.recommendations)
    assert len(every.recommendations) == len(JUDGED.recommendations)  # one fix swapped


def test_the_probes_windows_are_evidence_and_a_window_beside_a_loop_is_said():
    quiet = ProbeRun(3.456, (("a", 2.004, ("b",)), ("b", 1.5, ("a",))), {"c": "no steps"})
    v = finish(JUDGED, ENDS, 2, probe=quiet)
    assert v.evidence["probe"] == {"paused_job_s": 3.46, "missing": {"c": "no steps"},
                                   "windows": [{"job": "a", "seconds": 2.0, "paused": ["b"]},
                                               {"job": "b", "seconds": 1.5, "paused": ["a"]}]}
    assert "probe_outside" not in v.evidence and v.kind == "cpu-bound"
    # a's window shared the box with a busy loop: its solo figure was slow, and it says so
    busy = SoloWindow("a", 2.0, wait=0.6, cores=0.3, outside=(LOOP,), step_s=0.12)
    loud = finish(JUDGED, ENDS, 2, probe=ProbeRun(3.456, quiet.windows, beside=[busy]))
    assert loud.evidence["probe_outside"]["a"]["slowdown"] > 1.1
    assert loud.evidence["probe_outside"]["a"]["consumers"][0]["pid"] == 4242


def test_without_a_probe_the_baselines_runs_are_read_for_outside_load():
    busy = SoloWindow("a", 1.5, wait=0.6, cores=0.17, outside=(LOOP,), step_s=0.118)
    v = finish(JUDGED, ENDS, 2, solo=[busy])
    assert v.kind == "cpu-bound"  # the baselines ran before the co-run: the kind stays
    assert v.evidence["baseline_outside"]["a"]["slowdown"] > 1.1
    assert any("baseline = \"measure\"" in r and "4242" in r for r in v.recommendations)
