"""The paper's changelog-checkpointing section: the three providers on the simulator, and the comparison with
Flink's changelog backend, each figure judged by the experiment (``experiments.claims``: cl_faster, flink_*)."""

from __future__ import annotations

from experiments.writeup import Table, Writeup, esc, key

EXPERIMENT = "changelog-checkpointing"
FIGURES = (("changelog_checkpointing", "100%"),)
FLINK_ROWS = (("flink_ckpt_ratio", "no-changelog over changelog, commit p50 (Flink: checkpoint p50)"),
              ("flink_storage", "state kept, changelog against no-changelog"),
              ("flink_recovery", "recovery, changelog against no-changelog"),
              ("cl_faster", "changelog commit faster than one without changelog (the RocksDB post)"))
VALUES = ("cl_state_keys", "cl_keys", "cl_cmp_deltas", "cl_cmp_commit_changelog", "cl_cmp_commit_snapshot",
          "cl_cmp_commit_ratio", "cl_cmp_storage", "cl_cmp_written", "cl_cmp_recovery", "cl_cmp_recovery_pct",
          "cl_cmp_storage_pct")


def write(w: Writeup) -> None:
    run = w.run(EXPERIMENT, "sim")
    w.text("cl_availability", w.availability(EXPERIMENT))
    w.add_figures(EXPERIMENT, FIGURES)
    rows = []
    if run is None:
        rows.append([w.absent_cell(EXPERIMENT, "sim")])
        for name in VALUES:
            w.v.absent(name)
    else:
        for k in run.doc["summary"]["rows"]:
            base = ["summary", "rows", k]
            n = f"cl_{key(k)}"
            rows.append([esc(f"{run.tag}, {k}"),
                         w.v.of(run, f"{n}_commit_p50", base + ["commit_ms_p50", "median"], "ms"),
                         w.v.of(run, f"{n}_commit_p99", base + ["commit_ms_p99", "median"], "ms"),
                         w.v.of(run, f"{n}_snapshots", base + ["snapshot_uploads", "median"], "int"),
                         w.v.of(run, f"{n}_written", base + ["bytes_written", "median"], "mb"),
                         w.v.of(run, f"{n}_kept", base + ["state_bytes_retained", "median"], "mb"),
                         w.v.of(run, f"{n}_recovery", base + ["recovery_load_ms_mean", "median"], "ms")])
        w.v.of(run, "cl_state_keys", ["summary", "state_keys"], "keys")
        w.v.of(run, "cl_keys", ["summary", "keys"], "int")
        c = ["summary", "comparison"]
        w.v.of(run, "cl_cmp_deltas", c + ["changelog_min_deltas"], "int")
        w.v.of(run, "cl_cmp_commit_changelog", c + ["commit_p50_changelog_ms"], "ms")
        w.v.of(run, "cl_cmp_commit_snapshot", c + ["commit_p50_snapshot_ms"], "ms")
        w.v.add("cl_cmp_commit_ratio", [(run.file, c + ["commit_p50_snapshot_ms"]),
                                        (run.file, c + ["commit_p50_changelog_ms"])], "x", "ratio")
        w.v.of(run, "cl_cmp_storage", c + ["storage_overhead"], "change")
        w.v.of(run, "cl_cmp_written", c + ["bytes_written_ratio"], "change")
        w.v.of(run, "cl_cmp_recovery", c + ["recovery_slowdown"], "change")
        w.v.of(run, "cl_cmp_recovery_pct", c + ["recovery_slowdown"], "pct")
        w.v.of(run, "cl_cmp_storage_pct", c + ["storage_overhead"], "pct")
    w.table("changelog", Table(["Run, provider / min deltas", "Commit p50", "Commit p99", "Snapshots",
                                "Bytes written", "State kept", "Recovery load"], rows), label="tab-cl", runs=[run])
    flink = []
    for claim_id, label in FLINK_ROWS:
        flink.append([esc(label), w.v.claim(f"pub_{claim_id}", claim_id), w.verdict(f"cl_{claim_id}", run, claim_id)])
    w.table("changelog_flink", Table(["Measure", "Published", "Simulator: verdict (measured, tolerance)"], flink,
                                     aligns=["left", "right", "left"], widths=["1.6fr", "auto", "2fr"]),
            label="tab-cl-flink", runs=[run])
