"""The paper's engine-against-native comparison on the object store: the offset-management query on both Spark
backends in one run, each configuration's p50 on both, their ratio, whether it lies within +-20%, and where it
does not the durationMs keys that differ most (``experiments.engine_vs_native.definition``)."""

from __future__ import annotations

from experiments.offset_management.definition import CONFIGS
from experiments.stats import keep_up_text
from experiments.writeup import Table, Writeup, esc, key, lookup

EXPERIMENT = "engine-vs-native"
BACKEND = "spark-native"
FIGURES = (("engine_vs_native", "100%"),)


def write(w: Writeup) -> None:
    run = w.run(EXPERIMENT, BACKEND)
    rows: list[list[str]] = []
    if run is None:
        rows.append([w.absent_cell(EXPERIMENT, BACKEND)])
    else:
        for config in CONFIGS:
            base = ["summary", "rows", config]
            row = lookup(run.doc, base)
            if row is None:
                continue
            n = f"evn_{key(config)}"
            within = row.get("within")
            differs = "; ".join(f"{esc(m['key'])} " + w.v.of(run, f"{n}_{key(m['key'])}_diff",
                                                            base + ["mechanism", i, "diff_ms"], "ms")
                                for i, m in enumerate(row.get("mechanism") or []))
            keep = "; ".join(f"{b} {keep_up_text((row.get(b) or {}).get('keep_up'))}" for b in ("spark", BACKEND))
            rows.append([esc(config),
                         w.v.of(run, f"{n}_engine_p50", base + ["spark", "p50", "median"], "ms"),
                         w.v.of(run, f"{n}_native_p50", base + [BACKEND, "p50", "median"], "ms"),
                         w.v.of(run, f"{n}_sim_p50", base + ["sim", "p50"], "ms"),
                         w.v.of(run, f"{n}_ratio", base + ["ratio"], "num2"),
                         "n/a" if within is None else "within" if within else "outside: " + differs,
                         esc(keep)])
    w.table("engine_vs_native", Table(["Configuration", "Engine p50", "Native p50", "Simulator p50",
                                       "Engine / native", "Within +-20%; else engine minus native", "Keep-up"],
                                      rows, aligns=["left"] + ["right"] * 4 + ["left", "left"]),
            label="tab-evn", runs=[run])
    w.text("evn_availability", w.availability(EXPERIMENT, (BACKEND,)))
    w.add_figures(EXPERIMENT, FIGURES)
