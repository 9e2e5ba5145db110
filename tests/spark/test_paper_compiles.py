"""The paper compiles with typst, from the committed results and from results with some backends absent or
added (moved from tests/slow/test_paper.py, whose checks need no typst; these do, so they carry its marker)."""

from __future__ import annotations

import json
import shutil

import pytest
from test_paper import PAPER, build


@pytest.mark.typst
def test_absent_backends_are_said_to_be_absent(tmp_path):
    """Without some backend's results the generated text says so instead of showing a number, and the paper
    still compiles: a figure placed by index (the engine's, in the appendix) becomes a labelled placeholder."""
    paper = tmp_path / "paper"
    shutil.copytree(PAPER, paper, ignore=shutil.ignore_patterns("*.pdf", "generated", "figures"))
    copy = paper / "results"
    for run in list(copy.glob("offset-management/*")) + list(copy.glob("pipelining/spark-*")):
        shutil.rmtree(run)
    files, copies, drawn = build.generate(copy)
    assert "not run" in files["numbers.typ"] and "not run" in files["tables.typ"]
    assert 'om_sim_base_p50: "n/a"' in files["numbers.typ"]
    assert "pipelining__spark" not in files["figures.typ"]
    build.write(files, copies, drawn, paper)
    build.compile_pdf(paper, tmp_path / "paper.pdf")
    assert (tmp_path / "paper.pdf").read_bytes()[:4] == b"%PDF"


@pytest.mark.typst
def test_the_paper_compiles(tmp_path):
    import typst   # installed by make (pyproject): its absence is a failure, not a skip
    out = tmp_path / "paper.pdf"
    typst.compile(str(PAPER / "lightspeed-ref.typ"), output=str(out), root=str(PAPER), ignore_system_fonts=True)
    assert out.read_bytes()[:4] == b"%PDF"


@pytest.mark.typst
def test_spark_results_and_the_missing_files_are_picked_up_when_present(tmp_path):
    """Results of the Spark backends in the same layout, a mutation score and a bug zoo fill the paper's
    cells and replace the 'not run' sentences; the paper still compiles."""
    import typst   # installed by make (pyproject): its absence is a failure, not a skip
    paper = tmp_path / "paper"
    shutil.copytree(PAPER, paper, ignore=shutil.ignore_patterns("*.pdf", "generated", "figures"))
    results = paper / "results"
    for experiment in ("offset-management", "pipelining", "async-state-checkpoint", "fault-matrix"):
        sim = results / experiment / "sim-quick"
        for backend in ("spark", "spark-native") if experiment in ("offset-management", "fault-matrix") else ("spark",):
            target = results / experiment / f"{backend}-full"
            shutil.rmtree(target, ignore_errors=True)   # a real run kept in the repository is replaced
            shutil.copytree(sim, target)
            doc = json.loads((target / "results.json").read_text())
            doc["backend"], doc["mode"] = backend, "full"
            if experiment == "fault-matrix":
                doc["summary"]["counts"][backend] = doc["summary"]["counts"]["sim"]
            (target / "results.json").write_text(json.dumps(doc))
    calibration = results / "calibration" / "spark-full"
    calibration.mkdir(parents=True, exist_ok=True)   # a real run kept in the repository is replaced
    row = {"workload": "stateless", "config": "baseline", "role": "fit", "measured_p50": 700.0,
           "predicted_p50_shipped": 500.0, "predicted_p50_fitted": 690.0, "error_shipped": -0.29,
           "error_fitted": -0.01}
    (calibration / "results.json").write_text(json.dumps({
        "experiment": "calibration", "backend": "spark", "mode": "full", "seeds": [1, 2], "wall_s": 60.0,
        "environment": {}, "points": [], "summary": {"rows": {"stateless/baseline": row},
                                                     "validation_mean_abs_error": 0.12}}))
    (results / "mutation.json").write_text(json.dumps({
        "tool": "mutmut", "date": "2026-12-01", "scope": ["reference/"], "total": 10, "killed": 8, "survived": 1,
        "equivalent": [{"mutant": "m1", "reason": "dead branch"}], "score_percent": 88.9}))
    (results / "zoo.json").write_text(json.dumps([
        {"jira": "SPARK-43404", "planted": "retried task reuses a file", "caught_by": "lineage", "seconds": 1.5,
         "unplanted_passes": True}]))
    files, copies, drawn = build.generate(results)
    numbers = files["numbers.typ"]
    assert "has not been measured in this build" not in numbers and "has not been run in this build" not in numbers
    assert "paper/results/offset-management/spark-full/results.json" in numbers
    assert 'cal_spark_validation: "12%"' in numbers and 'mut_score: "88.9"' in numbers
    tables = files["tables.typ"]
    assert "PySpark engine, full, 1 seed, 100K\\/s" in tables and "SPARK-43404" in tables
    assert any("spark-full" in name for name in copies)
    build.write(files, copies, drawn, paper)
    build.compile_pdf(paper, tmp_path / "paper.pdf")
    assert (tmp_path / "paper.pdf").read_bytes()[:4] == b"%PDF"
