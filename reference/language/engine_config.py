"""The scenario's ``engine`` section (spec sections 1 and 2): which of the protocol's modes a run uses.

Progress tracking (sync or async, with its checkpoint interval), log purge,
the state store provider and its snapshot cadence, state checkpointing (sync
or async), pipelining, the trigger, where timed backends cut batches, and
parallel store commit, and Spark's real-time mode (``real_time``, with
``trigger_interval_ms`` its batch duration). The section keeps the spec's name, ``engine``; in the
code, "the engine" is the PySpark engine (``spark_impl/engine``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from .field_reader import FieldReader, ScenarioError

PROVIDERS = ("changelog", "delta", "snapshot")
# Spark's real-time trigger: ``RealTimeTrigger$.apply()`` defaults to 5 minutes, and
# ``spark.sql.streaming.realTimeMode.minBatchDuration`` (SQLConf, default 5000 ms) is the shortest batch
# ``StreamingQueryManager.createQuery`` accepts.
REAL_TIME_DEFAULT_BATCH_MS = 300_000
REAL_TIME_MIN_BATCH_MS = 5_000
REAL_TIME_MIN_PROGRESS_MS = 100   # the bounded-replay variant's shortest persistence interval (the model's limit)


@dataclass(frozen=True)
class EngineConfig:
    progress_mode: str = "sync"
    checkpoint_interval_ms: int = 1000
    log_purge_mode: str = "async"   # Spark's default since 3.4 (spark.sql.streaming.asyncLogPurge.enabled)
    min_batches_to_retain: int = 100
    provider: str = "changelog"
    min_deltas_for_snapshot: int = 10
    maintenance_interval_ms: int = 60000
    state_checkpoint: str = "sync"
    pipelining: bool = False
    trigger_interval_ms: int = 0
    # How many batches may be planned and not yet committed under pipelining: batch b is planned only
    # once batch b - pipeline_depth has committed. An extension of spec section 2, which leaves the
    # depth open; 2 (the default) is the protocol the spec's examples assume.
    pipeline_depth: int = 2
    # Where timed backends cut explicit and rate sources (spec section 1, triggers): "trigger" plans each
    # batch by Spark's trigger on the backend's own clock, with everything that has arrived by then;
    # "fixed" cuts every batch_ms of arrival time on every backend, for deterministic differential tests.
    # Generated sources always have fixed-size batches; the untimed reference always cuts on its clock.
    batch_cuts: str = "trigger"
    # Commit a partition's state stores (a join's two sides) concurrently, as Lightspeed does, instead of
    # one after the other within the task, as Spark OSS does. Nothing to do for a one-store query.
    parallel_store_commit: bool = False
    # Spark's real-time mode (4.1+, ``trigger(realTime=...)``): long-running batches of
    # ``trigger_interval_ms`` each, offsets logged at the end of a batch (``real_time.py``).
    real_time: bool = False
    # Beyond Spark, a modelled variant: persist the tasks' progress every this many ms within a real-time batch
    # (its offsets, with the state committed there), so that a restart replays at most what followed the last
    # persisted point instead of the whole batch. 0: Spark's real-time mode (progress at the batch's end only).
    real_time_progress_ms: int = 0

    @property
    def real_time_step_ms(self) -> int:
        """Real-time mode: the arrival time one step-graph batch covers, the interval at which progress is
        persisted (the batch duration, unless the bounded-replay variant persists it more often)."""
        return self.real_time_progress_ms or self.trigger_interval_ms

    @property
    def real_time_steps_per_batch(self) -> int:
        """How many persisted progress points a real-time batch holds (1 in Spark's real-time mode)."""
        return max(1, self.trigger_interval_ms // self.real_time_step_ms)

    @property
    def restart_mode(self) -> str:
        """How a restart reads the logs (``recovery.plan_restart``): the progress mode, or real-time mode's
        rule (an offset entry without its commit entry is purged)."""
        return "real_time" if self.real_time else self.progress_mode

    @staticmethod
    def parse(o: FieldReader) -> "EngineConfig":
        progress, purge, store = o.obj("progress", {}), o.obj("log_purge", {}), o.obj("state_store", {})
        cfg = EngineConfig(
            progress.choice("mode", ("sync", "async"), "sync"), progress.int("checkpoint_interval_ms", 1000),
            purge.choice("mode", ("inline", "async"), "async"), purge.int("min_batches_to_retain", 100, minimum=1),
            store.choice("provider", PROVIDERS, "changelog"), store.int("min_deltas_for_snapshot", 10, minimum=1),
            store.int("maintenance_interval_ms", 60000, minimum=1),
            o.choice("state_checkpoint", ("sync", "async"), "sync"), o.bool("pipelining", False),
            o.int("trigger_interval_ms", 0), o.int("pipeline_depth", 2, minimum=2),
            o.choice("batch_cuts", ("trigger", "fixed"), "trigger"), o.bool("parallel_store_commit", False),
            o.bool("real_time", False), o.int("real_time_progress_ms", 0))
        if cfg.real_time and "trigger_interval_ms" not in o.raw:
            cfg = replace(cfg, trigger_interval_ms=REAL_TIME_DEFAULT_BATCH_MS)
        for part in (progress, purge, store, o):
            part.done()
        if cfg.pipeline_depth != 2 and not cfg.pipelining:
            raise ScenarioError(o.at("pipeline_depth"), "a pipeline depth needs \"pipelining\": true")
        if cfg.real_time:
            check_real_time_engine(cfg, o)
        elif cfg.real_time_progress_ms:
            raise ScenarioError(o.at("real_time_progress_ms"), "persisting progress within a batch is a variant of "
                                                               "real-time mode: it needs \"real_time\": true")
        return cfg

    def to_dict(self) -> dict[str, Any]:
        return {"progress": {"mode": self.progress_mode, "checkpoint_interval_ms": self.checkpoint_interval_ms},
                "log_purge": {"mode": self.log_purge_mode, "min_batches_to_retain": self.min_batches_to_retain},
                "state_store": {"provider": self.provider, "min_deltas_for_snapshot": self.min_deltas_for_snapshot,
                                "maintenance_interval_ms": self.maintenance_interval_ms},
                "state_checkpoint": self.state_checkpoint, "pipelining": self.pipelining,
                "trigger_interval_ms": self.trigger_interval_ms,
                **({"pipeline_depth": self.pipeline_depth} if self.pipeline_depth != 2 else {}),
                **({"batch_cuts": self.batch_cuts} if self.batch_cuts != "trigger" else {}),
                **({"parallel_store_commit": True} if self.parallel_store_commit else {}),
                **({"real_time": True} if self.real_time else {}),
                **({"real_time_progress_ms": self.real_time_progress_ms} if self.real_time_progress_ms else {})}


def check_real_time_engine(cfg: EngineConfig, o: FieldReader) -> None:
    """Refuse an engine section real-time mode cannot run, naming Spark's rule (the query's operators, sources
    and sink are checked with the whole scenario, ``real_time_rules.py``)."""
    if cfg.trigger_interval_ms < REAL_TIME_MIN_BATCH_MS:
        raise ScenarioError(o.at("trigger_interval_ms"),
                            f"the real-time trigger interval is {cfg.trigger_interval_ms} ms, less than the "
                            f"{REAL_TIME_MIN_BATCH_MS} ms minimum (Spark: INVALID_STREAMING_REAL_TIME_MODE_TRIGGER_"
                            "INTERVAL, spark.sql.streaming.realTimeMode.minBatchDuration)")
    if cfg.pipelining:
        raise ScenarioError(o.at("pipelining"),
                            "real-time mode runs one long-running batch at a time: MicroBatchExecution plans "
                            "batch N+1 only after markMicroBatchEnd of batch N, so it cannot be pipelined")
    if cfg.progress_mode != "sync":
        raise ScenarioError(o.at("progress.mode"),
                            "real-time mode is modelled with synchronous offset and commit logs, as Spark 4.3 runs "
                            "every stateful real-time query (StreamingQueryManager.useAsyncProgressTracking); "
                            "asynchronous progress at interval 0, Spark's default for stateless real-time "
                            "queries, is not modelled")
    if cfg.state_checkpoint != "sync":
        raise ScenarioError(o.at("state_checkpoint"),
                            "real-time mode commits state when each long-running task ends "
                            "(StatefulStreamlineAggregateExec's CompletionIterator calls StateStore.commit), "
                            "before the driver writes the logs; asynchronous state checkpointing is not part of it")
    if cfg.provider == "delta":
        raise ScenarioError(o.at("state_store.provider"),
                            "real-time mode needs the RocksDB state store provider (Spark: STREAMING_REAL_TIME_MODE."
                            "SQL_CONFIGURATION_NOT_SUPPORTED, StreamingQueryManager."
                            "throwIfConfsAreRealTimeModeIncompatible); use changelog or snapshot")
    progress = cfg.real_time_progress_ms
    if progress and progress < REAL_TIME_MIN_PROGRESS_MS:
        raise ScenarioError(o.at("real_time_progress_ms"), f"the bounded-replay variant persists progress at most "
                                                           f"every {REAL_TIME_MIN_PROGRESS_MS} ms; got {progress}")
    if progress and cfg.trigger_interval_ms % progress:
        raise ScenarioError(o.at("real_time_progress_ms"), f"{progress} ms does not divide the batch duration "
                                                           f"{cfg.trigger_interval_ms} ms: a batch holds a whole "
                                                           "number of persisted progress points")
    if cfg.parallel_store_commit:
        raise ScenarioError(o.at("parallel_store_commit"),
                            "parallel store commit is for queries with two stores per partition (joins), which "
                            "real-time mode refuses")
