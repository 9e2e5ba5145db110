"""fault-matrix: every fault kind x every engine mode x every operator, through every backend, judged by the oracles.

Each cell is one small scenario (two source partitions, two state partitions,
four batches) with one fault placed where it bites (``FAULTS``), run on a
backend and judged by ``reference.oracles.check_outcome`` with the run's
checkpoint. A cell is

- ``pass``: the run finished and every oracle holds;
- ``loud``: a damaged checkpoint file stopped the query with an error that
  names the file, by path or by store and version (what SPEC section 3 asks
  of an unreadable file); or no run needed that file, so the query finished
  with the right state, and the only oracle that fails is ``retention``
  because reading the retained versions reports that very file as
  unloadable. Only a ``corrupt_file`` or ``delete_file`` cell may end this
  way, and an error that names another file is a ``fail``;
- ``fail``: an oracle failed, or the run stopped with an error it should
  have survived;
- ``unsupported``: Spark forbids the mode for the operator (asynchronous
  progress tracking on a stateful query), so it is not run;
- ``unavailable``: the backend cannot run here.

The reference model and the simulator are always in the matrix; ``--backend
spark`` or ``spark-native`` adds that backend. The result is the paper's
correctness table: one row per fault kind and mode, one column per operator
and backend.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from experiments.runner import (
    Check,
    Experiment,
    Point,
    RunContext,
    figure_style,
    run_on_backend,
    save_figure,
    sim_profile,
)

OPERATORS: dict[str, dict[str, Any]] = {
    "map": {"kind": "map"},
    "aggregate": {"kind": "aggregate", "agg": "count"},
    "window_aggregate": {"kind": "window_aggregate", "agg": "sum", "window_ms": 40, "watermark_delay_ms": 20},
    "dedup_within_watermark": {"kind": "dedup_within_watermark", "watermark_delay_ms": 30},
    "join": {"kind": "join", "time_bound_ms": 30, "watermark_delay_ms": 20},
    "stateful_function": {"kind": "stateful_function", "function": "session_sum", "timeout_ms": 40,
                          "watermark_delay_ms": 20},
    "chain": {"kind": "chain", "operators": [{"kind": "dedup_within_watermark", "watermark_delay_ms": 30},
                                             {"kind": "aggregate", "agg": "sum"}]},
}
# each mode is one Lightspeed feature (or provider) over the synchronous baseline
MODES: dict[str, dict[str, Any]] = {
    "sync": {},
    "async_purge": {"log_purge": {"mode": "async", "min_batches_to_retain": 2}},
    "async_progress": {"progress": {"mode": "async", "checkpoint_interval_ms": 200}},
    "async_state": {"state_checkpoint": "async"},
    "pipelining": {"pipelining": True},
    "delta_provider": {"state_store": {"provider": "delta", "min_deltas_for_snapshot": 2,
                                       "maintenance_interval_ms": 100}},
    "snapshot_provider": {"state_store": {"provider": "snapshot", "min_deltas_for_snapshot": 2,
                                          "maintenance_interval_ms": 100}},
}
FAULT_KINDS = ("driver_crash", "task_failure", "executor_loss", "storage_write_error", "storage_latency",
               "zombie_write", "corrupt_file", "delete_file", "clock_skew")
DAMAGE = ("corrupt_file", "delete_file")
QUICK_OPERATORS = ("map", "aggregate", "window_aggregate")
QUICK_MODES = ("sync", "async_progress", "async_state", "pipelining")
BATCHES = 4
STATUSES = ("pass", "loud", "fail", "unsupported", "unavailable")


def _crash(step: str, batch: int, when: str = "before") -> dict[str, Any]:
    return {"at": {"step": step, "batch": batch, "when": when}, "kind": "driver_crash"}


def damage_target(operator: str, scenario: dict[str, Any]) -> str:
    """The file a damage fault hits: the first snapshot of partition 0's store, or for a stateless query
    the offset log entry of batch 1 (which a restart at batch 3 does not need under synchronous progress)."""
    from reference import layout
    from reference.query import pipeline_store_ids
    from reference.scenario import Scenario
    sc = Scenario.from_dict(dict(scenario, faults=[]))
    stores = pipeline_store_ids(sc.operator.flatten())
    if not stores:
        return layout.offset_path(1)
    # version 2 is sealed by batch 1, partition 0, first attempt of the first incarnation
    return layout.state_file(stores[0], 0, 2, "r0b1p0a0", "snapshot")


def names_file(error: str, path: str) -> bool:
    """Whether an error names the damaged file: its path, or its store and version (``state/0/0 ... version 2``)."""
    if path in error:
        return True
    from reference import layout
    folder, _, name = path.rpartition("/")
    parsed = layout.parse_state_file(path)
    return parsed is not None and folder in error and f"version {parsed.version} " in error + " "


def faults_for(kind: str, operator: str, scenario: dict[str, Any]) -> list[dict[str, Any]]:
    """Where each fault kind is placed: early enough that later batches and a restart must cope with it."""
    stateful = operator != "map"
    if kind == "driver_crash":
        return [_crash("offset_log_write", 1, "after")]
    if kind == "task_failure":
        return [{"at": {"step": "task_apply", "batch": 1, "partition": 0, "when": "after"}, "kind": kind}]
    if kind == "executor_loss":
        return [{"at": {"step": "sink_write", "batch": 1, "partition": 1}, "kind": kind}]
    if kind == "storage_write_error":
        return [{"at": {"step": "sink_write", "batch": 2, "partition": 0}, "kind": kind}]
    if kind == "storage_latency":
        return [{"at": {"step": "commit_log_write", "batch": 1}, "kind": kind, "ms": 500}]
    if kind == "zombie_write":
        step = "changelog_write" if stateful else "sink_write"
        return [{"at": {"step": step, "batch": 1, "partition": 0}, "kind": kind}]
    if kind in DAMAGE:
        # damage a file before batch 3 is planned, then crash so that recovery reads the checkpoint
        return [{"at": {"step": "plan", "batch": 3, "when": "before"}, "kind": kind,
                 "path": damage_target(operator, scenario)}, _crash("plan", 3, "after")]
    if kind == "clock_skew":
        return [{"at": {"step": "plan", "batch": 1}, "kind": kind, "ms": 500}]
    raise ValueError(f"unknown fault kind {kind!r}; expected one of {', '.join(FAULT_KINDS)}")


def cell_scenario(operator: str, mode: str, kind: str, seed: int) -> dict[str, Any] | None:
    """The scenario of one cell, or None when Spark forbids the mode for the operator."""
    stateful = operator != "map"
    if mode == "async_progress" and stateful:
        return None
    engine: dict[str, Any] = {"state_store": {"provider": "changelog", "min_deltas_for_snapshot": 2,
                                              "maintenance_interval_ms": 100},
                              "log_purge": {"mode": "inline", "min_batches_to_retain": 3}}
    engine.update(copy.deepcopy(MODES[mode]))
    source = {"kind": "generated", "partitions": 2, "keys": 6, "records_per_partition_per_batch": 4,
              "batches": BATCHES, "event_time": {"start_ms": 0, "step_ms": 10, "max_disorder_ms": 20}}
    scenario: dict[str, Any] = {"name": f"fault-matrix-{operator}-{mode}-{kind}", "seed": seed,
                                "query": {"operator": copy.deepcopy(OPERATORS[operator]), "state_partitions": 2},
                                "sink": {"mode": "at_least_once" if mode == "async_progress" else "exactly_once"},
                                "engine": engine, "faults": []}
    if operator == "join":
        scenario["sources"] = {"left": source, "right": dict(source)}
    else:
        scenario["source"] = source
    scenario["faults"] = faults_for(kind, operator, scenario)
    return scenario


class FaultMatrix(Experiment):
    name = "fault-matrix"
    version = "1"
    title = "every fault kind x mode x operator through every backend: a table of oracle verdicts"
    claim = "every oracle holds after every fault, in every mode Spark allows, on every backend"
    backends = ("sim", "spark", "spark-native")
    seeds_full = 1
    partial_ok = True
    point_timeout_s = 180.0      # a cell is a few seconds on any backend

    def matrix_backends(self, ctx: RunContext) -> tuple[str, ...]:
        return ("reference", "sim") + ((ctx.backend,) if ctx.backend != "sim" else ())

    def points(self, ctx: RunContext) -> list[Point]:
        operators = QUICK_OPERATORS if ctx.quick else tuple(OPERATORS)
        modes = QUICK_MODES if ctx.quick else tuple(MODES)
        profile = sim_profile("local_spark")
        out = []
        for backend in self.matrix_backends(ctx):
            for operator in operators:
                for mode in modes:
                    for kind in FAULT_KINDS:
                        for seed in self.seed_list(ctx):
                            scenario = cell_scenario(operator, mode, kind, seed)
                            params = {"operator": operator, "mode": mode, "fault": kind}
                            task = "cell" if scenario is not None else "unsupported"
                            out.append(Point(self.name, task, backend, params, seed, backend, scenario or {},
                                             profile if backend == "sim" else None, "data"))
        return out

    def measure(self, point: Point) -> dict[str, Any]:
        if point.task == "unsupported":
            return {"status": "unsupported", "detail": "Spark forbids asynchronous progress tracking on a stateful "
                                                       "query (its batch boundaries change on restart)"}
        from reference.oracles import check_outcome, failures
        from reference.scenario import Scenario
        outcome, storage = run_on_backend(point.backend, point.scenario, point.profile, point.sim_mode)
        error = outcome.get("error")
        kind = point.params["fault"]
        target = next((f.get("path") for f in point.scenario["faults"] if f.get("path")), None)
        if error:
            if kind in DAMAGE and target and names_file(error, target):
                return {"status": "loud", "detail": error[:300]}
            return {"status": "fail", "detail": f"the run stopped: {error}"[:300]}
        verdicts = check_outcome(Scenario.from_dict(point.scenario), outcome, storage)
        bad = failures(verdicts)
        held = [v.check for v in verdicts if v.status == "pass"]
        na = [v.check for v in verdicts if v.status == "n/a"]
        reported = [e for e in outcome.get("state_errors", []) if target and names_file(e, target)]
        if kind in DAMAGE and reported and [v.check for v in bad] == ["retention"]:
            # the damage outlived the run, which never read the file again; reading it names the file
            return {"status": "loud", "detail": f"finished; the damaged retained version reports: {reported[0]}"[:300],
                    "held": held}
        if bad:
            return {"status": "fail", "detail": "; ".join(v.describe().splitlines()[0] for v in bad)[:300],
                    "failed": [v.check for v in bad], "held": held}
        return {"status": "pass", "held": held, "not_applicable": na,
                "restarts": len(outcome.get("recoveries", []))}

    def summarize(self, records: list[dict[str, Any]], ctx: RunContext) -> dict[str, Any]:
        cells: dict[str, Any] = {}
        for record in records:
            point, metrics = record["point"], record["metrics"]
            p = point["params"]
            key = f"{point['backend']}|{p['operator']}|{p['mode']}|{p['fault']}"
            cells[key] = {"status": metrics["status"], "detail": metrics.get("detail", "")}
        counts: dict[str, dict[str, int]] = {}
        for key, cell in cells.items():
            backend = key.split("|")[0]
            counts.setdefault(backend, {s: 0 for s in STATUSES})[cell["status"]] += 1
        return {"cells": cells, "counts": counts, "backends": list(self.matrix_backends(ctx)),
                "operators": list(QUICK_OPERATORS if ctx.quick else OPERATORS),
                "modes": list(QUICK_MODES if ctx.quick else MODES), "faults": list(FAULT_KINDS)}

    def checks(self, summary: dict[str, Any], ctx: RunContext) -> list[Check]:
        out = []
        for backend, counts in summary["counts"].items():
            failed = [k for k, c in summary["cells"].items() if c["status"] == "fail" and k.startswith(backend + "|")]
            ran = counts["pass"] + counts["loud"] + counts["fail"]
            detail = f"{counts['pass']} pass, {counts['loud']} loud, {counts['fail']} fail of {ran} run"
            if failed:
                detail += "; first: " + failed[0].replace("|", " ") + ": " + summary["cells"][failed[0]]["detail"]
            out.append(Check(f"no failing cell on {backend}", not failed if ran else None, detail))
        return out

    def report(self, summary: dict[str, Any], ctx: RunContext) -> list[str]:
        lines = []
        for backend in summary["backends"]:
            counts = summary["counts"].get(backend)
            if counts is None:
                lines.append(f"{backend}: not run")
                continue
            lines.append(f"{backend}: " + ", ".join(f"{counts[s]} {s}" for s in STATUSES if counts[s]))
        mark = {"pass": ".", "loud": "L", "fail": "X", "unsupported": "-", "unavailable": "?"}
        ops = summary["operators"]
        for backend in summary["backends"]:
            if backend not in summary["counts"]:
                continue
            lines.append(f"{backend}: rows fault x mode, columns {', '.join(ops)} "
                         "(. pass, L loud, X fail, - unsupported, ? unavailable)")
            for kind in summary["faults"]:
                for mode in summary["modes"]:
                    row = "".join(mark.get(summary["cells"].get(f"{backend}|{op}|{mode}|{kind}", {})
                                           .get("status", "?"), "?") for op in ops)
                    lines.append(f"  {kind:<20} {mode:<18} {row}")
        return lines

    def figures(self, summary: dict[str, Any], ctx: RunContext, out_dir: Path) -> list[Path]:
        import matplotlib.pyplot as plt
        from matplotlib.colors import ListedColormap
        colours = {"pass": "#00a972", "loud": "#ffab00", "fail": "#ff3621", "unsupported": "#d9d9d9",
                   "unavailable": "#ffffff"}
        order = list(colours)
        backends = [b for b in summary["backends"] if b in summary["counts"]]
        ops, modes, faults = summary["operators"], summary["modes"], summary["faults"]
        rows = [(k, m) for k in faults for m in modes]
        with plt.rc_context(figure_style() | {"axes.grid": False}):
            fig, axes = plt.subplots(1, len(backends), figsize=(1.2 + 0.45 * len(ops) * len(backends) + 2.5,
                                                                 0.16 * len(rows) + 1.6), squeeze=False)
            for ax, backend in zip(axes[0], backends):
                grid = [[order.index(summary["cells"].get(f"{backend}|{op}|{m}|{k}", {}).get("status", "unavailable"))
                         for op in ops] for k, m in rows]
                ax.imshow(grid, cmap=ListedColormap([colours[s] for s in order]), vmin=0, vmax=len(order) - 1,
                          aspect="auto", interpolation="nearest")
                ax.set_xticks(range(len(ops)))
                ax.set_xticklabels(ops, rotation=60, ha="right", fontsize=6)
                ax.set_yticks(range(len(rows)))
                ax.set_yticklabels([f"{k} / {m}" for k, m in rows] if ax is axes[0][0] else [], fontsize=5)
                for i in range(len(modes), len(rows), len(modes)):
                    ax.axhline(i - 0.5, color="white", linewidth=1.2)
                ax.set_title(backend)
            handles = [plt.Rectangle((0, 0), 1, 1, color=colours[s], ec="#999999") for s in order]
            fig.legend(handles, order, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=len(order), fontsize=7,
                       frameon=False)
            fig.suptitle("Oracle verdicts: fault kind / mode x operator")
            return save_figure(fig, out_dir, "fault_matrix")


EXPERIMENT = FaultMatrix()
