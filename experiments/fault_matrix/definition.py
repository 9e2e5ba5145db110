"""fault-matrix: every fault kind x every engine mode x every operator, through every backend, judged by the oracles.

Each cell is one small scenario (two source partitions, two state partitions,
four batches) with one fault placed where it bites (``FAULTS``), run on a
backend and judged by ``reference.judge.oracles.check_outcome`` with the run's
checkpoint. A cell is

- ``pass``: the run finished and every oracle holds;
- ``loud``: a damaged checkpoint file stopped the query with an error that
  names the file, by path or by store and version (what spec section 3 asks
  of an unreadable file); or no run needed that file, so the query finished
  with the right state, and every check that fails is the judge reporting
  that very file: ``retention`` because reading the retained versions finds
  it unloadable (the outcome's ``state_errors`` name it), ``checkpoint``
  because the damaged checkpoint breaks a rule and the rule's message names
  it (a commit entry without its deleted offset entry; a retained version
  with no file on its lineage). Only a ``corrupt_file`` or ``delete_file``
  cell may end this way, and an error or a check that names another file is
  a ``fail``;
- ``fail``: an oracle failed, the run stopped with an error it should
  have survived, or the cell's fault never fired (it tested nothing);
- ``unsupported``: Spark forbids the mode for the operator (asynchronous
  progress tracking on a stateful query), or the mode changes nothing for it
  (parallel store commit with one store per partition), so it is not run, or
  the backend refuses the cell's scenario by name (native Spark has no
  redelivering source, no state rebalancing and no parallel store commit);
- ``unavailable``: the backend cannot run here.

The reference model and the simulator are always in the matrix; ``--backend
spark`` or ``spark-native`` adds that backend. The result is the paper's
correctness table: one row per fault kind and mode, one column per operator
and backend.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from experiments.experiment import BackendRun, Check, Experiment, Point, RunContext
from experiments.figures import LABEL_PT, WIDE, backend_label, figure_context, save_figure
from experiments.measure import run_point_scenario
from reference.protocol.backend import ScenarioRefused
from experiments.profiles import sim_profile
from reference.language.catalogue import MODES, OPERATORS, scenario_dict, spark_allows, unsupported_reason
from reference.judge.oracles import Verdict, check_outcome, failures
from reference.protocol.outcome import Outcome
from reference.language.scenario import Scenario

# the matrix's own engine parameters over the catalogue's modes: maintenance every 100 ms, a snapshot every
# two deltas, and three batches retained, so that four batches exercise snapshots, purge and retention
STATE_STORE: dict[str, Any] = {"provider": "changelog", "min_deltas_for_snapshot": 2, "maintenance_interval_ms": 100}
RETAIN = 3
FAULT_KINDS = ("driver_crash", "task_failure", "executor_loss", "storage_write_error", "storage_latency",
               "zombie_write", "corrupt_file", "delete_file", "clock_skew")
DAMAGE = ("corrupt_file", "delete_file")
QUICK_OPERATORS = ("map", "aggregate", "window_aggregate")
# One more column: the aggregate over a redelivering source (``reference/protocol/redelivery.py``), in every mode and
# under every fault; a damage fault there hits the fetch state a restart resumes from. One column, not one per
# operator: the source changes what the driver's plan does, not what an operator does.
REDELIVERING = "aggregate@redelivering"
REBALANCING = "aggregate@rebalancing"      # the aggregate while executors join and leave
# what the rebalancing column's scenario adds: both partitions start on executor 0; executor 1 joins before
# batch 2 (one partition moves to it, for balance) and executor 0 leaves before batch 3 (the other follows),
# so a partition loads its state from the checkpoint at each of the batches the cell's fault lands near
EXECUTORS = ["0"]
EXECUTOR_EVENTS = [{"kind": "executor_join", "executor": "1", "before_batch": 2},
                   {"kind": "executor_leave", "executor": "0", "before_batch": 3}]
QUICK_MODES = ("sync", "async_progress", "async_state", "pipelining")
BATCHES = 4
STATUSES = ("pass", "loud", "fail", "unsupported", "unavailable")


def _crash(step: str, batch: int, when: str = "before") -> dict[str, Any]:
    return {"at": {"step": step, "batch": batch, "when": when}, "kind": "driver_crash"}


def columns(quick: bool) -> tuple[str, ...]:
    """The matrix's columns: the catalogue's operators (the quick ones), then the redelivering source's and the
    rebalancing executors'."""
    return (QUICK_OPERATORS if quick else tuple(OPERATORS)) + (REDELIVERING, REBALANCING)


