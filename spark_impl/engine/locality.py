"""Preferred locations: a partition's next task asks for the executor its last task ran on.

Executors keep each partition's state stores open between batches (``task.py``),
so a task that lands where its partition ran last finds version b-1 in memory;
anywhere else it reloads from the checkpoint directory. Spark's own stateful
operators get this from ``StateStoreRDD.getPreferredLocations``, which asks the
driver's state store coordinator where each store's provider is loaded.

PySpark's ``parallelize`` cannot carry locations, so a job's input RDD is built
on the JVM with ``SparkContext.makeRDD(Seq[(T, Seq[String])])``: one element
(the pickled partition number) per partition, each with its location. The
location names an executor (``executor_<host>_<id>``, Spark's
``ExecutorCacheTaskLocation``), so the task is process-local only there.

A scenario that names its executors (``executors``, ``events``: state
rebalancing, ``reference/protocol/rebalancing.py``) asks instead for the executor the
placement names. The scenario's names are not Spark's executor ids: Spark
numbers executors as they register and never reuses an id (an executor lost
and relaunched by its worker comes back under a new one), so the names are
bound to the executors that exist (``bind``): each name the batch's placement
uses keeps its Spark executor while that one is alive, else takes the live
executor with the lowest id that no other name of the batch holds; a name left
without one (none free) asks for no executor, and its partitions go where
Spark puts them. On a fresh cluster the binding is the identity ("0" on
executor 0, ...). Before an incarnation's first batch and before a batch that
an executor joins, the driver waits for a free executor for each name
(``await_bound``; a name for which none comes within the engine's join timeout
is noted in the outcome and runs unbound); the bindings are reported
(``bound``, the outcome's ``details["spark"]["bound_executors"]``).

Where tasks ran is read back from the driver's status store (the data behind
Spark's UI) after their job has ended. The store is filled by the listener bus,
asynchronously, so a job's placement is learnt at a later submission; until
then the partition keeps its earlier location. The reading is done at
submission (about 15 ms with 8 partitions on a busy 2-core machine, a few
py4j calls per task): a background reader was tried, and lost the race with
the next submission often enough that partitions alternated executors. A lost executor's location is
one Spark no longer honours (the executor is not alive), so the task runs
elsewhere and its stores reload from the checkpoint directory there.
"""

from __future__ import annotations

import pickle
import threading
import time
from typing import Any

LEARN_BACKLOG = 64   # job groups whose placement is still to be read (older ones are dropped)
JOIN_POLL_S = 0.2


