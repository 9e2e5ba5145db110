"""Driver crashes as real process deaths (``--crash process``): one driver process per life, restarted when killed.

``run_spark_processes`` starts the driver as a child process (``python -m
spark_impl.engine.driver_process --child ...``). A ``driver_crash`` fault kills
that process with SIGKILL at its step (from the driver itself, or from the
executor running the task step); a new driver process then restarts the query
from the checkpoint directory alone, as a restarted Spark application would.
The lives are counted, and given up on, by ``reference.protocol.supervisor.Supervisor``;
each driver process plans its own restart from the checkpoint, so this parent
never reads the checkpoint while a driver may write it.

What an outside observer saw is journaled after every driver step
(``journal.py``), so the outcome survives the kill. Each fault fires once
across processes (``coord/faults/<index>`` markers).
"""

from __future__ import annotations

import argparse
import dataclasses
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from reference.protocol.backend import BackendUnavailable, RunResult
from reference.protocol.failures import DriverCrash
from reference.protocol.observer import Observer
from reference.protocol.outcome import Outcome
from reference.protocol.recovery import RestartPlan, fresh_plan
from reference.language.scenario import Scenario, load_scenario
from reference.protocol.sources import SourceData
from reference.protocol.storage import Storage
from reference.protocol.supervisor import Supervisor

from ..snapshot_reader import checkpoint_storage
from ..session import SparkUnavailable, session
from .context import EngineContext
from .journal import Journal
from .run import SparkRun, engine_outcome, run_details
from .storage_latency import StorageLatency, with_latency

OUTCOME = "outcome.json"
STDERR_TAIL_LINES = 15
EXIT_SPARK_UNAVAILABLE = 3   # a driver process could not start Spark


class DriverProcessFailed(RuntimeError):
    """A driver process ended other than by a SIGKILL or by finishing the run (a bug, or Spark did not start)."""


def _each_driver_plans_its_own(_storage: Storage, _mode: str, source_partitions: int) -> RestartPlan:
    """The parent's supervisor only counts lives: every driver process plans its restart from the checkpoint."""
    return fresh_plan(source_partitions)


def run_spark_processes(scenario: Scenario, workdir: str, *, master: str | None = None, pace: bool = True,
                        group: int = 1, straggler: tuple[float, float, int] | None = None,
                        storage_latency: StorageLatency | None = None) -> RunResult:
    """Run ``scenario`` with one driver process per life; the outcome lists how each driver process ended."""
    base = Path(workdir)
    base.mkdir(parents=True, exist_ok=True)
    scenario_path = base / "scenario.json"
    scenario_path.write_text(scenario.to_json())
    (base / OUTCOME).unlink(missing_ok=True)
    storage = checkpoint_storage(base / "checkpoint")
    supervisor = Supervisor(storage, scenario.engine.progress_mode, len(SourceData.of(scenario).partitions),
                            Observer(), plan_restart_fn=_each_driver_plans_its_own)
    processes: list[dict[str, Any]] = []
    for life, _restart in supervisor.lives():
        cmd = _child_command(scenario_path, base, life, master, pace, group, straggler, storage_latency)
        child = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if child.returncode == -signal.SIGKILL:
            processes.append({"life": life, "ended": "killed (SIGKILL)"})
            supervisor.ended(life, DriverCrash(f"driver process of life {life} was killed (SIGKILL)"))
            continue
        tail = "\n".join(child.stderr.strip().splitlines()[-STDERR_TAIL_LINES:])
        if child.returncode == EXIT_SPARK_UNAVAILABLE:
            raise BackendUnavailable("spark", tail)
        if child.returncode != 0 or not (base / OUTCOME).exists():
            raise DriverProcessFailed(f"driver process of life {life} failed with exit code {child.returncode}:\n"
                                      f"{tail}")
        processes.append({"life": life, "ended": "finished"})
        supervisor.ended(life, None)
    outcome = Outcome.from_json((base / OUTCOME).read_text()) if supervisor.error is None else \
        _journal_outcome(scenario, base, supervisor.error, master)
    spark = {**outcome.details.get("spark", {}), "crash": "process", "driver_processes": processes}
    return RunResult(dataclasses.replace(outcome, details={**outcome.details, "spark": spark}), storage)