def column_parts(column: str) -> tuple[str, str]:
    """A column's (operator, variant): ``aggregate@redelivering`` is the aggregate over a redelivering source,
    ``aggregate@rebalancing`` the aggregate while executors join and leave; a plain operator is ``generated``."""
    operator, _, variant = column.partition("@")
    return operator, variant or "generated"


def damage_target(operator: str, scenario: dict[str, Any]) -> str:
    """The file a damage fault hits: the first snapshot of partition 0's store, or for a stateless query
    the offset log entry of batch 1 (which a restart at batch 3 does not need under synchronous progress); over
    a redelivering source, the fetch state of batch 2 (what a restart after planning batch 3 resumes from)."""
    from reference.protocol import layout
    from reference.protocol.query import pipeline_store_ids
    from reference.protocol.redelivery import sources_path
    from reference.language.scenario import Scenario
    sc = Scenario.from_dict(dict(scenario, faults=[]))
    if any(src.kind == "redelivering" for src in sc.sources.values()):
        return sources_path(0, 2)
    stores = pipeline_store_ids(sc.operator.flatten())
    if not stores:
        return layout.offset_path(1)
    # version 2 is sealed by batch 1, partition 0, first attempt of the first incarnation
    return layout.state_file(stores[0], 0, 2, "r0b1p0a0", "snapshot")


NATIVE = "spark-native"
# native Spark's counterpart of ``damage_target``'s snapshot: the per-batch state file of version 2 of partition 0
# (RocksDB with changelog checkpointing), which Spark always writes by the end of batch 1; its snapshot of
# version 2 (``2.zip``) is uploaded by the maintenance thread when it gets to it, so it may not exist yet
NATIVE_STATE_TARGET = "state/0/0/2.changelog"


def native_cell(scenario: dict[str, Any]) -> dict[str, Any]:
    """A cell's scenario for native Spark: a damage fault hits Spark's own file of the one the reference's
    layout names (the state file of version 2 of partition 0; a stateless query's ``offsets/1`` is Spark's
    too)."""
    faults = []
    for fault in scenario["faults"]:
        if fault.get("path", "").startswith("state/"):
            fault = dict(fault, path=NATIVE_STATE_TARGET)
        faults.append(fault)
    return dict(scenario, faults=faults)


def native_names_file(error: str, path: str) -> bool:
    """Whether Spark's own error names the damaged file: its path, or an offset log entry by its batch (Spark
    says ``batch 1 doesn't exist`` of a missing ``offsets/1``)."""
    entry = re.fullmatch(r"offsets/(\d+)", path)
    return names_file(error, path) or (entry is not None and f"batch {entry.group(1)} doesn't exist" in error)


def native_against_reference(point: Point, outcome: Outcome) -> str | None:
    """A native cell that finished against the reference's run of the same cell: the first difference in
    batches, state or sink, or None. A damage cell is not compared (each backend damages its own file), nor
    one whose batches Spark cut otherwise (a batch whose offset entry never became durable is planned again
    by Spark's file source, which may read one more file: both are allowed)."""
    from reference.judge.compare import first_difference
    from reference.protocol.run import run_scenario
    if point.params["fault"] in DAMAGE:
        return None
    sc = Scenario.from_dict(point.scenario)
    reference = run_scenario(sc).outcome()
    batches_only = (replace(reference, state={}, sink=()), replace(outcome, state={}, sink=()))
    if reference.error or first_difference(*batches_only, sc.sink_mode) is not None:
        return None   # the reference stopped, or the batches differ: nothing like with like
    return first_difference(reference, outcome, sc.sink_mode)


