"""The paper's bug-zoo section: each planted Spark state-store bug, the check that caught it, how fast, and
whether the real store passes the same sequence."""

from __future__ import annotations

from typing import Any

from experiments.section_content import Row, Table, Writeup, code, strong, text

EXPERIMENT = "bug-zoo"
LEGACY = "zoo.json"          # where ``lightspeed zoo`` wrote the rows before the zoo was an experiment
CAPTION = ("The bug zoo: each real Spark state-store bug planted in a copy of the RocksDB store, the checks that "
           "caught it, how long until the first did, and whether the real store passes the same sequence.")
HEADER = ["JIRA", "Planted mistake", "Caught by", "Time", "Unplanted passes"]


def write(w: Writeup) -> None:
    run = w.run(EXPERIMENT, "reference")
    located: tuple[str, list[Any], list[dict[str, Any]]] | None = None
    if run is not None:
        located = (run.file, ["summary", "rows"], run.doc["summary"]["rows"])
    elif (found := w.results.optional(LEGACY)) is not None:
        located = (found[0], [], found[1])
    if located is None:
        w.text("zoo", strong("The bug zoo has not been run in this build") + ": there is no " +
               code("paper/results/bug-zoo/") + ", so this version cannot say which check catches each planted bug.")
        w.table("zoo", Table(HEADER, [[text("not run (", code("paper/results/bug-zoo/"), " is absent)")]],
                             aligns=["left", "left", "left", "right", "left"]), label="tab-zoo", caption=CAPTION)
        return
    file, path, doc = located
    rows: list[Row] = [[e["jira"], e["planted"],
                        ", ".join(e["caught_by"]) if isinstance(e["caught_by"], list) else e["caught_by"],
                        w.v.add(f"zoo_{i}_seconds", [(file, path + [i, "seconds"])], "ms", "s_to_ms"),
                        w.v.add(f"zoo_{i}_unplanted", [(file, path + [i, "unplanted_passes"])], "yesno", "yesno")]
                       for i, e in enumerate(doc)]
    w.table("zoo", Table(HEADER, rows, aligns=["left", "left", "left", "right", "left"],
                         widths=["auto", "2fr", "1.2fr", "auto", "auto"]), label="tab-zoo", caption=CAPTION,
            runs=[run] if run is not None else [], commands=[] if run is not None else ["lightspeed zoo"])
    total = w.v.add("zoo_total", [(file, path)], "int", "len")
    caught = w.v.add("zoo_caught", [(file, path)], "int", "caught")
    w.text("zoo", f"Of the {total} bugs planted, {caught} were caught (" + code(file) + ").")
