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
# Spark's real-time trigger: ``RealTimeTrigger$.apply()`` defaults to 5 minutes (what the mode then refuses of
# a section is the mode's, ``reference.protocol.modes``)
REAL_TIME_DEFAULT_BATCH_MS = 300_000


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
    # ``trigger_interval_ms`` each, offsets logged at the end of a batch (``modes/real_time.py``).
    real_time: bool = False
    # Beyond Spark, a modelled variant: persist the tasks' progress every this many ms within a real-time batch
    # (its offsets, with the state committed there), so that a restart replays at most what followed the last
    # persisted point instead of the whole batch. 0: Spark's real-time mode (progress at the batch's end only).
    real_time_progress_ms: int = 0

    @property
    def mode_name(self) -> str:
        """The execution mode this section names (``reference.protocol.modes``, whose ``mode_of`` is the one
        reader of this name): the only place that reads the mode flags."""
        if self.real_time:
            if self.real_time_progress_ms:
                return "bounded_replay"
            return "real_time_async" if self.progress_mode == "async" else "real_time"
        return "async_progress" if self.progress_mode == "async" else "micro_batch"

    @staticmethod
    def parse(o: FieldReader, *, stateful: bool = True) -> "EngineConfig":
        """The section, with Spark's defaults. Under a real-time trigger those depend on the query (``stateful``):
        a stateless real-time query tracks its progress asynchronously unless the section names a progress mode
        (``StreamingQueryManager.useAsyncProgressTracking``), and the checkpoint interval defaults to 0
        (``AsyncProgressTrackingMicroBatchExecution``); the batch lasts 5 minutes unless given."""
        progress, purge, store = o.obj("progress", {}), o.obj("log_purge", {}), o.obj("state_store", {})
        cfg = EngineConfig(
            progress_mode=progress.choice("mode", ("sync", "async"), "sync"),
            checkpoint_interval_ms=progress.int("checkpoint_interval_ms", 1000),
            log_purge_mode=purge.choice("mode", ("inline", "async"), "async"),
            min_batches_to_retain=purge.int("min_batches_to_retain", 100, minimum=1),
            provider=store.choice("provider", PROVIDERS, "changelog"),
            min_deltas_for_snapshot=store.int("min_deltas_for_snapshot", 10, minimum=1),
            maintenance_interval_ms=store.int("maintenance_interval_ms", 60000, minimum=1),
            state_checkpoint=o.choice("state_checkpoint", ("sync", "async"), "sync"),
            pipelining=o.bool("pipelining", False),
            trigger_interval_ms=o.int("trigger_interval_ms", 0),
            pipeline_depth=o.int("pipeline_depth", 2, minimum=2),
            batch_cuts=o.choice("batch_cuts", ("trigger", "fixed"), "trigger"),
            parallel_store_commit=o.bool("parallel_store_commit", False),
            real_time=o.bool("real_time", False),
            real_time_progress_ms=o.int("real_time_progress_ms", 0))
        if cfg.real_time and "trigger_interval_ms" not in o.raw:
            cfg = replace(cfg, trigger_interval_ms=REAL_TIME_DEFAULT_BATCH_MS)
        if cfg.real_time and "checkpoint_interval_ms" not in progress.raw:
            cfg = replace(cfg, checkpoint_interval_ms=0)
        if cfg.real_time and "mode" not in progress.raw and not stateful and not cfg.real_time_progress_ms:
            cfg = replace(cfg, progress_mode="async")
        for part in (progress, purge, store, o):
            part.done()
        if cfg.pipeline_depth != 2 and not cfg.pipelining:
            raise ScenarioError(o.at("pipeline_depth"), "a pipeline depth needs \"pipelining\": true")
        if cfg.real_time_progress_ms and not cfg.real_time:
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

