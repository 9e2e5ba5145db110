"""``executor_loss`` on Spark's own Structured Streaming, on a two-worker standalone cluster on localhost.

The executor that reaches the named step halts its own JVM (a stateful query:
at its state file's rename of the batch and partition, i.e. the state commit;
a stateless one: while its task writes the batch's output rows), the worker
starts a new executor, and Spark reschedules the lost tasks; the query goes on
with no restart of the driver. Spark's status must show each lost executor's
id gone (Spark never reuses one), every oracle must hold, and the outcome must
be the reference's. The cluster and its driver run in a subprocess
(``spark_impl.native.cluster_runs``): this process's Spark is on a local master.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from cluster_cases import run_cluster_command
from reference.language.catalogue import scenario_dict

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def case(operator: str, faults: list[dict[str, Any]], batches: int = 4) -> dict[str, Any]:
    d = scenario_dict(operator, "sync", faults=faults, batches=batches, seed=5)
    d["name"] = f"native-cluster-{operator}"
    d["source"] = {"kind": "generated", "partitions": 2, "keys": 4, "records_per_partition_per_batch": 3,
                   "batches": batches, "event_time": {"start_ms": 1000, "step_ms": 10, "max_disorder_ms": 0}}
    return d


def loss(step: str, batch: int, partition: int, when: str = "before") -> dict[str, Any]:
    return {"kind": "executor_loss", "at": {"step": step, "batch": batch, "partition": partition, "when": when}}


def test_an_executor_lost_at_the_state_commit_or_the_sink_write_is_replaced_and_the_query_goes_on(tmp_path):
    cases = [case("aggregate", [loss("state_commit", 1, 0, "after"), loss("sink_write", 2, 1)]),
             case("map", [loss("sink_write", 1, 0)], batches=3)]
    report, _ = run_cluster_command("spark_impl.native.cluster_runs", cases, tmp_path, timeout=1800)
    assert report["ok"], json.dumps(report, indent=1)[:3000]
    for result, d in zip(report["cases"], cases):
        fired = result["faults_fired"]
        assert sorted(f["fault"] for f in fired) == list(range(len(d["faults"])))
        halted = {f["executor"] for f in fired}
        assert "driver" not in halted and halted == set(result["lost"]), result
        assert not set(result["executors_after"]) & halted   # a lost executor's id never comes back
        assert result["difference"] is None and result["recoveries"] == []
    aggregate = report["cases"][0]["faults_fired"]
    assert (aggregate[0]["op"], aggregate[0]["when"], aggregate[0]["path"]) == ("rename", "after",
                                                                               "state/0/0/2.changelog")
    assert aggregate[1]["path"] == "state/0/1/3.changelog" and aggregate[1]["partitionId"] == 1
