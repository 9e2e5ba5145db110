"""The protocol of spec section 2 on a real Spark cluster through PySpark (``--backend spark``).

``backend.SparkEngineBackend`` is the backend (``reference.protocol.backend.Backend``);
``run.run_spark`` runs a scenario to the end of its input through every fault
and restart and returns a ``RunResult`` (the typed outcome and the checkpoint
storage). The reference's incarnation is executed for real:

- ``run.py``: the restart loop (``reference.protocol.supervisor.Supervisor``) and the outcome;
- ``incarnation.py``: ``SparkIncarnation``, the step effects as they happen on Spark;
- ``scheduler.py``: ``StepScheduler``, which runs the step graph concurrently;
- ``jobs.py`` and ``group_scheduling.py``: a batch's task steps as a Spark job, or G batches per job;
- ``async_state_watch.py``: the background state commits the driver waits for;
- ``driver_faults.py`` and ``task_faults.py``: the fault substrate on the driver and on the executors;
- ``task.py``, ``task_spec.py`` and ``store_cache.py``: the task body, what it is given, the open stores;
- ``coordination.py``: every file the driver and the tasks exchange;
- ``progress.py``, ``latency.py``: progress events and end-to-end latency to first visibility;
- ``driver_process.py`` and ``journal.py``: driver crashes as SIGKILLed processes (``crash="process"``);
- ``locality.py``: preferred locations; ``checkpoint_lock.py``: one live query per checkpoint;
  ``context.py``: what outlives an incarnation in a driver process; ``speed.py``: speed measurements.

State lives in the RocksDB store of ``spark_impl.state_store`` on the
executors, and the checkpoint directory is a path every worker can reach.
A driver crash has two forms:

- ``crash="process"``: the driver process is killed with SIGKILL at the step,
  and a new driver process restarts the query from the checkpoint directory.
- ``crash="in-process"`` (the default, and what the test matrix uses, since
  each new driver process pays Spark's start-up again): the incarnation's
  driver state, executor caches and jobs are dropped and the next
  incarnation restarts from the checkpoint directory alone, in the same
  process and SparkSession.

Imports ``reference``, ``spark_impl.state_store``, ``spark_impl.session`` and
pyspark; never ``sim`` or ``experiments``.
"""

from __future__ import annotations

from .checkpoint_lock import QueryInUse, acquire_checkpoint
from .context import EngineContext
from .progress import CollectingListener, StreamingListener
from .run import SparkRun, run_spark

__all__ = ["CollectingListener", "EngineContext", "QueryInUse", "SparkRun", "StreamingListener",
           "acquire_checkpoint", "run_spark"]
