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

from cluster_cases import run_cluster_command
from reference.language.catalogue import scenario_dict

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
    scenarios = []
    for op, mode, faults in CASES:
        d = scenario_dict(op, mode, faults=faults)
        d["name"] = f"cluster-{op}-{mode}-{faults[0]['kind'] if faults else 'none'}"
        scenarios.append(d)
    # after the executor loss: the scenario's executor names are bound to the executors that exist then (the lost
    # executor's replacement has a new Spark id), not to the ids "0", "1", "2"
    scenarios.append(rebalancing_case())
    report, proc = run_cluster_command("spark_impl.cluster", scenarios, tmp_path, timeout=900)
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
    # state rebalancing: the outcome records both moves; p2 ran on the executor bound to "0", then on the one the
    # joining worker started (bound to "2"), then on "0"'s again; it loaded from the checkpoint at each move and
    # found its store open the batch after
    moved = cases["cluster-aggregate-rebalance"]
    assert moved["moves"] == [{"batch": 2, "partition": 2, "from": "0", "to": "2"},
                              {"batch": 4, "partition": 2, "from": "2", "to": "0"}], moved["moves"]
    bound = moved["bound_executors"]
    assert sorted(bound) == ["0", "1", "2"] and all(len(ids) == 1 for ids in bound.values()), bound
    e0, e1, e2 = bound["0"][0], bound["1"][0], bound["2"][0]
    assert moved["executors"] == {"0": [e0], "1": [e1], "2": [e0, e2, e0]}, (moved["executors"], bound)
    # the loss case killed executor "0" or "1": one of the names is bound to its replacement, a new Spark id, and
    # the joining worker's executor is newer still
    assert {e0, e1} != {"0", "1"} and int(e2) > max(int(e0), int(e1)), bound
    assert moved["moved_partition_tasks"] == [[2, 2, 0], [3, 2, 1], [4, 2, 0], [5, 2, 1]], moved


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    """A two-worker standalone cluster for the tests that send work to one (started once: about 20 s)."""
    from spark_impl.cluster import LocalCluster
    with LocalCluster(workers=2, workdir=tmp_path_factory.mktemp("cluster")) as running:
        yield running


# A planted mistake (SPARK-55510: a delete never reaches the changelog), defined where it runs: in the test and in
# the driver script below, whose __main__ Spark ships to the executors by value.
PLANTED = """
from reference.protocol.incarnation import Incarnation
from reference.judge.explorer import Model
from reference.protocol.state_store import StateStore

class ForgetsDeletes(StateStore):
    def delete(self, key):
        self.data.pop(key, None)

PLANTED_MODEL = Model(type("ForgetsDeletesIncarnation", (Incarnation,), {"store_class": ForgetsDeletes}))
"""

# One driver on the cluster (one SparkContext: each costs about 10 s to start) runs what the tests below judge:
# the quick offset-management sweep, the explorer through the command line, and the explorer with the planted mistake.
DRIVER = """
import json, sys
from experiments.cli import main
from experiments.explore_spark import explore_on_spark
from reference.language.catalogue import make
""" + PLANTED + """
master, out, scenario, report, planted = sys.argv[1:6]
codes = [main(["experiment", "offset-management", "--quick", "--master", master, "--out", out, "--no-figures"]),
         main(["explore", scenario, "--master", master, "--out", report, "--quiet"])]
found = explore_on_spark(make("dedup_within_watermark", batches=3), master, model=PLANTED_MODEL, quiet=True)
with open(planted, "w") as f:
    json.dump({"codes": codes, "schedules": found.schedules, "distinct": found.distinct_checkpoints,
               "fingerprint": found.checkpoint_fingerprint, "seconds": found.seconds,
               "violations": [[v.order, v.schedule, [x.to_dict() for x in v.verdicts]] for v in found.violations]}, f)
"""

EXPLORED = {"operator": "aggregate", "mode": "async_state", "batches": 3}


