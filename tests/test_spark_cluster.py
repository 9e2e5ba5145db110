"""The engine on a real two-worker Spark standalone cluster on localhost, including an executor loss and a
third worker that joins mid-run and leaves again (state rebalancing).

The cluster (a master and two one-core workers, each with its own executor
JVM) is started by ``spark_impl.cluster`` in a subprocess, which needs its own
SparkContext: this is the one place the suite starts a second Spark.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from reference.catalogue import scenario_dict

pytestmark = [pytest.mark.spark, pytest.mark.slow]

CASES = [
    ("aggregate", "sync", []),
    ("window_aggregate", "async_state", [{"kind": "task_failure",
                                          "at": {"step": "task_apply", "batch": 1, "when": "after", "partition": 0}}]),
    ("join", "pipelining", [{"kind": "driver_crash", "at": {"step": "offset_log_write", "batch": 2, "when": "after"}}]),
    ("dedup_within_watermark", "sync", [{"kind": "executor_loss",
                                         "at": {"step": "task_apply", "batch": 2, "when": "before", "partition": 1}}]),
]


def rebalancing_case() -> dict:
    """A running count over 3 state partitions on executors 0 and 1 (p0 on 0, p1 on 1, p2 on 0); worker 2
    joins before batch 2 and leaves before batch 4. Hand-derived by the placement rule: the join moves p2 to
    2 (its home over 0, 1, 2; 0 held two), the leave moves it back to 0 (its home over 0, 1)."""
    d = scenario_dict("aggregate", "sync", batches=6)
    d["name"] = "cluster-aggregate-rebalance"
    d["query"]["state_partitions"] = 3
    d["events"] = [{"kind": "executor_join", "executor": "2", "before_batch": 2},
                   {"kind": "executor_leave", "executor": "2", "before_batch": 4}]
    return d


def test_differential_suite_on_a_two_worker_standalone_cluster(tmp_path):
    paths = []
    scenarios = []
    for op, mode, faults in CASES:
        d = scenario_dict(op, mode, faults=faults)
        d["name"] = f"cluster-{op}-{mode}-{faults[0]['kind'] if faults else 'none'}"
        scenarios.append(d)
    # before the executor loss: its replacement executor would take the id the joining worker's gets
    scenarios.insert(1, rebalancing_case())
    for d in scenarios:
        path = tmp_path / f"{d['name']}.json"
        path.write_text(json.dumps(d))
        paths.append(str(path))
    report_path = tmp_path / "report.json"
    proc = subprocess.run([sys.executable, "-m", "spark_impl.cluster", *paths, "--workers", "2",
                           "--out", str(report_path)], capture_output=True, text=True, timeout=900)
    assert report_path.exists(), proc.stderr[-3000:]
    report = json.loads(report_path.read_text())
    for case in report["cases"]:
        assert case["error"] is None, (case["scenario"], case["error"])
        assert not case["failed_oracles"], (case["scenario"], case["failed_oracles"])
        assert case["difference"] is None, (case["scenario"], case["difference"])
    assert report["ok"] and proc.returncode == 0
    assert report["master"].startswith("spark://")
    assert len(report["executors_before"]) == 2, "two workers, one executor JVM each"
    # the executor-loss case killed one executor JVM; its worker started a replacement
    assert len(set(report["executors_before"]) - set(report["executors_after"])) >= 1
    # preferred locations: without faults each partition stays on one executor and finds its stores
    # open there; the first task of each partition loads from the checkpoint, later ones may not
    cases = {case["scenario"]: case for case in report["cases"]}
    plain = cases["cluster-aggregate-sync-none"]
    assert all(len(moves) == 1 for moves in plain["executors"].values()), plain["executors"]
    assert plain["cache_hits"] >= plain["tasks"] - 2 * len(plain["executors"]), plain
    # after the executor loss, partition 1 ran somewhere else and reloaded its stores there
    lost = cases["cluster-dedup_within_watermark-sync-executor_loss"]
    assert len(lost["executors"]["1"]) >= 2, lost["executors"]
    # state rebalancing: the outcome records both moves; p2 ran on 0, then on the joined executor 2, then on 0
    # again; it loaded from the checkpoint at each move and found its store open the batch after
    moved = cases["cluster-aggregate-rebalance"]
    assert moved["moves"] == [{"batch": 2, "partition": 2, "from": "0", "to": "2"},
                              {"batch": 4, "partition": 2, "from": "2", "to": "0"}], moved["moves"]
    assert moved["executors"] == {"0": ["0"], "1": ["1"], "2": ["0", "2", "0"]}, moved["executors"]
    assert moved["moved_partition_tasks"] == [[2, 2, 0], [3, 2, 1], [4, 2, 0], [5, 2, 1]], moved


def test_experiment_points_run_as_tasks_on_a_standalone_cluster(tmp_path):
    """``--master spark://...``: the sweep's points run as Spark tasks on the cluster's executors (the
    project's code shipped to them), and each gives the numbers it gives when run in this process."""
    from experiments.execution import run_point
    from experiments.experiment import RunContext
    from experiments.registry import get_experiment
    from spark_impl.cluster import LocalCluster
    out = tmp_path / "out"
    with LocalCluster(workers=2, workdir=tmp_path / "cluster") as cluster:
        proc = subprocess.run([sys.executable, "-m", "experiments.cli", "experiment", "offset-management",
                               "--quick", "--master", cluster.url, "--out", str(out), "--no-figures"],
                              capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads((out / "results.json").read_text())
    assert results["environment"]["executor"] == "spark"
    assert results["environment"]["master"] == cluster.url
    records = results["points"]
    expected = get_experiment("offset-management").points(RunContext(backend="sim", quick=True))
    assert sorted(r["id"] for r in records) == sorted(p.id for p in expected)
    assert all(r["error"] is None for r in records), [r["error"] for r in records]
    # measured in the cluster's executors (a worker starts its executors in its work directory), not the driver;
    # the two one-core workers share the points
    assert len({r["process"]["dir"].split("/worker-")[1][0] for r in records}) == 2, [r["process"] for r in records]
    assert all(r["process"]["dir"].startswith(str(tmp_path / "cluster")) for r in records), records[0]["process"]
    for record in records:
        assert run_point(record["point"])["metrics"] == record["metrics"], record["id"]
