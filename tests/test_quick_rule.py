"""The quick loop's rule (tests/quick_rule.py) marks what starts processes, and fails when broken."""

import textwrap

# a module beside the tests that starts a process, as a package function would: the rule
# does not follow it (it is not test code), so only the guard can see it
PACKAGE = '''
import subprocess

def start_job():
    subprocess.run(["true"], check=True)
'''

TESTS = '''
import ctypes.util
import os
import subprocess
import sys
import time

import pytest

from pkg_like import start_job


def helper():
    subprocess.run(["true"], check=True)


@pytest.fixture
def job():
    os.system("true")


def test_pure():
    assert 1 + 1 == 2


def test_subprocess_directly():
    subprocess.run(["true"], check=True)


def test_through_a_helper():
    helper()


def test_through_a_fixture(job):
    pass


def test_names_the_interpreter():
    assert sys.executable


def test_a_package_function_the_rule_does_not_see():
    start_job()


def test_finds_a_library():  # ldconfig, as a first `import torch` runs: not the test's process
    assert ctypes.util.find_library("m")


def test_waits_on_wall_time():
    time.sleep(0.5)
'''


def _run(pytester, *args):
    pytester.makepyfile(pkg_like=PACKAGE)  # beside the tests' folder, as the package is
    pytester.mkdir("inner")
    (pytester.path / "inner" / "test_inner.py").write_text(TESTS)
    pytester.syspathinsert()
    return pytester.runpytest_inprocess("-p", "tests.quick_rule", "-o", "quick_limit_s=0.3",
                                        "-W", "ignore::pytest.PytestAssertRewriteWarning", *args)


def test_the_rule_marks_processes_by_what_the_code_reaches(pytester):
    quick = _run(pytester, "-m", "quick", "--collect-only", "-q")
    names = {line.split("::")[-1] for line in quick.outlines if "::" in line}
    assert names == {"test_pure", "test_a_package_function_the_rule_does_not_see",
                     "test_finds_a_library", "test_waits_on_wall_time"}


def test_the_guard_fails_a_quick_test_that_starts_a_process_or_waits(pytester):
    result = _run(pytester, "-rf")
    result.assert_outcomes(passed=6, failed=2)
    failed = {line.split("::")[-1].split(" ")[0] for line in result.outlines
              if line.startswith("FAILED")}
    assert failed == {"test_a_package_function_the_rule_does_not_see", "test_waits_on_wall_time"}


def test_a_process_started_by_a_nested_run_belongs_to_its_test(pytester):
    """This test runs pytest inside itself and is quick: the inner test's process is the
    inner test's, so this one passes (the guard attributes to the innermost test)."""
    pytester.makepyfile(test_inner=textwrap.dedent('''
        import subprocess
        def test_spawns():
            subprocess.run(["true"], check=True)
    '''))
    pytester.runpytest_inprocess("-p", "tests.quick_rule").assert_outcomes(passed=1)


def test_each_package_name_the_rule_knows_still_names_a_function_or_class():
    """A rename or a move of one of them would otherwise leave the rule blind to it."""
    import pathlib
    import re

    from tests.quick_rule import PACKAGE, STARTS_PROCESSES

    root = pathlib.Path(__file__).resolve().parent.parent / PACKAGE
    source = "\n".join(p.read_text(encoding="utf-8") for p in root.rglob("*.py"))
    defined = set(re.findall(r"^\s*(?:def|class) (\w+)", source, flags=re.M))
    assert STARTS_PROCESSES <= defined, STARTS_PROCESSES - defined
