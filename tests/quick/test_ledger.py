"""The ledger of measurement units (issue 39): what its code key covers, what a run reuses, the status.

- The code a unit measured is what its measurement reaches: the definition's points and measure, not its
  summary; the simulator's modules and not Spark's for a simulator unit; both backends for engine-vs-native.
- A run reuses only the units that still hold.
- ``paper/collect_results.py --status`` says what is not fresh, writes paper/results/README.md, and exits 1 until
  every unit is fresh.
(The killed collection and the staleness rule in a git repository: ``tests/slow/test_ledger_collections.py``.)
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from experiments.ledger import (DIRTY, NOISY, CodeKeys, Provenance, RunPlan, Unit, run_backends, unit_file,
                                write_unit)
from experiments.registry import get_experiment
from experiments.staleness import WorkTree, measured_code

ROOT = Path(__file__).resolve().parents[2]


def test_the_definition_counts_by_the_parts_its_measurement_reaches() -> None:
    tree = WorkTree()
    key = measured_code("experiments.offset_management.definition", ["sim"], {"sim": "sim.backend"}, tree)
    parts = {name.split("#", 1)[1] for name in key.parts if "#" in name}
    assert {"OffsetManagement.points", "OffsetManagement.measure", "CONFIGS"} <= parts
    assert not {"OffsetManagement.summarize", "OffsetManagement.checks", "OffsetManagement.figures"} & parts
    files = {name for name in key.parts if "#" not in name}
    assert {"experiments/measure.py", "sim/backend.py", "sim/latency.py", "reference/protocol/timing.py",
            "sim/profiles/lightspeed_cluster.json"} <= files
    # what the simulator's units never run: the Spark backends, the figures, the verdicts
    assert not {f for f in files if f.startswith("spark_impl/")}
    assert not {"experiments/figures.py", "experiments/verdicts.py"} & files
    native = measured_code("experiments.offset_management.definition", ["spark-native"],
                           {"spark-native": "spark_impl.native.backend"}, tree)
    assert any(name.startswith("spark_impl/native/java/") and name.endswith(".java") for name in native.parts)
    # a run whose points run on two backends measures the code of both
    both = CodeKeys(tree).key("engine-vs-native", run_backends("spark-native", RunPlan(
        "engine-vs-native", "spark-native", "quick").points()))
    assert {"spark_impl/engine/backend.py", "spark_impl/native/backend.py"} <= set(both.parts)


# ------------------------------------------------------------------ the status the paper reads


def _load_collect() -> object:
    spec = importlib.util.spec_from_file_location("paper_collect_results", ROOT / "paper" / "collect_results.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_status_says_what_is_not_fresh_writes_the_readme_and_exits_1_until_all_is_fresh(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    collect = _load_collect()
    monkeypatch.setattr(collect, "RESULTS", tmp_path)
    monkeypatch.setattr(collect, "ROOT", tmp_path.parent)
    run = collect.Run("state-rebalancing", "sim", 1.0, 1.0)       # type: ignore[attr-defined]
    monkeypatch.setattr(collect, "RUNS", (run,))
    plan = run.plan(quick=True)
    points = plan.points()
    assert collect.main(["--status", "--quick"]) == 1           # type: ignore[attr-defined]
    out = capsys.readouterr().out
    assert f"{len(points)} missing" in out and plan.label in out
    readme = (tmp_path / "README.md").read_text()
    assert "## The rule" in readme and "| state-rebalancing on sim, quick |" in readme

    key = CodeKeys.at_head().key(plan.experiment, [plan.backend])
    results = tmp_path / plan.experiment / plan.folder
    version = get_experiment(plan.experiment).version
    for i, point in enumerate(points):
        load = {"noisy": True, "other_share": 0.5, "threshold": 0.05} if i == 0 else None
        record = {"id": point.id, "point": point.to_dict(), "metrics": {}, "error": None, "wall_s": 0.1}
        write_unit(results, Unit(plan.experiment, version, plan.backend, plan.mode, record,
                                 Provenance("abc", i == 1, "t0", "t1", "test", key.key, load)), key)
    assert collect.main(["--status", "--quick", "--no-readme"]) == 1   # type: ignore[attr-defined]
    out = capsys.readouterr().out
    assert f"1 {NOISY}" in out and f"1 {DIRTY}" in out and "50% of the CPU" in out
    for point in points[:2]:
        unit_file(results, point.id).unlink()
        record = {"id": point.id, "point": point.to_dict(), "metrics": {}, "error": None, "wall_s": 0.1}
        write_unit(results, Unit(plan.experiment, version, plan.backend, plan.mode, record,
                                 Provenance("abc", False, "t0", "t1", "test", key.key)), key)
    assert collect.main(["--status", "--quick"]) == 0           # type: ignore[attr-defined]
    assert f"{len(points)}/{len(points)}" in capsys.readouterr().out
    assert "exploratory (1 seed, fewer than 3)" in (tmp_path / "README.md").read_text()


def test_a_run_reuses_only_units_that_still_hold(tmp_path: Path) -> None:
    """The same point, version and code, neither failed nor noisy, and from a clean tree when this one is clean;
    every other unit is measured again."""
    from experiments.ledger import Ledger
    plan = RunPlan("state-rebalancing", "sim", "quick")
    experiment = get_experiment(plan.experiment)
    points = plan.points()[:6]
    code = CodeKeys(WorkTree()).key(plan.experiment, [plan.backend])
    clean = Ledger(tmp_path, experiment, plan.context(), code, {"commit": "abc", "dirty": False})
    provenance = Provenance("abc", False, "t0", "t1", "test", code.key)
    kinds = {"good": {}, "noisy": {"load": {"noisy": True}}, "dirty": {"dirty": True},
             "other code": {"code_key": "0" * 64}}
    for point, (kind, change) in zip(points, kinds.items()):
        record = {"id": point.id, "point": point.to_dict(), "metrics": {"kind": kind}, "error": None, "wall_s": 1.0}
        fields = {**vars(provenance), **change}
        write_unit(tmp_path, Unit(plan.experiment, experiment.version, plan.backend, plan.mode, record,
                                  Provenance(**fields)), code)
    failed = points[4]
    write_unit(tmp_path, Unit(plan.experiment, experiment.version, plan.backend, plan.mode,
                              {"id": failed.id, "point": failed.to_dict(), "metrics": None, "error": "boom",
                               "wall_s": 1.0}, provenance), code)
    moved = points[5]
    changed_point = {**moved.to_dict(), "params": {**moved.params, "extra": 1}}
    write_unit(tmp_path, Unit(plan.experiment, experiment.version, plan.backend, plan.mode,
                              {"id": moved.id, "point": changed_point, "metrics": {}, "error": None, "wall_s": 1.0},
                              provenance), code)
    assert list(clean.reusable(points)) == [points[0].id]
    dirty = Ledger(tmp_path, experiment, plan.context(), code, {"commit": "abc", "dirty": True})
    assert list(dirty.reusable(points)) == [points[0].id, points[2].id], "a dirty tree reuses its own kind"
    assert clean.expected_unit_s() == 1.0


def test_a_code_key_read_from_a_unit_file_is_never_made_a_path_unless_it_is_a_hex_digest(tmp_path):
    from experiments.ledger import read_code
    from experiments.staleness import CodeKey
    key = CodeKey.of({"a.py": "1"})
    (tmp_path / "r" / "units" / "code").mkdir(parents=True)
    (tmp_path / "r" / "units" / "code" / f"{key.key}.json").write_text(json.dumps(key.to_dict()))
    assert read_code(tmp_path / "r", key.key) == key
    (tmp_path / "outside.json").write_text(json.dumps(key.to_dict()))   # a file a tampered key could name
    for tampered in ("../../../outside", "/etc/passwd", key.key[:-1], key.key.upper(), key.key + "0"):
        assert read_code(tmp_path / "r", tampered) is None, tampered


def test_the_ledger_never_writes_through_a_link_in_place_of_its_own_folders(tmp_path):
    from experiments.output_paths import OutputPathError
    from experiments.staleness import CodeKey
    key = CodeKey.of({"a.py": "1"})
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    results = tmp_path / "r"
    results.mkdir()
    (results / "units").symlink_to(elsewhere)
    unit = Unit("x", 1, "sim", "quick", {"id": "p", "point": {}, "metrics": {}, "error": None, "wall_s": 0.1},
                Provenance("abc", False, "t0", "t1", "test", key.key))
    with pytest.raises(OutputPathError, match="symbolic link"):
        write_unit(results, unit, key)
    assert list(elsewhere.iterdir()) == []
