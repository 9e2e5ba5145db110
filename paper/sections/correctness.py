"""The paper's correctness results no experiment owns: the exhaustive explorer on the example scenarios (with its
exact scope, and a truncated entry said to be truncated), the mutation score of the judge, and the bug zoo."""

from __future__ import annotations

from experiments.section_content import Row, Run, Table, Writeup, code, joined_text, strong, text

ZOO_COMMAND = "lightspeed zoo"
EXPLORER_COMMAND = "python paper/collect_results.py --only explorer"
MUTATION_COMMAND = "make mutation"
EXPLORER_VALUES = ("ex_total_schedules", "ex_total_violations", "ex_depth", "ex_max_cuts", "ex_total_seconds",
                   "ex_truncated")


def write(w: Writeup) -> None:
    _explorer(w)
    _mutation(w)
    _zoo(w)


def explorer_run(w: Writeup) -> Run | None:
    """The explorer's results: the full run when it exists, else the quick one."""
    for mode in ("full", "quick"):
        doc = w.results.doc(w.results.root / "explorer" / f"reference-{mode}" / "results.json")
        if doc is not None:
            return Run("explorer", "reference", mode, w.results.root / "explorer" / f"reference-{mode}", doc)
    return None


def _explorer(w: Writeup) -> None:
    run = explorer_run(w)
    if run is None:
        w.table("explorer", Table(["Scenario and mode", "Crash cuts"],
                                  [["no explorer results (" + code("paper/results/explorer/") + " is absent)"]]),
                label="tab-explorer", commands=[EXPLORER_COMMAND])
        for name in EXPLORER_VALUES:
            w.v.absent(name)
        w.text("ex_status", "No explorer results are in this build.")
        w.text("ex_truncation", "")
        return
    entries = run.doc["entries"]
    rows: list[Row] = []
    truncated = []
    for i, e in enumerate(entries):
        base = ["entries", i]
        complete = strong("truncated") + ": not every cut ran" if e.get("truncated") else "complete"
        if e.get("truncated"):
            truncated.append(e["label"])
        rows.append([e["label"] + f" ({e['operator']})",
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
            label="tab-explorer", commands=[EXPLORER_COMMAND + (" --quick" if run.mode == "quick" else "")])
    for name, field, derivation in (("ex_total_schedules", "schedules", "sum"),
                                    ("ex_total_violations", "violations", "sum"),
                                    ("ex_total_seconds", "seconds", "sum"), ("ex_max_cuts", "crash_cuts", "max")):
        w.v.add(name, [(run.file, ["entries", i, field]) for i in range(len(entries))],
                "s" if field == "seconds" else "int", derivation)
    w.v.of(run, "ex_depth", ["depth"], "int")
    w.v.add("ex_truncated", [(run.file, ["entries", i, "truncated"]) for i in range(len(entries))
                             if entries[i].get("truncated")] or [(run.file, ["entries", 0, "truncated"])],
            "int", "sum")
    w.text("ex_status", f"The explorer results are from its {run.mode} mode (" + code(run.file) + ").")
    w.text("ex_truncation", text("The search of " + ", ".join(truncated) + " was ", strong("truncated"), ": it "
                                 "stopped at the explorer's cap before every crash cut ran, so that entry is a partial "
                                 "search and claims nothing about the cuts it did not reach.") if truncated else
           "Every search ran to completion.")


def _mutation(w: Writeup) -> None:
    found = w.results.optional("mutation.json")
    if found is None:
        w.text("mutation", strong("The mutation score has not been measured in this build") + ": there is no " +
               code("paper/results/mutation.json") + " (" + code(MUTATION_COMMAND) + " writes it).")
        w.text("mutation_scope", "none yet")
        return
    file, doc = found
    score = w.v.add("mut_score", [(file, ["score_percent"])], "num1")
    total = w.v.add("mut_total", [(file, ["total"])], "int")
    killed = w.v.add("mut_killed", [(file, ["killed"])], "int")
    survived = w.v.add("mut_survived", [(file, ["survived"])], "int")
    equivalent = w.v.add("mut_equivalent", [(file, ["equivalent"])], "int", "len")
    modules = w.v.add("mut_modules", [(file, ["scope"])], "int", "len")
    w.text("mutation_scope", joined_text(", ", (code(s) for s in doc.get("scope", []))))
    w.text("mutation", f"{str(doc.get('tool'))} ({str(doc.get('date'))}) made {total} mutants of "
                       f"{modules} modules (of " + code("reference/") + " and " + code("sim/") +
           f"): {killed} killed, {survived} survived, {equivalent} judged equivalent; a mutation score of "
           f"{score}% (" + code(file) + ").")


def _zoo(w: Writeup) -> None:
    header = ["JIRA", "Planted mistake", "Caught by", "Time", "Unplanted passes"]
    found = w.results.optional("zoo.json")
    if found is None:
        w.text("zoo", strong("The bug zoo has not been run in this build") + ": there is no " +
               code("paper/results/zoo.json") +
               " (" + code(ZOO_COMMAND) + " writes it), so this version cannot say which check catches each planted "
               "bug.")
        w.table("zoo", Table(header, [["not run (" + code("paper/results/zoo.json") + " is absent)"]],
                             aligns=["left", "left", "left", "right", "left"]), label="tab-zoo", commands=[ZOO_COMMAND])
        return
    file, doc = found
    rows = [[e["jira"], e["planted"], ", ".join(e["caught_by"]) if isinstance(e["caught_by"], list)
                                                   else e["caught_by"],
             w.v.add(f"zoo_{i}_seconds", [(file, [i, "seconds"])], "ms", "s_to_ms"),
             w.v.add(f"zoo_{i}_unplanted", [(file, [i, "unplanted_passes"])], "yesno", "yesno")]
            for i, e in enumerate(doc)]
    w.table("zoo", Table(header, rows, aligns=["left", "left", "left", "right", "left"],
                         widths=["auto", "2fr", "1.2fr", "auto", "auto"]), label="tab-zoo", commands=[ZOO_COMMAND])
    total = w.v.add("zoo_total", [(file, [])], "int", "len")
    caught = w.v.add("zoo_caught", [(file, [])], "int", "caught")
    w.text("zoo", f"The bug zoo planted {total} bugs; {caught} were caught (" + code(file) + ").")
