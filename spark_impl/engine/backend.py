"""The PySpark engine behind the backend interface of ``reference.protocol.backend`` (``--backend spark``)."""

from __future__ import annotations

from reference.protocol.backend import RunOptions, RunResult, ScenarioRefused, refuse_too_large, refuse_unknown_options
from reference.language.scenario import Scenario
from reference.protocol.storage import SnapshotReader

from ..scratch import scratch_dir
from ..session import missing
from ..snapshot_reader import SNAPSHOT_FORMAT, read_manifest_snapshot
from .driver_process import run_spark_processes
from .run import BACKEND, WORKDIR_PREFIX, run_spark
from .storage_latency import StorageLatency

CRASH_MODES = ("in-process", "process")
# The engine runs each batch as Spark jobs of short tasks planned by the driver; real-time mode needs tasks that
# live for the whole batch and are fed records continuously through a streaming shuffle. Imitating it with
# micro-batches would measure the wrong thing, so the engine refuses it.
REAL_TIME_REFUSAL = ("the PySpark engine runs each batch as jobs of short tasks over a fixed input; real-time mode "
                     "needs long-running tasks fed continuously through a streaming shuffle "
                     "(RealTimeStreamScanExec), which it does not have, and a micro-batch imitation would not be "
                     "real-time mode: run real-time scenarios on the reference or the simulator")


class SparkEngineBackend:
    """The protocol's step graph executed on Spark: tasks on executors, state in RocksDB, timed.

    ``crash="process"`` kills the driver process at a ``driver_crash`` and
    restarts it (``driver_process.py``); the default drops the incarnation and
    restarts in the same process and SparkSession. ``storage_profile`` names a
    ``reference.protocol.storage_profiles`` profile whose latencies every checkpoint
    operation sleeps, on the driver and in the tasks, seeded by the scenario's
    seed (``storage_latency.py``); an unknown name is refused naming it.
    """

    name = BACKEND
    options: frozenset[str] = frozenset({"master", "workdir", "crash", "group", "straggler", "pace",
                                          "storage_profile"})
    timed = True
    snapshot_formats: dict[str, SnapshotReader] = {SNAPSHOT_FORMAT: read_manifest_snapshot}

    def unavailable(self) -> str | None:
        return missing("rocksdict")

    def run(self, scenario: Scenario, options: RunOptions = RunOptions()) -> RunResult:
        refuse_unknown_options(self, options)
        if scenario.engine.real_time:
            raise ScenarioRefused(self.name, "engine.real_time", REAL_TIME_REFUSAL)
        refuse_too_large(self.name, scenario)
        if options.crash not in CRASH_MODES:
            raise ValueError(f"crash mode {options.crash!r}: expected one of {', '.join(CRASH_MODES)}")
        latency = None if options.storage_profile is None else \
            StorageLatency(options.storage_profile, scenario.seed)
        if options.crash == "process":
            workdir = options.workdir or str(scratch_dir(WORKDIR_PREFIX))
            return run_spark_processes(scenario, workdir, master=options.master, pace=options.pace,
                                       group=options.group, straggler=options.straggler,
                                       storage_latency=latency)
        return run_spark(scenario, master=options.master, workdir=options.workdir, pace=options.pace,
                         straggler=options.straggler, group=options.group, storage_latency=latency)
