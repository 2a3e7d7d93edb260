"""The report's "Verdict" section: the verdict's title, reason, evidence lines, per-job lines,
recommendations and its evidence numbers. From a `session_json` dict's `verdict`."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from gputop_dl.present.verdict_text import job_line
from gputop_dl.text.fmt import pct
from gputop_dl.text.markdown import md_cell, md_text, table


def _fmt_evidence(v: object) -> str:
    if isinstance(v, bool) or v is None:
        return md_cell(v)
    if isinstance(v, float):
        return f"{v:.3g}"
    if isinstance(v, dict):
        return md_cell(", ".join(f"{k} {_plain(x)}" for k, x in v.items()) or "none")
    if isinstance(v, (list, tuple)):
        return md_cell(", ".join(_plain(x) for x in v) or "none")
    return md_cell(v)


def _plain(x: object) -> str:
    if isinstance(x, float):
        return f"{x:.3g}"
    if isinstance(x, (dict, list)):
        return json.dumps(x, separators=(",", ":"), default=str)
    return str(x)


def verdict_section(v: Mapping[str, Any] | None) -> str:
    if not v:
        return "## Verdict\n\nNo verdict recorded."
    out = ["## Verdict", ""]
    title = md_text(v.get("title") or v.get("kind") or "verdict")
    meta = [f"kind: {md_text(v['kind'])}"] if v.get("kind") else []
    conf = v.get("confidence")
    if conf is not None:
        meta.append(f"confidence: {pct(conf)}" if isinstance(conf, float) and 0 <= conf <= 1
                    else f"confidence: {md_text(conf)}")
    out.append(f"**{title}**" + (f" ({'; '.join(meta)})" if meta else ""))
    if v.get("reason"):
        out += ["", md_text(v["reason"])]
    out += ["", "*The verdict's co-run figures are taken over the overlap window (every job past "
            "its warm-up, none finished yet); the results table uses all co-run steps after "
            "warm-up, so the two can differ a little.*"]
    if v.get("evidence_lines"):
        out += ["", "**Evidence**", ""] + [f"- {md_text(x)}" for x in v["evidence_lines"]]
    vjobs = [j for j in v.get("jobs") or [] if isinstance(j, dict)]
    if vjobs:
        out += ["", "**Per job**", ""]
        for j in vjobs:
            name, line = str(j.get("name") or ""), job_line(j)
            if line is None:
                line = ", ".join(f"{k} {val}" for k, val in j.items() if k != "name")
            line = str(line)
            out.append(f"- {md_text(line)}" if line.startswith(name) and name
                       else f"- **{md_text(name)}**: {md_text(line)}")
    if v.get("recommendations"):
        out += ["", "**Recommendations**", ""]
        out += [f"{i}. {md_text(r)}" for i, r in enumerate(v["recommendations"], 1)]
    ev = v.get("evidence")
    if isinstance(ev, dict) and ev:
        out += ["", "**Evidence (numbers)**", "", table(["evidence", "value"],
                           [[md_cell(k), _fmt_evidence(val)] for k, val in ev.items()], "lr")]
    return "\n".join(out)
