"""``make mutation`` keeps up (issue 39, section 3 item 4): every module of ``reference/`` and ``sim/`` is judged by
some tests, and a module is run again exactly when its key changes: its text, or the text of the tests that judge
it. Nothing here runs a mutant (``make mutation`` does, for hours); the choice of what to run is what is tested."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _runner():
    spec = importlib.util.spec_from_file_location("mutation_run", ROOT / "tests" / "mutation" / "run.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


run = _runner()


def test_every_module_of_the_judge_and_the_simulator_is_judged_by_tests_that_run_without_spark() -> None:
    modules = run.module_files()
    on_disk = sorted(p.relative_to(ROOT).as_posix() for pkg in ("reference", "sim") for p in (ROOT / pkg).rglob("*.py")
                     if "__pycache__" not in p.parts)
    assert modules == on_disk
    for module in modules:
        tests = run.tests_for(module)
        assert tests, f"{module}: no test reaches it"
        for test in tests:
            path = ROOT / test.split("::")[0]
            assert path.exists() and "bench" not in path.parts, (module, test)
    # a documented subset wins over the import graph
    assert run.tests_for("sim/latency.py") == run.MODULES["sim/latency"]


def test_a_module_is_run_again_when_it_or_its_tests_change_and_only_then(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    project = tmp_path / "project"
    (project / "reference").mkdir(parents=True)
    (project / "tests").mkdir()
    (project / "reference" / "__init__.py").write_text("")
    (project / "reference" / "alpha.py").write_text("def f(x):\n    return x + 1\n")
    (project / "reference" / "beta.py").write_text("def g(x):\n    return x * 2\n")
    (project / "tests" / "conftest.py").write_text("")
    (project / "tests" / "test_alpha.py").write_text("from reference.alpha import f\n\ndef test_f():\n"
                                                     "    assert f(1) == 2\n")
    (project / "tests" / "test_beta.py").write_text("from reference.beta import g\n\ndef test_g():\n"
                                                    "    assert g(2) == 4\n")
    monkeypatch.setattr(run, "ROOT", project)
    monkeypatch.setattr(run, "TESTS", project / "tests")
    monkeypatch.setattr(run, "MODULES", {})
    monkeypatch.setattr(run, "PACKAGES", ("reference",))
    for cached in (run._imports_of_tests, run._importers_in_scope):
        cached.cache_clear()

    def keys() -> dict[str, str]:
        return {m: run.module_key(m, run.tests_for(m)) for m in ("reference/alpha.py", "reference/beta.py")}

    assert run.tests_for("reference/alpha.py") == ["tests/test_alpha.py"]
    before = keys()
    (project / "reference" / "alpha.py").write_text("def f(x):\n    return x + 2\n")
    after_code = keys()
    assert after_code["reference/alpha.py"] != before["reference/alpha.py"]
    assert after_code["reference/beta.py"] == before["reference/beta.py"], "another module's change is not beta's"
    (project / "tests" / "test_beta.py").write_text((project / "tests" / "test_beta.py").read_text() + "\n# more\n")
    after_test = keys()
    assert after_test["reference/beta.py"] != after_code["reference/beta.py"]
    assert after_test["reference/alpha.py"] == after_code["reference/alpha.py"]


def test_the_plan_carries_an_up_to_date_module_and_runs_a_changed_one(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    module = "reference/protocol/trigger.py"
    tests = run.tests_for(module)
    current = {"total": 1, "killed": 1, "survived": 0, "equivalent": 0, "not_run": 0, "tests": tests,
               "key": run.module_key(module, tests)}
    out = tmp_path / "mutation.json"
    out.write_text(json.dumps({"per_module": {module: current}}))
    assert run.main(["--plan", "--modules", "trigger", "--out", str(out)]) == 0
    assert "1 up to date, 0 to run" in capsys.readouterr().out
    out.write_text(json.dumps({"per_module": {module: {**current, "key": "measured before a change"}}}))
    assert run.main(["--plan", "--modules", "trigger", "--out", str(out)]) == 0
    assert f"to run: {module}" in capsys.readouterr().out
    out.write_text(json.dumps({"per_module": {module: {**current, "not_run": 3}}}))
    assert run.main(["--plan", "--modules", "trigger", "--out", str(out)]) == 0
    assert f"to run: {module}" in capsys.readouterr().out, "a module stopped at the budget is not up to date"
