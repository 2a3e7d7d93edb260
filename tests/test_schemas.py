"""The shipped JSON Schemas: `gputop-dl schema`, real outputs valid under them, and the check
failing where it must (an unknown field, a wrong type), so that it cannot pass vacuously."""

import copy
import glob
import json
import os

import jsonschema
import pytest

from gputop_dl import cli, schemas
from gputop_dl.analyse.verdict_types import KINDS, JobVerdict, Verdict
from gputop_dl.snapshot import GpuSample, HostSample, JobSample, Snapshot
from tests.schema_check import check, problems

# the shapes of docs/contracts.md (a new one adds its file to gputop_dl/schemas/)
PUBLISHED = {"comparison", "diagnosis", "fleet", "machine", "plan", "session", "sessions",
             "simulation", "snapshot", "sweep", "verdict"}
NAMES = schemas.names()
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_every_published_shape_has_a_schema_and_each_is_whole():
    assert PUBLISHED <= set(NAMES) and NAMES == sorted(NAMES)
    for name in NAMES:
        doc = schemas.load(name)
        jsonschema.Draft202012Validator.check_schema(doc)
        assert doc["$id"] == schemas.URN + name
        # whole: every reference to another file is embedded under its $id
        embedded = {d.get("$id") for d in doc.get("$defs", {}).values()}
        for ref in schemas._refs(doc, set()):
            assert ref == name or schemas.URN + ref in embedded, (name, ref)


@pytest.mark.slow("--once in-process reads the box's jobs with py-spy")
def test_schema_command_prints_one_that_a_real_once_json_validates_against(capsys):
    assert cli.main(["schema", "snapshot"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert schema["title"] == "gputop-dl.snapshot/1"
    assert cli.main(["--once", "--json"]) == 0
    snap = json.loads(capsys.readouterr().out)
    jsonschema.Draft202012Validator(schema).validate(snap)  # as a user's own tool would
    assert snap["host"]["cpus"] >= 1


def test_schema_list_and_the_full_tag(capsys):
    assert cli.main(["schema", "--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [ln.split()[0] for ln in lines] == NAMES
    assert "snapshot    gputop-dl.snapshot/1" in lines
    assert cli.main(["schema", "gputop-dl.diagnosis/1"]) == 0
    assert json.loads(capsys.readouterr().out)["title"] == "gputop-dl.diagnosis/1"


@pytest.mark.parametrize("argv, why", [(["schema", "snap"], "unknown schema 'snap'"),
                                        (["schema"], "give a NAME"),
                                        (["schema", "snapshot", "--list"], "not both")])
def test_schema_usage_errors_are_one_line_and_exit_2(argv, why, capsys):
    assert cli.main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1 and why in err
    if "NAME" in why or "unknown" in why:
        assert ", ".join(NAMES) in err


def _snapshot() -> dict:
    job = JobSample(name="bs32", pid=42, launched=True, pids=(42, 43), cpu_cores=1.5,
                    stall_fraction=0.2, cpu_wait_fraction=0.3, epoch_times=(1.0, 2.0),
                    rank_cpu_cores=((0, 1.5),), phase_shares=(("data", 0.5),))
    gpu = GpuSample(index=0, name="H100", util=0.9, throttle=(("power", 0.3), ("thermal", None)))
    verdict = Verdict(kind="cpu-bound", reason="r", confidence=0.8,
                      jobs=(JobVerdict(name="bs32", slowdown=1.9, source="estimated"),))
    return Snapshot(time=1.0, gpu_status="ok", gpus=(gpu,), host=HostSample(cpus=4, cpu_busy=0.5),
                    jobs=(job,), verdict=verdict.to_json()).to_json()


@pytest.mark.parametrize("where", [(), ("jobs", 0), ("gpus", 0), ("gpus", 0, "pcie"), ("host",),
                                   ("jobs", 0, "waits"), ("verdict",), ("verdict", "jobs", 0)])
def test_a_field_added_without_its_schema_fails(where):
    doc = check(_snapshot())
    bad = copy.deepcopy(doc)
    node = bad
    for key in where:
        node = node[key]
    node["added_without_schema"] = 1
    found = problems(bad)
    assert len(found) == 1 and "added_without_schema" in found[0], found
    assert f"/{'/'.join(map(str, where))}:" in found[0]


@pytest.mark.parametrize("path, value", [(("time",), None), (("jobs", 0, "cpu_cores"), "1.5"),
                                         (("jobs", 0, "stall_fraction"), 1.5),
                                         (("verdict", "kind"), "sideways"), (("host",), {})])
def test_a_wrong_type_or_a_missing_field_fails(path, value):
    bad = _snapshot()
    node = bad
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    assert problems(bad)
    with pytest.raises(AssertionError, match="output leaves its schema"):
        check(bad)


def test_a_snapshot_made_with_an_unknown_field_fails_where_it_is_made(monkeypatch):
    """The conftest wrapper checks what `Snapshot.to_json` returns, in every test: a field the
    code adds without its schema fails the first test that makes one."""
    from gputop_dl import snapshot_json

    real = snapshot_json.gpu_json
    monkeypatch.setattr(snapshot_json, "gpu_json", lambda g: dict(real(g), memory_clock=1))
    with pytest.raises(AssertionError, match="'memory_clock' was unexpected"):
        Snapshot(time=1.0, gpu_status="ok", gpus=(GpuSample(index=0),)).to_json()


def test_nan_is_not_json():
    doc = _snapshot()
    doc["jobs"][0]["cpu_cores"] = float("nan")
    (found,) = problems(doc)
    assert found.startswith("snapshot: not strict JSON (Out of range float values"), found


def test_the_verdict_kinds_are_the_schemas():
    assert schemas.load("verdict")["properties"]["kind"]["enum"] == list(KINDS)


def test_schema_of_a_document():
    assert schemas.schema_of({"schema": "gputop-dl.session/1"}) == "session"
    for tag in ("gputop-dl.nothing/1", None, "other.snapshot/1"):
        with pytest.raises(KeyError):
            schemas.schema_of({"schema": tag})


EXAMPLES = sorted(os.path.relpath(p, ROOT)
                  for p in glob.glob(os.path.join(ROOT, "docs", "examples", "**", "*.json"), recursive=True))


def test_the_docs_have_json_examples():
    assert "docs/examples/mobilenet_trio_cpu.json" in EXAMPLES


@pytest.mark.parametrize("path", EXAMPLES)
def test_every_json_example_in_the_docs_is_valid_under_its_schema(path):
    """An example a reader copies from (README, docs) is what the current version writes."""
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        check(json.load(f))
