"""A Spark standalone cluster on localhost: one master and N workers, for tests and experiments.

Spark's own ``sbin/start-master.sh`` and ``sbin/start-worker.sh`` are used
when the installed pyspark ships them; otherwise the same daemons are started
with ``bin/spark-class`` (which is what those scripts run). Every worker gets
one core, its own work directory and its own executor, so the cluster has as
many executors as workers and an executor loss is the death of a real JVM.

    with LocalCluster(workers=2) as cluster:
        run_spark(scenario, master=cluster.url)
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any


MEMBERSHIP_TIMEOUT_S = 300.0   # how long the cluster waits for the batch before an executor event


def spark_home() -> Path:
    import pyspark
    return Path(pyspark.__file__).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalCluster:
    """Start a standalone master and ``workers`` workers on 127.0.0.1; stop them on exit."""

    def __init__(self, workers: int = 2, cores_per_worker: int = 1, memory: str = "1g",
                 workdir: str | os.PathLike[str] | None = None):
        from spark_impl.session import check_java
        check_java()
        self.workers, self.cores, self.memory = workers, cores_per_worker, memory
        self.dir = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="lightspeed-cluster-"))
        self.port, self.ui_port = _free_port(), _free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.procs: list[subprocess.Popen[bytes]] = []
        self.worker_procs: dict[int, subprocess.Popen[bytes]] = {}

    def _spawn(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        home = spark_home()
        env = dict(os.environ, SPARK_HOME=str(home), SPARK_LOCAL_IP="127.0.0.1",
                   SPARK_LOG_DIR=str(self.dir / "logs"), SPARK_PID_DIR=str(self.dir / "pids"))
        log = open(self.dir / f"{name}.log", "wb")
        proc = subprocess.Popen([str(home / "bin" / "spark-class"), *args], env=env, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append(proc)
        return proc

    def start(self) -> "LocalCluster":
        self.dir.mkdir(parents=True, exist_ok=True)
        self._spawn("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                    "--port", str(self.port), "--webui-port", str(self.ui_port))
        self._wait(lambda s: True, "the master to start")
        for i in range(self.workers):
            self._spawn_worker(i)
        self._wait(lambda s: sum(w.get("state") == "ALIVE" for w in s.get("workers", [])) >= self.workers,
                   f"{self.workers} workers to register")
        return self

    def _spawn_worker(self, i: int) -> None:
        work = self.dir / f"worker-{i}"
        work.mkdir(exist_ok=True)
        self.worker_procs[i] = self._spawn(
            f"worker-{i}", "org.apache.spark.deploy.worker.Worker", self.url, "--host", "127.0.0.1",
            "--cores", str(self.cores), "--memory", self.memory, "--work-dir", str(work),
            "--webui-port", str(_free_port()))

    def add_worker(self) -> int:
        """Start one more worker (it registers, and a running application gets an executor on it); its index."""
        index = max(self.worker_procs) + 1
        self._spawn_worker(index)
        return index

    def stop_worker(self, index: int) -> None:
        """Stop worker ``index`` and the executors it launched (a worker leaving the cluster)."""
        proc = self.worker_procs.pop(index)
        try:
            os.killpg(proc.pid, 9)
        except ProcessLookupError:
            pass
        proc.wait()

    def status(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=2) as resp:
            return json.loads(resp.read())

    def _wait(self, ready: Any, what: str, timeout_s: float = 90.0) -> None:
        deadline = time.monotonic() + timeout_s
        last: Exception | None = None
        while time.monotonic() < deadline:
            try:
                if ready(self.status()):
                    return
            except (OSError, ValueError) as exc:   # not up yet, or a page served half-started
                last = exc
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"timed out waiting for {what} (see logs in {self.dir}): {last}")

    def executor_pids(self) -> list[int]:
        """Process ids of the executor JVMs the workers launched."""
        out = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
            except OSError:
                continue
            if b"CoarseGrainedExecutorBackend" not in cmd:
                continue
            try:
                cwd = os.readlink(entry / "cwd")  # a worker starts its executors in its work directory
            except OSError:
                continue
            if cwd.startswith(str(self.dir)):
                out.append(int(entry.name))
        return sorted(out)

    def stop(self) -> None:
        for proc in self.procs:
            try:
                os.killpg(proc.pid, 9)
            except ProcessLookupError:
                pass
        for proc in self.procs:
            proc.wait()
        self.procs.clear()

    def __enter__(self) -> "LocalCluster":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def cleanup(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


def run_suite(scenario_paths: list[str], workers: int = 2) -> dict[str, Any]:
    """Run scenarios on the engine on a fresh standalone cluster; judge each and compare with the reference."""
    from reference.compare import first_difference
    from reference.oracles import check_outcome, failures
    from reference.run import run_scenario
    from reference.scenario import load_scenario
    from spark_impl.engine import run_spark
    from spark_impl.session import session, stop

    report: dict[str, Any] = {"cases": []}
    with LocalCluster(workers=workers) as cluster:
        spark = session(cluster.url)
        report["master"] = cluster.url
        spark.sparkContext.parallelize(range(workers * 2), workers * 2).count()  # bring the executors up
        report["executors_before"] = cluster.executor_pids()
        try:
            for path in scenario_paths:
                scenario = load_scenario(path)
                work = Path(tempfile.mkdtemp(prefix="lightspeed-cluster-run-", dir=cluster.dir))
                started = time.time()
                membership = _follow_membership(cluster, scenario, work / "checkpoint")
                result = run_spark(scenario, master=cluster.url, workdir=work, pace=False)
                membership.join(timeout=5)
                outcome, spark_details = result.outcome, result.outcome.details["spark"]
                bad = failures(check_outcome(scenario, outcome, result.checkpoint))
                reference = run_scenario(scenario).outcome()
                report["cases"].append({
                    "scenario": scenario.name, "error": outcome.error,
                    "failed_oracles": [v.describe() for v in bad],
                    "difference": first_difference(reference, outcome, scenario.sink_mode),
                    "wall_s": round(time.time() - started, 2), "tasks": spark_details["tasks"],
                    "cache_hits": spark_details["cache_hits"], "executors": spark_details.get("executors"),
                    "moves": [m.to_dict() for m in outcome.moves],
                    "moved_partition_tasks": spark_details.get("moved_partition_tasks"),
                    "recoveries": [r.to_dict() for r in outcome.recoveries]})
            report["executors_after"] = cluster.executor_pids()
        finally:
            stop()
    report["ok"] = all(not c["error"] and not c["failed_oracles"] and c["difference"] is None
                       for c in report["cases"])
    return report


def _follow_membership(cluster: LocalCluster, scenario: Any, checkpoint: Path) -> threading.Thread:
    """Make the cluster follow the scenario's executor events while it runs: a worker joins once the batch
    before its event has committed (the engine waits for its executor before planning the batch), and the
    worker of an executor that leaves stops once the batch before the leave has committed (the placement
    has moved its partitions back by then). An executor joining is taken to get the next executor id."""
    from reference import layout

    def follow() -> None:
        joined: dict[str, int] = {}
        for event in scenario.events:
            entry = checkpoint / layout.commit_path(event.before_batch - 1)
            deadline = time.monotonic() + MEMBERSHIP_TIMEOUT_S
            while not entry.exists() and time.monotonic() < deadline:
                time.sleep(0.1)
            if event.kind == "executor_join":
                joined[event.executor] = cluster.add_worker()
            elif event.executor in joined:
                cluster.stop_worker(joined.pop(event.executor))

    thread = threading.Thread(target=follow, name="cluster-membership", daemon=True)
    thread.start()
    return thread


def main(argv: list[str] | None = None) -> int:
    return suite_main("the engine", run_suite, argv)


def suite_main(backend: str, run: Any, argv: list[str] | None = None, prog: str | None = None) -> int:
    """The command line of a suite on a fresh cluster: ``run(scenario paths, workers)`` gives its report."""
    import argparse
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Start a Spark standalone cluster on localhost (a master and N one-core workers), run "
                    f"scenarios on {backend} there, judge each with the reference oracles and compare it "
                    "with the reference. Prints a JSON report; exit 0 iff every case holds.")
    parser.add_argument("scenarios", nargs="+", help="scenario JSON files")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", help="also write the report here")
    args = parser.parse_args(argv)
    report = run(args.scenarios, args.workers)
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
