"""Native Spark on a localhost standalone cluster (``spark_impl/cluster.py``), where an executor is a JVM of its
own and ``executor_loss`` runs: ``python -m spark_impl.native.cluster_runs SCENARIO.json... [--workers 2]
[--out REPORT.json]``.

Each scenario runs on Spark's own Structured Streaming with the cluster as its
master; an ``executor_loss`` halts the JVM of the executor that reached the
named step (``fault_plan.py``: a stateful query's state file of the batch and
partition; ``plan.executor_loss_filter``: a stateless query's output rows), the
worker starts a new executor, and Spark reschedules the lost tasks. Which
executors were alive is read from Spark's own status (``live_executors``)
before and after each run: Spark never reuses an executor id, so the lost one
is the id that is gone. Each outcome is judged by every oracle and compared
with the reference's. Prints a JSON report; exit 0 iff every case holds: no error, no failed oracle, every
fault fired, and the same batches, state and sink as the reference.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

from reference.judge.compare import first_difference
from reference.judge.oracles import check_outcome, failures
from reference.protocol.run import run_scenario
from reference.language.scenario import load_scenario

from ..cluster import LocalCluster, suite_main
from ..session import session, stop
from . import run_native


def live_executors(spark: Any) -> list[str]:
    """The ids of the executors Spark's driver knows alive now (its status; the driver itself left out)."""
    ids = spark.sparkContext._jsc.sc().getExecutorIds()
    listed = spark._jvm.scala.jdk.javaapi.CollectionConverters.asJava(ids)
    return sorted(str(x) for x in listed)


def run_on_cluster(paths: Sequence[str], workers: int = 2) -> dict[str, Any]:
    """Run each scenario on a fresh cluster of ``workers`` one-core workers; judge and compare each."""
    report: dict[str, Any] = {"cases": []}
    with LocalCluster(workers=workers) as cluster:
        spark = session(cluster.url)
        report["master"] = cluster.url
        try:
            spark.sparkContext.parallelize(range(workers * 2), workers * 2).count()   # the executors come up
            for path in paths:
                scenario = load_scenario(path)
                work = Path(tempfile.mkdtemp(prefix="lightspeed-native-cluster-", dir=cluster.dir))
                before = live_executors(spark)
                started = time.time()
                outcome = run_native(scenario, workdir=str(work), master=cluster.url).outcome
                after = live_executors(session(cluster.url))
                bad = failures(check_outcome(scenario, outcome))
                reference = run_scenario(scenario).outcome()
                native = outcome.details["native"]
                report["cases"].append({
                    "scenario": scenario.name, "error": outcome.error,
                    "failed_oracles": [v.describe() for v in bad],
                    "difference": first_difference(reference, outcome, scenario.sink_mode),
                    "wall_s": round(time.time() - started, 2), "faults_fired": native["faults_fired"],
                    "faults_not_fired": native["faults_not_fired"], "executors_before": before,
                    "executors_after": after, "lost": sorted(set(before) - set(after)),
                    "recoveries": [r.to_dict() for r in outcome.recoveries]})
        finally:
            stop()
    report["ok"] = all(not c["error"] and not c["failed_oracles"] and not c["faults_not_fired"]
                       and c["difference"] is None for c in report["cases"])
    return report


def main(argv: Sequence[str] | None = None) -> int:
    return suite_main("Spark's own Structured Streaming (executor_loss included)", run_on_cluster,
                      list(argv) if argv is not None else None, prog="python -m spark_impl.native.cluster_runs")


if __name__ == "__main__":
    raise SystemExit(main())
