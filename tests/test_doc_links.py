"""Every relative link in the README, CONTRIBUTING, CHANGELOG and docs/ leads to a file that
exists, and every `#anchor` to a heading of that file (GitHub's anchor rule)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted([ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "CHANGELOG.md",
               *(ROOT / "docs").rglob("*.md")])
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^(```|~~~)")


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: its text without markup, lower case, punctuation dropped,
    spaces as hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def prose(path: Path) -> list[str]:
    """The file's lines outside fenced code blocks."""
    out, fenced = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line.lstrip()):
            fenced = not fenced
            continue
        out.append("" if fenced else line)
    return out


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in prose(path):
        m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            a = anchor(m.group(1))
            n = seen.get(a, 0)
            seen[a] = n + 1
            out.add(a if n == 0 else f"{a}-{n}")
        out.update(re.findall(r'<a (?:name|id)="([^"]+)"', line))
    return out


def test_the_anchor_rule():
    assert anchor("The suite's time on 2 cores (2026-11-27)") == "the-suites-time-on-2-cores-2026-11-27"
    assert anchor("`q` quits: [how](x.md) fast") == "q-quits-how-fast"
    assert anchor("Slowdown × 2.10 — pace") == "slowdown--210--pace"


def links() -> list[tuple[str, int, str]]:
    out = []
    for path in DOCS:
        for i, line in enumerate(prose(path), 1):
            for target in LINK.findall(re.sub(r"`[^`]*`", "", line)):
                if not re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, mailto: ...
                    out.append((str(path.relative_to(ROOT)), i, target))
    return out


@pytest.mark.parametrize("where,line,target", links())
def test_a_relative_link_leads_somewhere(where, line, target):
    file, _, frag = target.partition("#")
    dest = (ROOT / where).parent / file if file else ROOT / where
    assert dest.exists(), f"{where}:{line}: {target}: no such file"
    if frag and dest.suffix == ".md":
        assert frag in anchors(dest), f"{where}:{line}: {target}: no such heading"
