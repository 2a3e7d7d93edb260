"""docs/architecture.md's module list and the package agree: every module named, none gone."""

import os
import re

ROOT = os.path.join(os.path.dirname(__file__), "..")
PKG = os.path.join(ROOT, "gputop_dl")


def _module_list() -> tuple[set[str], set[str]]:
    """The modules (`- `path`: job` lines) and the packages (`**`path/`**` headers) of the
    section "The modules, floor by floor", paths under gputop_dl/."""
    text = open(os.path.join(ROOT, "docs", "architecture.md"), encoding="utf-8").read()
    section = text.split("\n## The modules, floor by floor\n", 1)[1].split("\n## ", 1)[0]
    modules = set(re.findall(r"^- `([\w/]+\.py)`: \S", section, re.M))
    packages = set(re.findall(r"^\*\*`([\w/]+)/`\*\*", section, re.M))
    return modules, packages


def _package_files() -> set[str]:
    out = set()
    for root, dirs, files in os.walk(PKG):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        out |= {os.path.relpath(os.path.join(root, f), PKG).replace(os.sep, "/")
                for f in files if f.endswith(".py")}
    return out


def _missing(modules: set[str], packages: set[str], files: set[str]) -> list[str]:
    """The package's modules the list does not name (a package's bare `__init__.py` is named
    by its header)."""
    return sorted(f for f in files if f not in modules
                  and not (f.endswith("/__init__.py") and f.rsplit("/", 1)[0] in packages))


def test_every_module_is_listed_with_its_job():
    modules, packages = _module_list()
    missing = _missing(modules, packages, _package_files())
    assert not missing, f"not in docs/architecture.md's module list: {missing}"


def test_the_list_names_no_module_that_is_gone():
    modules, packages = _module_list()
    files = _package_files()
    gone = sorted(m for m in modules if m not in files)
    gone += sorted(p + "/" for p in packages if not os.path.isdir(os.path.join(PKG, p)))
    assert not gone, f"docs/architecture.md lists what the package no longer has: {gone}"


def test_the_check_finds_a_module_left_out():
    """The check can fail: drop one module and one package header from the list."""
    modules, packages = _module_list()
    files = _package_files()
    base = set(_missing(modules, packages, files))
    assert set(_missing(modules - {"collect/machine.py"}, packages, files)) - base == {"collect/machine.py"}
    assert set(_missing(modules, packages - {"collect/nvml"}, files)) - base == {"collect/nvml/__init__.py"}
