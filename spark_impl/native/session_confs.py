"""The Spark confs that configure one scenario's query, set on the shared session for the run only
(``query_run.NativeRun`` sets them on each incarnation's session and restores them at the end)."""

from __future__ import annotations

from reference.language.scenario import Scenario

ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"


def engine_confs(scenario: Scenario, one_split_per_file: bool = True) -> dict[str, str]:
    """The session confs that configure one scenario's query (captured in its offset log at start).
    ``one_split_per_file``: each input file its own task, so a batch's rows reach each state partition in
    file order (the differential runs); without it (a stateless run through the stat sink) Spark packs the
    small files of a batch into a few tasks, as it does by default."""
    e = scenario.engine
    confs = {
        "spark.sql.shuffle.partitions": str(scenario.state_partitions),
        "spark.sql.streaming.stateStore.providerClass": HDFS if e.provider == "delta" else ROCKSDB,
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled":
            "true" if e.provider == "changelog" else "false",
        "spark.sql.streaming.stateStore.minDeltasForSnapshot": str(e.min_deltas_for_snapshot),
        "spark.sql.streaming.stateStore.maintenanceInterval": f"{e.maintenance_interval_ms}ms",
        "spark.sql.streaming.minBatchesToRetain": str(e.min_batches_to_retain),
        "spark.sql.streaming.asyncLogPurge.enabled": "true" if e.log_purge_mode == "async" else "false",
        # the reference has no batches without input: a no-data batch would shift every batch id after it
        "spark.sql.streaming.noDataMicroBatches.enabled": "false",
        "spark.sql.streaming.numRecentProgressUpdates": "100000",
    }
    if one_split_per_file:
        confs.update({"spark.sql.files.maxPartitionBytes": str(1 << 30),
                      "spark.sql.files.openCostInBytes": str(1 << 30)})
    return confs
