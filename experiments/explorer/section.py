"""The paper's explorer section: every example scenario the explorer ran, with its exact scope (operator, batches,
state partitions, depth, the fault kinds placed), what it reached and whether any search was cut short."""

from __future__ import annotations

from typing import Any

from experiments.explorer.definition import FAULT_KINDS
from experiments.section_content import Row, Run, Table, Writeup, code, lookup, ref, strong, text

EXPERIMENT = "explorer"
CAPTION = ("The explorer on the example scenarios, its whole scope: each scenario's operator, source, batches and "
           "state partitions, the crash cuts of its first incarnation's graph, the distinct checkpoints those cuts "
           "leave, the schedules run (crash cuts and every other single fault), the time, the violations, and "
           "whether the search ran to completion.")
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
                label="tab-explorer", caption=CAPTION)
        w.text("ex_scope", "not run in this build")
        w.text("ex_real_time", "the explorer did not run in this build")
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
        rows.append([f"{e['label']} ({e['operator']}, {e.get('source', 'generated')} source)",
                     w.v.of(run, f"ex_{i}_batches", base + ["batches"], "int") + " / " +
                     w.v.of(run, f"ex_{i}_partitions", base + ["state_partitions"], "int"),
                     w.v.of(run, f"ex_{i}_cuts", base + ["crash_cuts"], "int"),
                     w.v.of(run, f"ex_{i}_distinct", base + ["distinct_checkpoints"], "int"),
                     w.v.of(run, f"ex_{i}_schedules", base + ["schedules"], "int"),
                     w.v.of(run, f"ex_{i}_seconds", base + ["seconds"], "s"),
                     w.v.of(run, f"ex_{i}_violations", base + ["violations"], "int"), complete])
    w.table("explorer", Table(["Scenario and mode (operator, source)", "Batches / state partitions", "Crash cuts",
                               "Distinct checkpoints", "Schedules run", "Time", "Violations", "Search"], rows,
                              aligns=["left"] + ["right"] * 6 + ["left"],
                              widths=["2.2fr"] + ["auto"] * 7),
            label="tab-explorer", runs=[run], caption=CAPTION)
    real_time = [e["label"] for e in entries if (e.get("engine") or {}).get("real_time")]
    w.text("ex_real_time", text("the explorer covers every crash cut of its example scenarios (", ref("tab-explorer"),
                                ")") if real_time else
           "the explorer's runs in this build do not include it, so its crash cuts are not covered here")
    operators = sorted({e["operator"] for e in entries})
    sources = sorted({e.get("source", "generated") for e in entries})
    batches = sorted({e["batches"] for e in entries if e.get("batches") is not None})
    partitions = sorted({e["state_partitions"] for e in entries})
    w.text("ex_scope", text(f"{len(entries)} example scenarios and modes (", ref("tab-explorer"), f") of the "
                            f"operators {', '.join(operators)} on {' and '.join(sources)} sources, with "
                            f"{'-'.join(str(b) for b in (batches[0], batches[-1]) if batches) or 'n/a'} batches and "
                            f"{' or '.join(str(p) for p in partitions)} state partitions; at depth ",
                            w.v.of(run, "ex_scope_depth", path + [0, "depth"], "int"),
                            ", every crash cut of the first incarnation and, at every step, batch and partition, "
                            "before and after it, each single fault of the kinds " + w.t["ex_fault_kinds"]))
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
