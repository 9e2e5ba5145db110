"""The published claims the changelog-checkpointing experiment judges (and those it is the home of but
no experiment tests), each a quote from its source (``experiments.publications``)."""

from __future__ import annotations

from experiments.publications import Claim

CLAIMS: dict[str, Claim] = {
    "cl_faster": Claim(
        "rocksdb", "This allows for faster state checkpointing with the RocksDB state store provider.",
        "the post's description (no benchmark)", "changelog commit against RocksDB without changelog, faster by",
        "direction", 0.0, 1.0, "%", 10.0, "a commit faster by less than a tenth is not called faster",
        experiment="changelog-checkpointing",
        checked_against="cb2a0901d70eb3badd267fc45baf8f19fcc23c8e48df3a89836b24c2c4b5344b"),
    "flink_ckpt_ratio": Claim(
        "flink", "311ms / 5s", "Flink, ValueState workload, parallelism 50, 50K events/s",
        "no-changelog commit p50 over the changelog's (Flink: checkpoint p50, incremental over changelog)",
        "range", 5000.0 / 311.0, 5000.0 / 311.0, "x", 4.0,
        "the measures differ: a task's commit here, a checkpoint barrier over 50 tasks there",
        neutral=1.0, experiment="changelog-checkpointing"),
    "flink_storage": Claim(
        "flink", "space usage increases by 30%", "Flink, ValueState workload, parallelism 50, 50K events/s",
        "state kept by the changelog, against RocksDB without changelog (Flink: against incremental checkpoints)",
        "range", 30.0, 30.0, "%", 10.0,
        "both baselines share files between checkpoints, but the workloads differ (Flink's ValueState job, our "
        "running count)", experiment="changelog-checkpointing"),
    "flink_recovery": Claim(
        "flink", "recovery time increases by 66%-225%", "Flink, ValueState workload, parallelism 50, 50K events/s",
        "recovery time of the changelog, against RocksDB without changelog", "range", 66.0, 225.0, "%", 10.0,
        "as for the storage: 10 points", experiment="changelog-checkpointing"),
}
