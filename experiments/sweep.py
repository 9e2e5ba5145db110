"""One run of an experiment end to end: its points, then the summary, the sanity checks, results.json, figures.

``run_experiment`` is what ``lightspeed experiment NAME`` and ``lightspeed
demo`` call. Each point is a unit of the run's ledger (``experiments.ledger``):
written as it ends, reused by the next run while it holds. It raises ``ExperimentError`` for bad input; a backend that
cannot run here is not an error but a result (``unavailable``, exit code 3):
nothing is estimated in its place, and an experiment that may (``partial_ok``)
summarises the points that could run.
"""

from __future__ import annotations

import datetime as _dt
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from experiments import exit_codes
from experiments.backends import BACKEND_NAMES, get_backend, on_spark, require_available
from experiments.execution import Budget, execute
from experiments.conditions import unmet
from experiments.verdicts import findings
from experiments.experiment import EXECUTORS, Check, Experiment, ExperimentError, RunContext, json_ready
from experiments.figures import draw_figures
from experiments.ledger import Ledger, planned_points, with_storage_profile  # noqa: F401 - named here too
from experiments.provenance import environment
from experiments.registry import get_experiment
from experiments.results import default_out_dir, write_results
from reference.protocol.backend import BackendUnavailable
from reference.protocol.storage_profiles import StorageProfileError, storage_profile


@dataclass
class ExperimentResult:
    experiment: Experiment
    ctx: RunContext
    records: list[dict[str, Any]]
    summary: dict[str, Any]
    checks: list[Check]
    out_dir: Path
    figures: list[Path]
    results_path: Path
    unavailable: str | None = None
    remaining: list[str] = field(default_factory=list)   # planned points not run yet (the budget ended first)
    reused: int = 0                                        # points whose units were measured before this run

    @property
    def failed_points(self) -> list[dict[str, Any]]:
        return [r for r in self.records if r.get("error")]

    @property
    def exit_code(self) -> int:
        if self.remaining:
            return exit_codes.INTERRUPTED
        if self.unavailable:
            return exit_codes.UNAVAILABLE
        if self.failed_points or any(c.ok is False for c in self.checks):
            return exit_codes.CHECK_FAILED
        return exit_codes.OK


def validate_context(experiment: Experiment, ctx: RunContext) -> None:
    """``ExperimentError`` naming the first bad setting of ``ctx`` for ``experiment``."""
    if ctx.backend not in BACKEND_NAMES:
        raise ExperimentError(f"unknown backend {ctx.backend!r}; expected one of {', '.join(experiment.backends)}")
    if ctx.backend not in experiment.backends:
        hint = (" (it measures the Spark engine; the simulator is what it calibrates)"
                if all(on_spark(b) for b in experiment.backends) else "")
        raise ExperimentError(f"experiment {experiment.name} runs on {', '.join(experiment.backends)}, "
                              f"not on {ctx.backend}{hint}")
    if ctx.seeds is not None and ctx.seeds < 1:
        raise ExperimentError(f"--seeds must be at least 1, got {ctx.seeds}")
    if ctx.workers is not None and ctx.workers < 1:
        raise ExperimentError(f"--workers must be at least 1, got {ctx.workers}")
    if ctx.executor not in EXECUTORS:
        raise ExperimentError(f"unknown executor {ctx.executor!r}; expected one of {', '.join(EXECUTORS)}")
    if ctx.point_timeout_s is not None and ctx.point_timeout_s <= 0:
        raise ExperimentError(f"--point-timeout must be positive, got {ctx.point_timeout_s}")
    if ctx.storage_profile is not None:
        try:
            storage_profile(ctx.storage_profile)
        except StorageProfileError as exc:
            raise ExperimentError(f"--storage-profile: {exc}") from None
        try:
            takes = "storage_profile" in get_backend(ctx.backend).options
        except BackendUnavailable:
            takes = True    # said when the points run
        if not takes:
            raise ExperimentError(f"--storage-profile: backend {ctx.backend} has no checkpoint storage latency to "
                                  "set (the spark engine sleeps the profile, the sim charges it)")


