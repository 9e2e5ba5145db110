"""The exhaustive explorer on the example scenarios (``reference.judge.explorer``), as an experiment.

One point per entry of ``RUNS``: an example scenario of ``experiments/scenarios/`` (shared with the demo and the
tests, so it stays there), its engine section changed as the entry says (a mode, a provider, a pipeline depth),
its own faults dropped. The point explores every crash cut of the scenario's first run and every single fault a
task or maintenance survives (``reference.judge.explorer.single_faults``: task failure, executor loss, a storage write
error, a zombie write), at depth 1 in quick mode and depth 2 (a second crash during each recovery) in full mode,
and judges every schedule with every oracle. The explorer is deterministic, so one seed is all there is.

Its scope is exactly what ``summary.scope`` records and the paper's explorer table shows: the operators, modes,
providers, batches and state partitions of these scenarios, the fault kinds above, the depth. Anything else
(a join and its store orders, a redelivering source, rebalancing, a second fault at every interleaving of a
recovery) is outside it; the fault matrix and the property tests are what cover those.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from experiments.experiment import BackendRun, Check, Experiment, Point, RunContext
from reference.judge.explorer import Model, explore, first_graph, writing_cuts
from reference.language.scenario import Scenario

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"
QUICK_DEPTH, FULL_DEPTH = 1, 2
FAULT_KINDS = ("driver_crash", "task_failure", "executor_loss", "storage_write_error", "zombie_write")


@dataclass(frozen=True)
class ExplorerRun:
    """The explorer on one example scenario, its engine section changed by ``engine`` (merged over it)."""

    label: str
    scenario: str                       # a file in experiments/scenarios
    engine: dict[str, Any] = field(default_factory=dict)


_RUNNING_COUNT = "running-count-crash-after-wal.json"
_STORE = {"min_deltas_for_snapshot": 2, "maintenance_interval_ms": 200}
RUNS: tuple[ExplorerRun, ...] = (
    ExplorerRun("sync, async purge (example)", _RUNNING_COUNT),
    ExplorerRun("sync, inline purge", _RUNNING_COUNT, {"log_purge": {"mode": "inline", "min_batches_to_retain": 3}}),
    ExplorerRun("async state checkpointing", _RUNNING_COUNT, {"state_checkpoint": "async"}),
    ExplorerRun("pipelining, depth 2", _RUNNING_COUNT, {"pipelining": True}),
    ExplorerRun("pipelining, depth 3", _RUNNING_COUNT, {"pipelining": True, "pipeline_depth": 3}),
    ExplorerRun("delta provider", _RUNNING_COUNT, {"state_store": {"provider": "delta", **_STORE}}),
    ExplorerRun("snapshot provider", _RUNNING_COUNT, {"state_store": {"provider": "snapshot", **_STORE}}),
    ExplorerRun("async progress, stateless (example)", "stateless-async-progress.json"),
    ExplorerRun("window, async state (example)", "window-async-state-crash.json"),
    ExplorerRun("real-time mode (example)", "real-time-aggregate.json"),
    ExplorerRun("real-time mode, bounded replay (example)", "real-time-bounded-replay.json"),
)


def merge(base: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``changes`` merged in, nested sections key by key (neither is modified)."""
    out: dict[str, Any] = json.loads(json.dumps(base))
    for key, value in changes.items():
        out[key] = merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def scenario_of(run: ExplorerRun, seed: int) -> dict[str, Any]:
    """The scenario a run explores: the example's, its engine changed, its own faults dropped."""
    raw = json.loads((SCENARIOS / run.scenario).read_text())
    raw["engine"] = merge(raw.get("engine", {}), run.engine)
    raw["faults"] = []
    raw["seed"] = seed
    return raw


class Explorer(Experiment):
    name = "explorer"
    version = "1"
    title = "every crash cut and single fault of the example scenarios, every schedule judged by every oracle"
    claim = "no schedule the explorer reaches breaks an oracle"
    # measured on this project's 2-core machine: the quick run about 4 minutes (pipelining at depth 3 the most)
    runs = {"reference": BackendRun(4.0, 60.0)}
    default_backend = "reference"
    seeds_quick = 1
    seeds_full = 1
    point_timeout_s = 3600.0

    def points(self, ctx: RunContext) -> list[Point]:
        depth = QUICK_DEPTH if ctx.quick else FULL_DEPTH
        return [Point(self.name, "explore", run.label, {"depth": depth}, seed, "reference", scenario_of(run, seed),
                      extra={"example": run.scenario, "engine": run.engine})
                for run in RUNS for seed in self.seed_list(ctx)]

    def measure(self, point: Point) -> dict[str, Any]:
        scenario = Scenario.from_dict(point.scenario)
        graph = first_graph(scenario, Model())
        cuts = sum(1 for _ in writing_cuts(graph))
        report = explore(scenario, depth=int(point.params["depth"]), workers=1)
        source, query = point.scenario["source"], point.scenario["query"]
        return {"crash_cuts": cuts, "schedules": report.schedules, "distinct_checkpoints": report.distinct_checkpoints,
                "violations": len(report.violations), "truncated": report.truncated,
                "first_violation": report.violations[0].describe() if report.violations else "",
                "seconds": report.seconds, "checkpoint_fingerprint": report.checkpoint_fingerprint,
                "operator": query["operator"]["kind"], "batches": len({node.batch for node in graph.nodes}),
                "source": source["kind"], "partitions": source.get("partitions"),
                "state_partitions": query.get("state_partitions"), "engine": point.scenario["engine"]}

    def summarize(self, records: list[dict[str, Any]], ctx: RunContext) -> dict[str, Any]:
        entries = []
        for record in records:
            point, metrics = record["point"], record.get("metrics") or {}
            if record.get("error"):
                continue
            entries.append({"label": point["config"], "scenario": point["extra"]["example"],
                            "depth": point["params"]["depth"], **metrics})
        scope = {"depth": QUICK_DEPTH if ctx.quick else FULL_DEPTH, "fault_kinds": list(FAULT_KINDS),
                 "operators": sorted({e["operator"] for e in entries}),
                 "sources": sorted({e["source"] for e in entries}),
                 "batches": sorted({e["batches"] for e in entries if e["batches"] is not None}),
                 "state_partitions": sorted({e["state_partitions"] for e in entries}),
                 "scenarios": sorted({e["scenario"] for e in entries})}
        return {"entries": entries, "scope": scope,
                "schedules": sum(e["schedules"] for e in entries),
                "violations": sum(e["violations"] for e in entries),
                "truncated": [e["label"] for e in entries if e["truncated"]]}

    def checks(self, summary: dict[str, Any], ctx: RunContext) -> list[Check]:
        bad = [e for e in summary["entries"] if e["violations"]]
        return [Check("no schedule breaks an oracle", not bad,
                      f"{summary['violations']} violation(s) over {summary['schedules']:,} schedules"
                      + (f"; first in {bad[0]['label']}: {bad[0]['first_violation']}" if bad else "")),
                Check("every search ran to completion", not summary["truncated"],
                      "truncated: " + ", ".join(summary["truncated"]) if summary["truncated"] else "complete")]

    def report(self, summary: dict[str, Any], ctx: RunContext) -> list[str]:
        return [f"{e['label']}: {e['schedules']:,} schedules over {e['crash_cuts']:,} crash cuts, "
                f"{e['distinct_checkpoints']:,} distinct checkpoints, {e['violations']} violation(s)"
                + (" (TRUNCATED)" if e["truncated"] else "") for e in summary["entries"]]


EXPERIMENT = Explorer()