@pytest.fixture(scope="module")
def on_the_cluster(cluster, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """What the driver on the cluster wrote: the sweep's results, the exploration reports, its exit codes."""
    from reference.language.catalogue import make
    work = tmp_path_factory.mktemp("driver")
    scenario = work / "scenario.json"
    scenario.write_text(make(EXPLORED["operator"], EXPLORED["mode"], batches=EXPLORED["batches"]).to_json())
    out, report, planted = work / "out", work / "report.json", work / "planted.json"
    proc = subprocess.run([sys.executable, "-c", DRIVER, cluster.url, str(out), str(scenario), str(report),
                           str(planted)], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0 and planted.exists(), proc.stderr[-3000:]
    return {"results": json.loads((out / "results.json").read_text()), "report": json.loads(report.read_text()),
            "planted": json.loads(planted.read_text())}


def test_experiment_points_run_as_tasks_on_a_standalone_cluster(cluster, on_the_cluster):
    """``--master spark://...``: the sweep's points run as Spark tasks on the cluster's executors (the
    project's code shipped to them), and each gives the numbers it gives when run in this process."""
    from experiments.execution import run_point
    from experiments.experiment import RunContext
    from experiments.registry import get_experiment
    assert on_the_cluster["planted"]["codes"][0] == 0
    results = on_the_cluster["results"]
    assert results["environment"]["executor"] == "spark"
    assert results["environment"]["master"] == cluster.url
    records = results["points"]
    expected = get_experiment("offset-management").points(RunContext(backend="sim", quick=True))
    assert sorted(r["id"] for r in records) == sorted(p.id for p in expected)
    assert all(r["error"] is None for r in records), [r["error"] for r in records]
    # measured in the cluster's executors (a worker starts its executors in its work directory), not the driver;
    # the two one-core workers share the points
    assert len({r["process"]["dir"].split("/worker-")[1][0] for r in records}) == 2, [r["process"] for r in records]
    assert all(r["process"]["dir"].startswith(str(cluster.dir)) for r in records), records[0]["process"]
    for record in records:
        assert run_point(record["point"])["metrics"] == record["metrics"], record["id"]


def test_the_explorer_sharded_on_the_cluster_reports_what_a_local_run_does(on_the_cluster):
    """``lightspeed explore --master spark://...`` spreads the schedules over the cluster's executors as Spark
    tasks; its report equals a local run's: schedules, distinct checkpoints and their fingerprint, violations
    (a clean scenario, and one with a planted mistake)."""
    from reference.language.catalogue import make
    from reference.judge.explorer import explore
    namespace: dict = {}
    exec(PLANTED, namespace)
    sharded, sharded_planted = on_the_cluster["report"], on_the_cluster["planted"]
    assert sharded_planted["codes"][1] == 0
    local = explore(make(EXPLORED["operator"], EXPLORED["mode"], batches=EXPLORED["batches"]), workers=2)
    assert (sharded["schedules"], sharded["distinct_checkpoints"], sharded["checkpoint_fingerprint"],
            sharded["truncated"], sharded["violations"]) == (local.schedules, local.distinct_checkpoints,
                                                             local.checkpoint_fingerprint, False, [])
    mistaken = explore(make("dedup_within_watermark", batches=3), model=namespace["PLANTED_MODEL"], workers=2)
    assert mistaken.violations, "the planted mistake is caught"
    assert sharded_planted["violations"] == json.loads(json.dumps(
        [[v.order, v.schedule, [x.to_dict() for x in v.verdicts]] for v in mistaken.violations]))
    assert (sharded_planted["schedules"], sharded_planted["distinct"], sharded_planted["fingerprint"]) == (
        mistaken.schedules, mistaken.distinct_checkpoints, mistaken.checkpoint_fingerprint)
    print(f"\nsharded on the two-worker cluster: {sharded['seconds']:.1f} s and {sharded_planted['seconds']:.1f} s; "
          f"local pool of 2: {local.seconds:.1f} s and {mistaken.seconds:.1f} s")