def summarize_run(experiment: Experiment, records: list[dict[str, Any]], ctx: RunContext,
                  stored: dict[str, Any] | None = None) -> tuple[dict[str, Any], list[Check]]:
    """The summary of a run's successful point records and its sanity checks: the experiment's own summary,
    with the run's conditions, and every verdict stamped with the conditions the run did not honour. ``stored``:
    the summary a results file holds, when its run is judged again (``Experiment.summarize_again``)."""
    summary = json_ready(experiment.summarize(records, ctx) if stored is None else
                         experiment.summarize_again(records, stored, ctx))
    conditions = experiment.conditions(ctx)
    summary["run"] = {"experiment": experiment.name, "backend": ctx.backend, "mode": ctx.mode,
                      "seeds": len(experiment.seed_list(ctx)), "storage_profile": experiment.storage(ctx)}
    summary["conditions"] = [c.to_dict() for c in conditions]
    missed = list(unmet(conditions))
    for verdict in summary.get("verdicts", []):
        verdict["unmet"] = missed
    summary["findings"] = json_ready(findings(summary.get("verdicts", [])))
    return summary, experiment.checks(summary, ctx)


def run_experiment(name: str, ctx: RunContext) -> ExperimentResult:
    """Run an experiment end to end: points, summary, checks, results JSON, figures.

    Every point that ends is written to the run's ledger at once (``experiments.ledger``: ``<out>/units/``), and
    a point whose unit is still good (the same point and code, neither failed nor noisy) is not run again unless
    ``ctx.fresh``: a run that was interrupted, or stopped by its budget (``ctx.deadline``), resumes where it
    stopped. ``results.json`` is assembled from the units once every planned point has one; until then the
    result lists the points that ``remain`` and the previous ``results.json`` stays as it was."""
    experiment = get_experiment(name)
    validate_context(experiment, ctx)
    if ctx.point_timeout_s is None:
        ctx.point_timeout_s = experiment.point_timeout_s
    out_dir = Path(ctx.out_dir) if ctx.out_dir else default_out_dir(experiment, ctx)
    started = time.perf_counter()
    started_at = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    unavailable = None
    remaining: list[str] = []
    reused: dict[str, dict[str, Any]] = {}
    ledger: Ledger | None = None
    try:
        require_available(ctx.backend)
        points = planned_points(experiment, ctx)
        ledger = Ledger.open(out_dir, experiment, ctx, points)
        reused = {} if ctx.fresh else ledger.reusable(points)
        todo = [p for p in points if p.id not in reused]
        budget = Budget(ctx.deadline, ledger.expected_unit_s() or _estimated_point_s(experiment, ctx, len(points)))
        label = f"{name} ({ctx.backend}, {ctx.mode})" + (f", {len(reused)} of {len(points)} measured before"
                                                          if reused else "")
        ran = execute(todo, ctx, label=label, on_record=ledger.write, budget=budget)
        by_id = {**reused, **{r["id"]: r for r in ran}}
        records = [by_id[p.id] for p in points if p.id in by_id]
        remaining = [p.id for p in points if p.id not in by_id]
    except BackendUnavailable as exc:
        unavailable, records = str(exc), []
    results_path = out_dir / "results.json"
    if remaining:
        return ExperimentResult(experiment, ctx, records, {}, [], out_dir, [], results_path, unavailable,
                                remaining=remaining, reused=len(reused))
    missing = [r for r in records if r.get("unavailable")]
    if missing and unavailable is None:
        unavailable = missing[0]["error"]
    summary: dict[str, Any] = {}
    checks: list[Check] = []
    artifacts: list[Path] = []
    out_dir.mkdir(parents=True, exist_ok=True)
    good = [r for r in records if not r.get("error")]
    if unavailable is None or (experiment.partial_ok and good):
        summary, checks = summarize_run(experiment, good, ctx)
        artifacts = experiment.write_artifacts(summary, ctx, out_dir)
    write_results(results_path, {
        "experiment": experiment.name, "version": experiment.version, "title": experiment.title,
        "claim": experiment.claim, "backend": ctx.backend, "mode": ctx.mode, "storage_profile": experiment.storage(ctx),
        "seeds": experiment.seed_list(ctx), "started_at": started_at,
        "wall_s": round(time.perf_counter() - started, 3), "environment": environment(ctx),
        "ledger": ledger.summary(records) if ledger is not None else None,
        "unavailable": unavailable, "summary": summary,
        "checks": [asdict(c) for c in checks], "artifacts": [p.name for p in artifacts], "points": records})
    figures: list[Path] = []
    if ctx.figures and summary:
        figures = draw_figures(experiment, summary, ctx, out_dir)
    return ExperimentResult(experiment, ctx, records, summary, checks, out_dir, figures + artifacts, results_path,
                            unavailable, reused=len(reused))


def _estimated_point_s(experiment: Experiment, ctx: RunContext, points: int) -> float:
    """What a point of this run is expected to take before any has been measured: the definition's estimate of
    the whole run on this machine, shared evenly among its points."""
    run = experiment.runs.get(ctx.backend)
    if run is None or points == 0:
        return 0.0
    return (run.quick_minutes if ctx.quick else run.full_minutes) * 60.0 / points
