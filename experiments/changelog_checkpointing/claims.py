"""The published claims the changelog-checkpointing experiment judges (and those it is the home of but
no experiment tests), each a quote from its source (``experiments.publications``)."""

from __future__ import annotations

from experiments.publications import Claim

CLAIMS: dict[str, Claim] = {
    "cl_faster": Claim(
        "rocksdb", "This allows for faster state checkpointing with the RocksDB state store provider.",
        "faster state checkpointing", "the post's description (no benchmark)",
        "changelog commit against RocksDB without changelog, faster by", "more", 0.0, 0.0, "%", "derived",
        experiment="changelog-checkpointing", sense="faster",
        checked_against="cb2a0901d70eb3badd267fc45baf8f19fcc23c8e48df3a89836b24c2c4b5344b"),
    # "311ms / 5s": each as the post rounds it (310.5-311.5 ms, 4.5-5.5 s), so the ratio lies between these
    "flink_ckpt_ratio": Claim(
        "flink", "311ms / 5s", "311ms / 5s", "Flink, ValueState workload, parallelism 50, 50K events/s",
        "no-changelog commit p50 over the changelog's (Flink: checkpoint p50, incremental over changelog)",
        "range", round(4500.0 / 311.5, 2), round(5500.0 / 310.5, 2), "x", "external", neutral=1.0,
        experiment="changelog-checkpointing"),
    "flink_storage": Claim(
        "flink", "space usage increases by 30%", "increases by 30%",
        "Flink, ValueState workload, parallelism 50, 50K events/s",
        "state kept by the changelog, against RocksDB without changelog (Flink: against incremental checkpoints)",
        "approximately", 30.0, 30.0, "%", "external", experiment="changelog-checkpointing", sense="higher"),
    "flink_recovery": Claim(
        "flink", "recovery time increases by 66%-225%", "66%-225%",
        "Flink, ValueState workload, parallelism 50, 50K events/s",
        "recovery time of the changelog, against RocksDB without changelog", "range", 66.0, 225.0, "%", "external",
        experiment="changelog-checkpointing", sense="higher"),
}