def names_file(error: str, path: str) -> bool:
    """Whether an error names the damaged file: its path, or its store and version (``state/0/0 ... version 2``)."""
    if path in error:
        return True
    from reference.protocol import layout
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
    """The scenario of one cell (the catalogue's operator under the catalogue's mode, with the matrix's engine
    parameters and the fault of ``faults_for``), or None when Spark forbids the mode for the operator."""
    operator, variant = column_parts(operator)
    source_kind = "generated" if variant == "rebalancing" else variant
    if not spark_allows(operator, mode):
        return None
    store = {**STATE_STORE, **MODES[mode].get("state_store", {}),
             "maintenance_interval_ms": STATE_STORE["maintenance_interval_ms"]}
    sink = "at_least_once" if mode == "async_progress" else "exactly_once"
    scenario = scenario_dict(operator, mode, seed=seed, batches=BATCHES, partitions=2, sink=sink, retain=RETAIN,
                             source_kind=source_kind, state_store=store)
    scenario["name"] = f"fault-matrix-{operator}-{mode}-{kind}" + ("" if variant == "generated" else f"-{variant}")
    if variant == "rebalancing":
        scenario["executors"] = list(EXECUTORS)
        scenario["events"] = [dict(e) for e in EXECUTOR_EVENTS]
    if source_kind != "generated":
        # fixed cuts, as a generated source has: a paced backend cutting by its trigger could end the input
        # before batch 3, and the faults placed there would never fire
        scenario["engine"]["batch_cuts"] = "fixed"
    scenario["faults"] = faults_for(kind, operator, scenario)
    return scenario


def _damage_report(verdict: Verdict, outcome: Outcome, target: str) -> str:
    if verdict.check == "retention":
        return next((e for e in outcome.state_errors if names_file(e, target)), "")
    return verdict.describe().splitlines()[0]


def _reports_damage(verdict: Verdict, outcome: Outcome, target: str) -> bool:
    """Whether a failed check is the judge reporting the planted damage: ``retention`` because a retained version
    reads the damaged file (the outcome's ``state_errors`` name it), or a check whose message names the file
    (``checkpoint``: a commit entry without its offset entry, a version with no file on its lineage)."""
    if verdict.check == "retention":
        return any(names_file(e, target) for e in outcome.state_errors)
    return names_file(verdict.describe(), target)


