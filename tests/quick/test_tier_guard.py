"""The tier guard (tests/tier_guard.py) fails a test that uses pyspark, a JVM or typst without its marker, and a
test outside its tier; it lets the marked ones and a Java version probe through.

One pytest run in a scratch copy of tests/ (its conftest and the guard, the project's markers) over small test
files, with stand-in pyspark and typst packages and a stand-in ``java`` executable, so nothing here needs
Spark, Java or typst.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent

CASES = {
    "spark/test_imports.py": """
        import pytest

        def test_unmarked_import():
            import pyspark

        @pytest.mark.spark
        def test_marked_import():
            import pyspark
    """,
    "spark/test_module_import.py": """
        import typst
        import pytest

        def test_unmarked_in_a_module_that_imports_typst():
            pass

        @pytest.mark.typst
        def test_marked_in_a_module_that_imports_typst():
            pass
    """,
    "quick/test_java.py": """
        import os
        import shutil
        import subprocess

        def test_which_finds_no_java():
            assert shutil.which("java") is None and shutil.which("javac") is None
            assert os.environ["JAVA_HOME"].startswith("/nonexistent/")

        def test_a_version_probe():
            subprocess.run([os.environ["JAVA_BIN"], "-version"], check=True)

        def test_starting_java():
            subprocess.run([os.environ["JAVA_BIN"], "-cp", "x", "Main"], check=True)
    """,
    "spark/test_java_marked.py": """
        import os
        import shutil

        import pytest

        @pytest.mark.spark
        def test_marked_finds_java():
            assert shutil.which("java") == os.environ["JAVA_BIN"] and "JAVA_HOME" not in os.environ
    """,
    "quick/test_misplaced.py": """
        import pytest

        @pytest.mark.spark
        def test_spark_in_quick():
            pass

        @pytest.mark.soak
        def test_soak_in_quick():
            pass
    """,
    "spark/test_py4j_threads.py": """
        import threading

        import pytest

        GO, SENT = threading.Event(), threading.Event()

        @pytest.mark.spark
        def test_a_marked_test_leaves_a_thread():
            from py4j.java_gateway import GatewayConnection

            def later():
                GO.wait(10)
                GatewayConnection().send_command("x")
                SENT.set()
            threading.Thread(target=later, daemon=True).start()

        def test_an_earlier_tests_thread_talks_meanwhile():
            GO.set()
            assert SENT.wait(10)

        def test_its_own_thread_talks():
            from py4j.java_gateway import GatewayConnection
            own = threading.Thread(target=lambda: GatewayConnection().send_command("x"))
            own.start()
            own.join()
    """,
    "elsewhere/test_no_tier.py": """
        def test_outside_the_tiers():
            pass
    """,
}

# each test of CASES: whether it passes, and what the guard says when it does not
EXPECTED = {
    "test_unmarked_import": "imports pyspark (tests/spark/test_imports.py:5): it needs the 'spark' marker",
    "test_marked_import": None,
    "test_unmarked_in_a_module_that_imports_typst":
        "imports typst (tests/spark/test_module_import.py:2): it needs the 'typst' marker",
    "test_marked_in_a_module_that_imports_typst": None,
    "test_which_finds_no_java": None,
    "test_a_version_probe": None,
    "test_starting_java": "starts java (tests/quick/test_java.py:14): it needs the 'spark' marker",
    "test_marked_finds_java": None,
    "test_spark_in_quick": "it lives in tests/quick/ but is marked ['spark']: it belongs in tests/spark/",
    "test_soak_in_quick": "it lives in tests/quick/ but is marked ['soak']: it belongs in",
    "test_outside_the_tiers": "it lives in tests/elsewhere and no tier folder",
    "test_a_marked_test_leaves_a_thread": None,
    "test_an_earlier_tests_thread_talks_meanwhile": None,   # a leftover thread's doing is not this test's
    "test_its_own_thread_talks": "sends a command to the JVM through py4j",
}


@pytest.fixture(scope="module")
def guarded_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[bool, str]]:
    """Each test of CASES: (passed, the text the run printed about it)."""
    scratch = tmp_path_factory.mktemp("tiers") / "tests"
    scratch.mkdir()
    for name in ("conftest.py", "tier_guard.py"):
        shutil.copy(TESTS / name, scratch / name)
    for path, body in CASES.items():
        (scratch / path).parent.mkdir(exist_ok=True)
        (scratch / path).write_text(textwrap.dedent(body))
    markers = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["markers"]
    (scratch.parent / "pytest.ini").write_text("[pytest]\nmarkers =\n" + "".join(f"    {m}\n" for m in markers))
    for package in ("pyspark", "typst", "py4j"):   # stand-ins: importing them is what is watched
        (scratch.parent / package).mkdir()
        (scratch.parent / package / "__init__.py").write_text("")
    (scratch.parent / "py4j" / "java_gateway.py").write_text(
        "class GatewayConnection:\n    def send_command(self, command):\n        return command\n")
    bin_dir = scratch.parent / "bin"
    bin_dir.mkdir()
    (bin_dir / "java").write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / "java").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}   # this test's own is the guard's
    env.update(PATH=f"{bin_dir}{os.pathsep}{env['PATH']}", PYTHONPATH=str(scratch.parent),
               JAVA_BIN=str(bin_dir / "java"))
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA", "-c",
                           str(scratch.parent / "pytest.ini"), str(scratch)], cwd=scratch.parent, env=env,
                          capture_output=True, text=True, timeout=300)
    outcomes: dict[str, tuple[bool, str]] = {}
    for line in done.stdout.splitlines():
        found = re.match(r"(PASSED|FAILED|ERROR) \S+::(\w+)", line)
        if found:
            passed, said = outcomes.get(found[2], (True, ""))
            outcomes[found[2]] = (passed and found[1] == "PASSED", said + line)
    for name in outcomes:   # the guard's message is printed under the test's own header
        section = re.search(rf"_+ [^\n]*{name}[^\n]* _+\n(.*?)(?=\n_{{5,}} |\n={{5,}} )", done.stdout, re.S)
        outcomes[name] = (outcomes[name][0], outcomes[name][1] + (section[1] if section else ""))
    assert set(outcomes) == set(EXPECTED), done.stdout
    return outcomes


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_guard_passes_or_fails_each_case_saying_why(guarded_run: dict[str, tuple[bool, str]], name: str):
    passed, said = guarded_run[name]
    expected = EXPECTED[name]
    if expected is None:
        assert passed, said
    else:
        assert not passed and expected in said, said
