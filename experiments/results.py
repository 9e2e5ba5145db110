"""An experiment's results file: ``<out>/results.json``, where it goes, reading it back, and reproducing it.

The file holds every point's record (its scenario, seed, profile and
metrics), the summary and the sanity checks, with the package versions and
the environment (``provenance.py``); re-running a point with the same seed
gives the same numbers (``reproduce``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

from experiments.execution import run_point
from experiments.experiment import Experiment, ExperimentError, RunContext
from experiments.input_files import read_text
from experiments.output_paths import write_text

RESULTS_ROOT = Path("results") / "experiments"


def default_out_dir(experiment: Experiment, ctx: RunContext) -> Path:
    storage = f"-{ctx.storage_profile}" if ctx.storage_profile else ""
    return RESULTS_ROOT / experiment.name / f"{ctx.backend}-{ctx.mode}{storage}"


def write_results(path: Path, document: dict[str, Any]) -> None:
    """Write a results file whole or not at all, never through a link (``output_paths.write_text``); whether an
    existing one may be replaced is decided before the run (``experiment_cli``)."""
    write_text(path, json.dumps(document, indent=1, sort_keys=True) + "\n", "the experiment's results")


def load_results(results_path: str | Path) -> dict[str, Any]:
    """A results file; ``InputFileError`` when it cannot be read, ``ExperimentError`` naming it when it is not one."""
    text = read_text(results_path, "an experiment's results.json")
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ExperimentError(f"{results_path}: not valid JSON: {exc}") from None
    if not isinstance(document, dict) or "points" not in document or "experiment" not in document:
        raise ExperimentError(f"{results_path}: not an experiment results file (no experiment or points)")
    return document


def reproduce(results_path: str | Path, point_ids: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """Re-run points of a results file; one entry per point with ``same`` (metrics identical) and both."""
    document = load_results(results_path)
    wanted = set(point_ids) if point_ids else None
    out = []
    for record in document.get("points", []):
        if wanted is not None and record["id"] not in wanted:
            continue
        if record.get("error"):
            continue
        again = run_point(record["point"])
        out.append({"id": record["id"], "same": again["metrics"] == record["metrics"],
                    "recorded": record["metrics"], "again": again["metrics"], "error": again.get("error")})
    if wanted is not None:
        unknown = wanted - {e["id"] for e in out}
        if unknown:
            raise ExperimentError(f"no such successful point in {results_path}: {', '.join(sorted(unknown))}")
    return out
