"""The paper's explorer section: every example scenario the explorer ran, with its exact scope (operator, batches,
state partitions, depth, the fault kinds placed), what it reached and whether any search was cut short."""

from __future__ import annotations

from typing import Any

from experiments.explorer.definition import FAULT_KINDS
from experiments.section_content import Row, Run, Table, Writeup, code, lookup, strong, text

EXPERIMENT = "explorer"
VALUES = ("ex_total_schedules", "ex_total_violations", "ex_depth", "ex_max_cuts", "ex_total_seconds", "ex_truncated")


def entries_path(run: Run) -> list[Any]:
    """Where the run's entries are: ``summary.entries`` (the registered experiment), or ``entries`` in a file the
    explorer wrote before it was one."""
    return ["summary", "entries"] if "summary" in run.doc else ["entries"]


def write(w: Writeup) -> None:
    run = w.run(EXPERIMENT, "reference")
    w.text("ex_fault_kinds", ", ".join(kind.replace("_", " ") for kind in FAULT_KINDS))
    if run is None:
        w.table("explorer", Table(["Scenario and mode", "Crash cuts"],
                                  [[text("no explorer results (", code("paper/results/explorer/"), " is absent)")]]),
                label="tab-explorer")
        for name in VALUES:
            w.v.absent(name)
        w.text("ex_status", "No explorer results are in this build.")
        w.text("ex_truncation", "")
        return
    path = entries_path(run)
    entries: list[dict[str, Any]] = lookup(run.doc, path) or []
    rows: list[Row] = []
    truncated = []
    for i, e in enumerate(entries):
        base = path + [i]
        complete = text(strong("truncated"), ": not every cut ran") if e.get("truncated") else "complete"
        if e.get("truncated"):
            truncated.append(e["label"])
        rows.append([f"{e['label']} ({e['operator']})",
                     w.v.of(run, f"ex_{i}_batches", base + ["batches"], "int") + " / " +
                     w.v.of(run, f"ex_{i}_partitions", base + ["state_partitions"], "int"),
                     w.v.of(run, f"ex_{i}_cuts", base + ["crash_cuts"], "int"),
                     w.v.of(run, f"ex_{i}_distinct", base + ["distinct_checkpoints"], "int"),
                     w.v.of(run, f"ex_{i}_schedules", base + ["schedules"], "int"),
                     w.v.of(run, f"ex_{i}_seconds", base + ["seconds"], "s"),
                     w.v.of(run, f"ex_{i}_violations", base + ["violations"], "int"), complete])
    w.table("explorer", Table(["Scenario and mode (operator)", "Batches / state partitions", "Crash cuts",
                               "Distinct checkpoints", "Schedules run", "Time", "Violations", "Search"], rows,
                              aligns=["left"] + ["right"] * 6 + ["left"]),
            label="tab-explorer", runs=[run])
    for name, field, derivation in (("ex_total_schedules", "schedules", "sum"),
                                    ("ex_total_violations", "violations", "sum"),
                                    ("ex_total_seconds", "seconds", "sum"), ("ex_max_cuts", "crash_cuts", "max")):
        w.v.add(name, [(run.file, path + [i, field]) for i in range(len(entries))],
                "s" if field == "seconds" else "int", derivation)
    w.v.of(run, "ex_depth", path + [0, "depth"], "int")
    w.v.add("ex_truncated", [(run.file, path + [i, "truncated"]) for i in range(len(entries))
                             if entries[i].get("truncated")] or [(run.file, path + [0, "truncated"])],
            "int", "sum")
    w.text("ex_status", "The explorer results are from its " + run.mode + " mode (" + code(run.file) + ").")
    w.text("ex_truncation", text("The search of " + ", ".join(truncated) + " was ", strong("truncated"), ": it "
                                 "stopped at the explorer's cap before every crash cut ran, so that entry is a partial "
                                 "search and claims nothing about the cuts it did not reach.") if truncated else
           "Every search ran to completion.")