class FaultMatrix(Experiment):
    name = "fault-matrix"
    version = "1"
    title = "every fault kind x mode x operator through every backend: a table of oracle verdicts"
    claim = "every oracle holds after every fault, in every mode Spark allows, on every backend"
    # spark full: 14 min on a quiet machine, 58 on a loaded one (measured)
    runs = {"sim": BackendRun(0.5, 10.0), "spark": BackendRun(3.0, 15.0), "spark-native": BackendRun(3.0, 15.0)}
    seeds_full = 1
    partial_ok = True
    # a cell is a few seconds on any backend, but a crash on native Spark starts a new JVM (10 s here when the
    # machine is quiet, a minute when it is not)
    point_timeout_s = 600.0

    def matrix_backends(self, ctx: RunContext) -> tuple[str, ...]:
        return ("reference", "sim") + ((ctx.backend,) if ctx.backend != "sim" else ())

    def points(self, ctx: RunContext) -> list[Point]:
        operators = columns(ctx.quick)
        modes = QUICK_MODES if ctx.quick else tuple(MODES)
        profile = sim_profile("local_spark")
        out = []
        for backend in self.matrix_backends(ctx):
            for operator in operators:
                for mode in modes:
                    for kind in FAULT_KINDS:
                        for seed in self.seed_list(ctx):
                            scenario = cell_scenario(operator, mode, kind, seed)
                            if scenario is not None and backend == NATIVE:
                                scenario = native_cell(scenario)
                            params = {"operator": operator, "mode": mode, "fault": kind}
                            task = "cell" if scenario is not None else "unsupported"
                            out.append(Point(self.name, task, backend, params, seed, backend, scenario or {},
                                             profile if backend == "sim" else None, "data"))
        return out

    def measure(self, point: Point) -> dict[str, Any]:
        if point.task == "unsupported":
            return {"status": "unsupported",
                    "detail": unsupported_reason(point.params["operator"], point.params["mode"])}
        try:
            result = run_point_scenario(point)
        except ScenarioRefused as exc:   # e.g. native Spark: no redelivering source, no state rebalancing
            return {"status": "unsupported", "detail": f"{point.backend} refuses the cell: {exc}"[:300]}
        outcome, storage = result.outcome, result.checkpoint
        error = outcome.error
        kind = point.params["fault"]
        target = next((f.get("path") for f in point.scenario["faults"] if f.get("path")), None)
        native = point.backend == NATIVE
        if error:
            if kind in DAMAGE and target and (native_names_file if native else names_file)(error, target):
                return {"status": "loud", "detail": error[:300]}
            return self._failed(point, {"status": "fail", "detail": f"the run stopped: {error}"[:300]})
        verdicts = check_outcome(Scenario.from_dict(point.scenario), outcome, storage)
        bad = failures(verdicts)
        held = [v.check for v in verdicts if v.status == "pass"]
        na = [v.check for v in verdicts if v.status == "n/a"]
        if kind in DAMAGE and target and bad and all(_reports_damage(v, outcome, target) for v in bad):
            # the damage outlived the run, which never read the file again; the checks that fail name the file
            return {"status": "loud", "held": held, "failed": [v.check for v in bad],
                    "detail": ("finished; the damage is reported: " + "; ".join(
                        _damage_report(v, outcome, target) for v in bad))[:300]}
        if bad:
            return {"status": "fail", "detail": "; ".join(v.describe().splitlines()[0] for v in bad)[:300],
                    "failed": [v.check for v in bad], "held": held}
        if outcome.faults_not_fired:
            # every oracle held, but of a run the fault never touched: the cell tested nothing
            return {"status": "fail", "held": held,
                    "detail": f"the cell's fault never fired (faults {list(outcome.faults_not_fired)} of the "
                              f"scenario matched no step), so every check held of a run without it"}
        if native:
            differs = native_against_reference(point, outcome)
            if differs is not None:
                return {"status": "fail", "held": held, "detail": f"every oracle held, but the state or sink "
                                                                  f"differs from the reference's: {differs}"[:300]}
        return {"status": "pass", "held": held, "not_applicable": na,
                "restarts": len(outcome.recoveries)}

    @staticmethod
    def _failed(point: Point, metrics: dict[str, Any]) -> dict[str, Any]:
        """A failing native cell that shows a finding about Spark (``experiments/native_findings.py``) says
        which: it still fails (Spark departs from the spec there), and the finding is written up."""
        from experiments.native_findings import finding_of
        found = finding_of(point.params["operator"], point.params["fault"], metrics["detail"]) \
            if point.backend == NATIVE else None
        if found is None:
            return metrics
        return {**metrics, "finding": found.key,
                "detail": f"finding {found.key} (spark_impl/native/README.md): {metrics['detail']}"[:300]}

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
                "operators": list(columns(ctx.quick)),
                "modes": list(QUICK_MODES if ctx.quick else MODES), "faults": list(FAULT_KINDS)}

    def checks(self, summary: dict[str, Any], ctx: RunContext) -> list[Check]:
        out = []
        for backend, counts in summary["counts"].items():
            failed = [k for k, c in summary["cells"].items() if c["status"] == "fail" and k.startswith(backend + "|")]
            ran = counts["pass"] + counts["loud"] + counts["fail"]
            detail = f"{counts['pass']} pass, {counts['loud']} loud, {counts['fail']} fail of {ran} run"
            findings = [k for k in failed if summary["cells"][k]["detail"].startswith("finding ")]
            if findings:
                detail += f" ({len(findings)} of the failing cells show a finding about Spark)"
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
        # one panel over every backend, as wide as the page so its 8 pt text stays 8 pt (a panel per backend
        # made the full matrix 11 inches wide, its text about 4 pt on the page): fault kinds as rows, modes as
        # columns; a cell sums up the operators of that fault and mode over the backends: its colour is the worst
        # verdict on any backend, its text the first backend's count of passes, then loud (L) and failed (X)
        # cells, and an asterisk where another backend's counts differ (the table gives each backend's totals)
        colours = {"pass": "#00a972", "loud": "#ffab00", "fail": "#ff3621", "unavailable": "#ffffff",
                   "unsupported": "#d9d9d9"}
        worst = ("fail", "unavailable", "loud", "pass", "unsupported")
        order = list(colours)
        backends = [b for b in summary["backends"] if b in summary["counts"]]
        ops, modes, faults = summary["operators"], summary["modes"], summary["faults"]

        def counted(backend: str, fault: str, mode: str) -> tuple[list[str], str]:
            got = [summary["cells"].get(f"{backend}|{op}|{mode}|{fault}", {}).get("status", "unavailable")
                   for op in ops]
            parts = [str(got.count("pass"))] if got.count("pass") else []
            parts += [f"{got.count(s)}{m}" for s, m in (("loud", "L"), ("fail", "X"), ("unavailable", "?"))
                      if got.count(s)]
            return got, "+".join(parts) or "\u2013"

        with figure_context({"axes.grid": False, "font.size": 9}):
            fig, ax = plt.subplots(figsize=(WIDE * 0.85, 0.42 * len(faults) + 2.4))
            shade, text = [], []
            for k in faults:
                per = [[counted(b, k, m) for m in modes] for b in backends]
                shade.append([order.index(next(w for w in worst if any(w in p[j][0] for p in per)))
                              for j in range(len(modes))])
                text.append([per[0][j][1] + ("*" if any(p[j][1] != per[0][j][1] for p in per) else "")
                             for j in range(len(modes))])
            ax.imshow(shade, cmap=ListedColormap([colours[s] for s in order]), vmin=0, vmax=len(order) - 1,
                      aspect="auto", interpolation="nearest")
            for y, row in enumerate(text):
                for x, label in enumerate(row):
                    ax.text(x, y, label, ha="center", va="center", fontsize=LABEL_PT, color="#1b3139")
            ax.set_xticks(range(len(modes)))
            # a word a line, upright: nine modes fit across without their labels touching
            ax.set_xticklabels([m.replace("_", "\n") for m in modes], fontsize=LABEL_PT)
            ax.set_yticks(range(len(faults)))
            ax.set_yticklabels([k.replace("_", " ") for k in faults], fontsize=LABEL_PT)
            ax.tick_params(length=0)
            for spine in ax.spines.values():
                spine.set_visible(False)
            handles = [plt.Rectangle((0, 0), 1, 1, color=colours[s], ec="#999999") for s in order]
            fig.legend(handles, order, loc="lower center", ncol=len(order), fontsize=LABEL_PT, frameon=False)
            names = ", ".join(backend_label(b) for b in backends)
            fig.suptitle(f"Oracle verdicts over {len(ops)} operators, on {names} ({ctx.mode})\n"
                         f"cell: {backend_label(backends[0]) if backends else ''}'s passes, +L loud, +X failed; "
                         "* where another backend differs", fontsize=9)
            fig.tight_layout(rect=(0.0, 0.07, 1.0, 1.0))
            return save_figure(fig, out_dir, "fault_matrix")


EXPERIMENT = FaultMatrix()
