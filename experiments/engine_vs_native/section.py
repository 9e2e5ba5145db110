"""The paper's engine-against-native comparison on the object store: the offset-management query on both Spark
backends in one run, each configuration's p50 on both, their ratio, whether it lies within +-20%, and where it
does not the durationMs keys that differ most (``experiments.engine_vs_native.definition``)."""

from __future__ import annotations

from experiments.offset_management.definition import CONFIGS
from experiments.stats import keep_up_text
from experiments.section_content import Row, Table, Writeup, key, lookup

EXPERIMENT = "engine-vs-native"
BACKEND = "spark-native"
FIGURES = (("engine_vs_native", "100%"),)


def write(w: Writeup) -> None:
    run = w.run(EXPERIMENT, BACKEND)
    rows: list[Row] = []
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
            differs = "; ".join(f"{m['key']} " + w.v.of(run, f"{n}_{key(m['key'])}_diff",
                                                            base + ["mechanism", i, "diff_ms"], "ms")
                                for i, m in enumerate(row.get("mechanism") or []))
            keep = "; ".join(f"{b} {keep_up_text((row.get(b) or {}).get('keep_up'))}" for b in ("spark", BACKEND))
            rows.append([config,
                         w.v.of(run, f"{n}_engine_p50", base + ["spark", "p50", "median"], "ms"),
                         w.v.of(run, f"{n}_native_p50", base + [BACKEND, "p50", "median"], "ms"),
                         w.v.of(run, f"{n}_sim_p50", base + ["sim", "p50"], "ms"),
                         w.v.of(run, f"{n}_ratio", base + ["ratio"], "num2"),
                         "n/a" if within is None else "within" if within else "outside: " + differs,
                         keep])
    w.table("engine_vs_native", Table(["Configuration", "Engine p50", "Native p50", "Simulator p50",
                                       "Engine / native", "Within 20% either way; else engine minus native", "Keep-up"],
                                      rows, aligns=["left"] + ["right"] * 4 + ["left", "left"]),
            label="tab-evn", runs=[run],
            caption="The offset-management query on the modelled object store, on the engine and on native Spark "
                    "in one run (same scenario and storage profile), with the simulator's prediction: each "
                    "configuration's median latency, their ratio and, where the engine and Spark differ by more "
                    "than a fifth, the durationMs keys whose medians differ most.")
    w.text("evn_availability", w.availability(EXPERIMENT, (BACKEND,)))
    w.add_figures(EXPERIMENT, FIGURES, ["The engine against native Spark on the object store: median latency and "
                                        "batch duration per configuration, with the simulator's prediction."])
