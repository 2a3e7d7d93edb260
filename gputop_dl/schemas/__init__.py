"""The published JSON shapes as JSON Schema files (draft 2020-12), shipped in the package.

One file per shape, `NAME.json` beside this module (`snapshot.json` for
`gputop-dl.snapshot/1`, ...); `gputop-dl schema NAME` prints one, `schema --list` names them.
A shape may use another (every verdict is `verdict.json`) by its `$id`,
`{"$ref": "urn:gputop-dl:schema:verdict"}`; `load` bundles what a schema refers to into its
`$defs`, so the printed schema is whole and any draft 2020-12 validator reads it alone.
Adding a field to an output is one edit: its property in the one file that describes it
(docs/contracts.md, "Adding a field"). The Prometheus exporter's shape, its metric and label
names, is `metrics.py` here.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

URN = "urn:gputop-dl:schema:"


def names() -> list[str]:
    """The schemas shipped, by name (the file names without `.json`), sorted."""
    return sorted(p.name[:-5] for p in resources.files(__name__).iterdir()
                  if p.name.endswith(".json"))


def raw(name: str) -> dict[str, Any]:
    """One schema file as it is (its references to other files not bundled); KeyError for a
    name that is not shipped."""
    if name not in names():
        raise KeyError(name)
    doc: dict[str, Any] = json.loads(resources.files(__name__).joinpath(f"{name}.json").read_text("utf-8"))
    return doc


def _refs(node: object, out: set[str]) -> set[str]:
    """The other schema files `node` refers to (by name)."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(URN):
            out.add(ref[len(URN):].split("#", 1)[0])
        for v in node.values():
            _refs(v, out)
    elif isinstance(node, list):
        for v in node:
            _refs(v, out)
    return out


def load(name: str) -> dict[str, Any]:
    """Schema `name`, whole: the files it refers to (and theirs) embedded in its `$defs` under
    their own `$id`, where a 2020-12 validator finds them. KeyError for an unknown name."""
    doc = raw(name)
    todo, done = sorted(_refs(doc, set()) - {name}), {name}
    defs = dict(doc.get("$defs", {}))
    while todo:
        other = todo.pop()
        if other in done:
            continue
        done.add(other)
        sub = raw(other)
        sub.pop("$schema", None)
        defs[f"gputop-dl:{other}"] = sub
        todo.extend(sorted(_refs(sub, set()) - done))
    if defs:
        doc["$defs"] = defs
    return doc


def schema_of(document: dict[str, Any]) -> str:
    """The schema name of a published document, from its `schema` field
    ("gputop-dl.snapshot/1" -> "snapshot"); KeyError when it names none that is shipped."""
    tag = document.get("schema")
    if not isinstance(tag, str) or not tag.startswith("gputop-dl.") or "/" not in tag:
        raise KeyError(tag)
    name = tag[len("gputop-dl."):].split("/", 1)[0]
    raw(name)
    return name
