"""Every published JSON document a test sees is checked against its shipped schema here.

`check(doc)` validates a document by its own `schema` field (`check(doc, "verdict")` for a
shape without one) and returns it, so a test reads `doc = check(json.loads(out))`. The
`conftest.py` fixture `schema_checked` also wraps the producers that are methods
(`Snapshot.to_json`, `Verdict.to_json`, `DiagnosePlan.result`), so every snapshot, verdict
and diagnosis built in any test is checked as it is made.
"""

from __future__ import annotations

import functools
import json

import jsonschema

from gputop_dl import schemas


@functools.cache
def validator(name: str) -> jsonschema.Draft202012Validator:
    schema = schemas.load(name)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def problems(doc: object, name: str | None = None) -> list[str]:
    """What is wrong with `doc` under schema `name` (default: its `schema` field), one line
    each, as a reader of its JSON text sees it."""
    if name is None:
        assert isinstance(doc, dict), f"not a JSON object: {type(doc).__name__}"
        name = schemas.schema_of(doc)
    try:  # what a reader gets: tuples are arrays, and NaN or infinity is not JSON
        doc = json.loads(json.dumps(doc, allow_nan=False))
    except ValueError as exc:
        return [f"{name}: not strict JSON ({exc})"]
    errs = sorted((_leaf(e) for e in validator(name).iter_errors(doc)),
                  key=lambda e: [str(k) for k in e.absolute_path])
    return [f"{name}: at /{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errs]


def _leaf(e: jsonschema.ValidationError) -> jsonschema.ValidationError:
    """The error inside a failed `anyOf` (null or an object, mostly) that says what is wrong."""
    while e.context:
        e = max(e.context, key=lambda c: (len(c.absolute_path), c.validator != "type"))
    return e


def check(doc, name: str | None = None):
    """`doc`, after asserting that it is valid under its schema (see `problems`)."""
    found = problems(doc, name)
    assert not found, "output leaves its schema:\n" + "\n".join(found[:20])
    return doc
