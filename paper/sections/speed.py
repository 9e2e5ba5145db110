"""The paper's comparison of the engine with Spark's own Structured Streaming, like with like
(``python -m spark_impl.engine.speed``; ``paper/results/speed/``): the same running count, arrivals and
trigger on both sides, every run with its keep-up verdict and no latency for a backlogged one."""

from __future__ import annotations

from typing import Any

from experiments.section_content import Row, Table, Writeup, code, lookup

ABLATION = "speed/spark-speed-ablation-native.json"
GROUP = "speed/spark-speed-group.json"
COMMANDS = {name: f"python -m spark_impl.engine.speed --parts {parts} --seconds 15 --master 'local[16,4]' "
                  f"--out paper/results/{name}" for name, parts in ((ABLATION, "ablation,native"), (GROUP, "group"))}
RUNS = (("native", ["native"], "Spark (native), RocksDB with changelog checkpointing"),
        ("baseline", ["ablation", "baseline"], "PySpark engine, features off"),
        ("async_purge", ["ablation", "async_purge"], "PySpark engine, async purge"),
        ("async_progress", ["ablation", "async_progress"], "PySpark engine, async progress"),
        ("both", ["ablation", "both"], "PySpark engine, every feature on"))
CAPTION = ("The engine and native Spark, like with like: the same running count, arrivals and trigger, checkpoints "
           "on local disk; each run's median and tail latency and whether it kept up (a backlogged run shows no "
           "latency). Single runs on a shared machine.")


def write(w: Writeup) -> None:
    rows: list[Row] = []
    found = w.results.optional(ABLATION)
    if found is None:
        rows.append(["not run (" + code("paper/results/" + ABLATION) + " is absent)"])
        w.v.absent("speed_rate")
    else:
        file, doc = found
        w.v.add("speed_rate", [(file, ["rate"])], "int")
        for name, path, label in RUNS:
            rows.append(_row(w, file, doc, f"speed_{name}", path, label))
    group = w.results.optional(GROUP)
    if group is not None:
        file, doc = group
        for name in sorted(doc.get("group", {}), key=lambda n: int(n.split("_")[-1])):
            jobs = name.split("_")[-1]
            rows.append(_row(w, file, doc, f"speed_{name}", ["group", name],
                             f"PySpark engine, every feature on, 100 ms cuts, {jobs} batch(es) per Spark job"))
    w.table("speed", Table(["Run", "p50", "p99", "Keep-up", "Processed / input rows/s"], rows,
                           aligns=["left", "right", "right", "left", "right"]),
            label="tab-speed", commands=[COMMANDS[ABLATION], COMMANDS[GROUP]], caption=CAPTION)


def _row(w: Writeup, file: str, doc: dict[str, Any], name: str, path: list[str], label: str) -> list[str]:
    entry = lookup(doc, path) or {}
    behind = entry.get("backlogged")
    p50 = "backlogged" if behind else w.v.add(f"{name}_p50", [(file, path + ["latency_ms", "p50"])], "ms")
    p99 = "" if behind else w.v.add(f"{name}_p99", [(file, path + ["latency_ms", "p99"])], "ms")
    keep = "BACKLOGGED" if behind else "kept up" if entry.get("kept_up") else "not judged"
    rates = w.v.add(f"{name}_processed", [(file, path + ["throughput", "processed_rows_per_s"])], "int") + " / " + \
        w.v.add(f"{name}_input", [(file, path + ["throughput", "input_rows_per_s"])], "int")
    return [label, p50, p99, keep, rates]