def _child_command(scenario_path: Path, base: Path, life: int, master: str | None, pace: bool, group: int,
                   straggler: tuple[float, float, int] | None, storage_latency: StorageLatency | None = None
                   ) -> list[str]:
    cmd = [sys.executable, "-m", "spark_impl.engine.driver_process", "--child", str(scenario_path),
           "--workdir", str(base), "--life", str(life)]
    if master:
        cmd += ["--master", master]
    if not pace:
        cmd.append("--no-pace")
    if group != 1:
        cmd += ["--group", str(group)]
    if straggler is not None:
        cmd += ["--straggler", ",".join(str(x) for x in straggler)]
    if storage_latency is not None:
        cmd += ["--storage-profile", storage_latency.profile]   # seeded by the scenario's seed, as here
    return cmd


def _journal_outcome(scenario: Scenario, base: Path, error: str, master: str | None) -> Outcome:
    """The outcome when the parent gave up: what the journal kept of every life, with the give-up error."""
    saved = Journal(base).read()
    observer = saved.observer if saved else Observer()
    t0 = saved.t0 if saved else time.time()
    return engine_outcome(scenario, checkpoint_storage(base / "checkpoint"), observer, error, t0,
                          saved.deliveries if saved else [], {"master": master})


# ------------------------------------------------------------------ the child: one driver process
def child_main(args: argparse.Namespace) -> int:
    scenario = load_scenario(args.scenario)
    base = Path(args.workdir)
    try:
        spark = session(args.master, driver_log=base / f"driver-{args.life}.log")
    except SparkUnavailable as exc:
        print(exc, file=sys.stderr)
        return EXIT_SPARK_UNAVAILABLE
    engine = EngineContext(spark, str(base / "checkpoint"), str(base / "coord"),
                           str(base / "local"), kill_driver=True, pace=not args.no_pace, group=args.group,
                           straggler=_straggler(args.straggler),
                           storage_latency=StorageLatency(args.storage_profile, scenario.seed)
                           if args.storage_profile else None)
    journal = Journal(base)
    saved = journal.read()
    observer, first_life = Observer(), args.life
    if saved is not None:
        observer, engine.t0 = saved.observer, saved.t0
        engine.deliveries.extend(saved.deliveries)
        engine.task_log.extend(saved.task_log)
        first_life = max(first_life, saved.life + 1)   # a life restarted in-process before the kill counts too
    storage = checkpoint_storage(base / "checkpoint")
    engine.driver_storage = with_latency(storage, engine.storage_latency, "driver")
    run = SparkRun(scenario, engine, engine.driver_storage, first_life=first_life, observer=observer)
    engine.on_step = lambda _step: journal.write(run.observer, engine.t0, engine.deliveries, engine.task_log,
                                                 run.life)
    started = time.time()
    error = run.finish()
    outcome = engine_outcome(scenario, storage, run.observer, error, engine.t0, engine.deliveries,
                             run_details(scenario, engine, time.time() - started))
    (base / OUTCOME).write_text(outcome.to_json())
    return 0


def _straggler(text: str | None) -> tuple[float, float, int] | None:
    if not text:
        return None
    probability, extra_ms, seed = text.split(",")
    return float(probability), float(extra_ms), int(float(seed))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="A driver process of the Spark engine (started by "
                                                 "run_spark_processes; one per life of the query).")
    parser.add_argument("--child", dest="scenario", required=True, help="scenario JSON")
    parser.add_argument("--workdir", required=True, help="holds checkpoint/, coord/, local/ and the journal")
    parser.add_argument("--life", type=int, default=0, help="the number of this driver process's first life")
    parser.add_argument("--master", help="Spark master (default local[2])")
    parser.add_argument("--no-pace", action="store_true", help="plan batches without waiting for their input")
    parser.add_argument("--group", type=int, default=1, help="batches per Spark job (group scheduling)")
    parser.add_argument("--straggler", help="probability,extra_ms,seed of a synthetic slow task")
    parser.add_argument("--storage-profile", help="checkpoint storage latency profile (local_disk, hdfs, "
                                                  "object_store)")
    return child_main(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