class Placement:
    """Where each partition's task last succeeded, and input RDDs that ask Spark to run it there again."""

    def __init__(self, spark: Any):
        self.sc = spark.sparkContext
        self.last: dict[int, str] = {}      # partition -> executor location string
        self.executors: dict[int, list[str]] = {}   # partition -> executor ids it ran on, a new entry per move
        self.binding: dict[str, str] = {}   # the scenario's executor name -> the Spark executor id it runs on
        self.bound: dict[str, list[str]] = {}   # name -> every Spark executor id it was bound to, in order
        self._pending: list[str] = []
        self._lock = threading.Lock()

    # ---------------------------------------------------------------- jobs
    def rdd(self, parts: int, wanted: dict[int, str] | None = None) -> Any:
        """An RDD of ``parts`` partitions (element: the partition number), each preferring the live executor
        bound to the executor name ``wanted`` gives it (``bind``), else its last executor."""
        from pyspark.rdd import RDD
        from pyspark.serializers import CPickleSerializer
        self.learn()
        jvm = self.sc._jvm
        alive = self.alive_executors() if wanted else {}
        bound = self.bind(set((wanted or {}).values()), alive)
        with self._lock:
            where = [self.last.get(p) for p in range(parts)]
        for p, name in (wanted or {}).items():
            if name in bound:
                where[p] = f"executor_{alive[bound[name]]}_{bound[name]}"
        elements = [jvm.scala.Tuple2(bytearray(pickle.dumps(p)), self._seq([where[p]] if where[p] else []))
                    for p in range(parts)]
        scala_rdd = self.sc._jsc.sc().makeRDD(self._seq(elements), jvm.scala.reflect.ClassTag.AnyRef())
        return RDD(scala_rdd.toJavaRDD(), self.sc, CPickleSerializer())

    def alive_executors(self) -> dict[str, str]:
        """Executor id -> host of every live executor of the application (not the driver)."""
        found = {}
        executors = self.sc._jsc.sc().statusStore().executorList(True).iterator()
        while executors.hasNext():
            summary = executors.next()
            if summary.id() != "driver":
                found[str(summary.id())] = str(summary.hostPort()).rsplit(":", 1)[0]
        return found

    def bind(self, names: set[str], alive: dict[str, str]) -> dict[str, str]:
        """Bind each of ``names`` (the executors a batch's placement uses) to a live Spark executor: the one it
        has while alive, else the live one with the lowest id no other of ``names`` holds (taken from a name
        outside ``names`` if need be); a name left without one is unbound. Name -> Spark executor id."""
        held = {self.binding[n] for n in names if self.binding.get(n) in alive}
        for name in sorted(names):
            if self.binding.get(name) in alive:
                continue
            free = sorted((e for e in alive if e not in held), key=_id_order)
            if not free:
                self.binding.pop(name, None)
                continue
            for other in [n for n, e in self.binding.items() if e == free[0]]:
                del self.binding[other]   # a name outside this batch's placement gives its executor up
            self.binding[name] = free[0]
            held.add(free[0])
            self.bound.setdefault(name, []).append(free[0])
        bound = {n: self.binding[n] for n in names if n in self.binding}
        assert len(set(bound.values())) == len(bound), f"two names share an executor: {bound}"
        return bound

    def await_bound(self, names: set[str], timeout_s: float) -> set[str]:
        """Until each of ``names`` is bound to a live executor (one joining the cluster registers); the names
        still unbound after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while True:
            missing = names - set(self.bind(names, self.alive_executors()))
            if not missing or time.monotonic() > deadline:
                return missing
            time.sleep(JOIN_POLL_S)

    def ran(self, job_group: str) -> None:
        """The job group's jobs have ended: read where their tasks ran at the next chance."""
        with self._lock:
            self._pending.append(job_group)
            del self._pending[:-LEARN_BACKLOG]

    def learn(self) -> None:
        """Record the executor of every successful task of the ended job groups the status store has."""
        with self._lock:
            pending = list(self._pending)
        done = [group for group in pending if self._read(group)]
        with self._lock:
            self._pending = [g for g in self._pending if g not in done]

    def _read(self, job_group: str) -> bool:
        tracker = self.sc.statusTracker()
        jobs = tracker.getJobIdsForGroup(job_group)
        if not jobs:
            return False
        store = self.sc._jsc.sc().statusStore()
        found: dict[int, tuple[int, str, str]] = {}   # partition -> (launch order, location, executor id)
        for job_id in sorted(jobs):
            info = tracker.getJobInfo(job_id)
            if info is None or info.status == "RUNNING":
                return False
            for stage_id in info.stageIds:
                stage = tracker.getStageInfo(stage_id)
                attempt = stage.currentAttemptId if stage is not None else 0
                tasks = store.taskList(stage_id, attempt, 1 << 20).iterator()
                while tasks.hasNext():
                    task = tasks.next()
                    if task.status() != "SUCCESS":
                        continue
                    order = (job_id << 32) + int(task.taskId())
                    index = int(task.index())
                    if index not in found or found[index][0] < order:
                        found[index] = (order, f"executor_{task.host()}_{task.executorId()}", task.executorId())
        if not found:
            return False
        with self._lock:
            for index, (_order, location, executor) in found.items():
                self.last[index] = location
                seen = self.executors.setdefault(index, [])
                if not seen or seen[-1] != executor:
                    seen.append(executor)
        return True

    def _seq(self, items: list[Any]) -> Any:
        jvm = self.sc._jvm
        values = jvm.java.util.ArrayList()
        for item in items:
            values.add(item)
        return jvm.scala.jdk.javaapi.CollectionConverters.asScala(values).toSeq()


def _id_order(executor: str) -> tuple[int, str]:
    """Spark's executor ids in registration order: numerically (a standalone cluster's are 0, 1, ...)."""
    return (int(executor), "") if executor.isdigit() else (1 << 62, executor)
