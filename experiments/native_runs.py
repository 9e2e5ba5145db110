"""What the experiments add to run on Spark's own Structured Streaming (``--backend spark-native``).

- Realtime points: a native point that measures latency runs with ``realtime``
  (``RunOptions.realtime``: the input appears as it arrives, Spark runs under its
  default trigger, a stateless query delivers through the stat sink); a point
  asks for it with ``extra["realtime"]`` (``experiments.measure.point_options``).
- The feed: the adapter hands Spark its input as files, one per ``FEED_MS`` of
  arrivals (the scenario's ``batch_ms``; the engine and the simulator cut their
  batches by trigger, so it changes nothing there). A record waits for its file
  about ``FEED_MS / 2`` on average, a cost the engine, which sees each record
  on arrival, does not pay.
- Spark's own ``durationMs``: the median of each key over a run's batches after
  the warm-up (``duration_medians``), on every backend alike, so native Spark's,
  the engine's and the simulator's breakdowns stand side by side.
- Checks that the storage profile is in Spark's path: the baseline's
  ``walCommit`` median is at least the profile's offset-log write (a create and
  a rename at their median cost), and under asynchronous progress tracking
  ``walCommit`` falls to near zero (``wal_checks``).
- A warm-up point: the first query of a process pays for the JVM's code paths
  warming up (its first batches take seconds); its result is not used.
- Stateful runs (``native_state_metrics``): commit latency from Spark's own
  state operator metrics, the bytes the state stores uploaded and kept on the
  latency filesystem, and a restart's time, for changelog-checkpointing.
"""

from __future__ import annotations

import statistics
from typing import Any, Sequence

from experiments.outcome_metrics import WARMUP_BATCHES
from experiments.experiment import Check, Point, RunContext
from experiments.stats import percentile
from reference.protocol.outcome import ProgressEvent
from reference.protocol.storage_profiles import storage_profile

NATIVE = "spark-native"
FEED_MS = 50                  # the native feed: one input file per 50 ms of arrivals
DURATION_KEYS = ("latestOffset", "queryPlanning", "walCommit", "addBatch", "commitOffsets", "triggerExecution")
NEAR_ZERO_MS = 5.0            # walCommit under asynchronous progress: it only queues the write
WARMUP_TASK = "warmup"


def native_scenario(raw: dict[str, Any]) -> dict[str, Any]:
    """``raw`` with every rate or explicit source fed to native Spark in files of ``FEED_MS`` of arrivals."""
    out = dict(raw)
    for key in ("source", "sources"):
        if key not in raw:
            continue
        sources = {"main": raw["source"]} if key == "source" else raw["sources"]
        fed = {side: (dict(src, batch_ms=FEED_MS) if src.get("kind") in ("rate", "explicit") else src)
               for side, src in sources.items()}
        out[key] = fed["main"] if key == "source" else fed
    return out


def realtime_extra(backend: str) -> dict[str, Any]:
    """A point's ``extra`` for a latency measurement on ``backend`` (native Spark runs realtime)."""
    return {"realtime": True} if backend == NATIVE else {}


def for_backend(backend: str, raw: dict[str, Any]) -> dict[str, Any]:
    """The scenario a latency point of ``backend`` runs: the native feed on native Spark, else ``raw``."""
    return native_scenario(raw) if backend == NATIVE else raw


def warmup_point(experiment: str, backend: str, scenario: dict[str, Any], seed: int) -> Point:
    """A throwaway first point (its measurement is not used)."""
    return Point(experiment, WARMUP_TASK, WARMUP_TASK, {}, seed, backend, for_backend(backend, scenario),
                 extra=realtime_extra(backend))


def is_warmup(record: dict[str, Any]) -> bool:
    return bool(record["point"]["task"] == WARMUP_TASK)


def duration_medians(progress: Sequence[ProgressEvent], skip: int = WARMUP_BATCHES) -> dict[str, float | None]:
    """The median of each of Spark's ``durationMs`` keys (``DURATION_KEYS``) over the batches after the
    warm-up (all of them when there are too few)."""
    entries = list(progress)
    entries = entries[skip:] if len(entries) > skip + 1 else entries
    out: dict[str, float | None] = {}
    for key in DURATION_KEYS:
        values = [float(p.duration_ms[key]) for p in entries if p.duration_ms.get(key) is not None]
        out[key] = statistics.median(values) if values else None
    return out


def offset_write_ms(profile: str) -> float:
    """The profile's offset-log write at its median cost: the create and the rename that publishes it."""
    p = storage_profile(profile)
    return p.small_write_ms + p.rename_ms


def wal_checks(rates: dict[str, Any], ctx: RunContext, storage: str | None, *, baseline: str,
               async_progress: Sequence[str], async_purge: Sequence[str]) -> list[Check]:
    """That the checkpoint's storage (``storage``, a profile name) is in Spark's path, and that asynchronous
    progress takes the offset write out of it. Only for native Spark on a storage profile. Per rate:

    - the baseline's walCommit median (over seeds, of each run's median) is at least the profile's offset write;
    - a configuration with asynchronous progress tracking (``async_progress``) has a walCommit below the offset
      write: Spark times ``markMicroBatchStart`` and the purge together as walCommit
      (``MicroBatchExecution.constructNextBatch``), and the asynchronous ``markMicroBatchStart`` only queues the
      write (``AsyncProgressTrackingMicroBatchExecution.asyncAddToOffsetLog``). Without asynchronous purge the
      purge's deletes stay in walCommit (``AsyncProgressTrackingMicroBatchExecution.purge`` runs on the query's
      thread), so only the write is gone;
    - with asynchronous purge as well (``async_purge``) walCommit is near zero.

    A backlogged row is not judged on walCommit: the writer thread's queue holds two writes, and a full queue
    blocks ``markMicroBatchStart`` until a write finishes (the executor's ``RejectedExecutionHandler`` waits on
    the queue), so a query behind its input pays the write again."""
    if ctx.backend != NATIVE or storage is None:
        return []
    floor = offset_write_ms(storage)
    out = []
    for rate, entry in rates.items():
        at = f"at {int(float(rate)):,} ev/s"
        wal = ((entry.get(baseline) or {}).get("durations_ms") or {}).get("walCommit")
        out.append(Check(f"baseline walCommit median >= the {storage} offset write {at}",
                         None if wal is None else wal >= floor,
                         "not measured" if wal is None else f"{wal:,.1f} ms against {floor:,.1f} ms"))
        for config in async_progress:
            row = entry.get(config) or {}
            wal = (row.get("durations_ms") or {}).get("walCommit")
            near_zero = config in async_purge
            name = (f"{config} walCommit median near zero {at}" if near_zero else
                    f"{config} walCommit median below the {storage} offset write {at}")
            bound = NEAR_ZERO_MS if near_zero else floor
            if wal is not None and row.get("backlogged"):
                out.append(Check(name, None, f"{wal:,.1f} ms, not judged: the run was backlogged, so its queued "
                                             "writes block the next one"))
                continue
            if wal is None:
                out.append(Check(name, None, "not measured"))
                continue
            ok = wal <= bound if near_zero else wal < bound
            out.append(Check(name, ok, f"{wal:,.1f} ms ({'at most' if near_zero else 'below'} {bound:,.0f} ms)"))
    return out


# ------------------------------------------------------------------ stateful runs (changelog-checkpointing)


# What the simulator's local_spark profile must say of native Spark before any fit, from Spark's design: a Spark
# executor's JVM keeps the state stores it loaded for every later task (the engine's Python workers each keep
# their own, hence the profile's misses), and the stat sink writes no file to the checkpoint.
NATIVE_PROFILE_FACTS: dict[str, Any] = {"state_cache_miss_probability": 0.0, "sink_part_files": 0}


def native_runs_engine(engine: dict[str, Any]) -> bool:
    """Whether open-source Spark has the engine modes of a scenario's ``engine`` block (no asynchronous state
    checkpointing, no pipelining; ``spark_impl.native.support``)."""
    return engine.get("state_checkpoint", "sync") != "async" and not engine.get("pipelining", False)


def crash_before(batch: int) -> dict[str, Any]:
    """A driver crash before batch ``batch`` is planned: native Spark stops at the boundary and restarts."""
    return {"at": {"step": "plan", "batch": batch, "when": "before"}, "kind": "driver_crash"}


def native_state_metrics(outcome: Any, partitions: int) -> dict[str, Any]:
    """What a native stateful run with one restart says of its state checkpoints.

    - ``commit_ms_*``: a task's state commit, from Spark's ``commitTimeMs`` (the sum over the batch's tasks,
      divided by ``partitions``), over the batches that did not load state (batch 0 and each incarnation's
      first are left out);
    - ``file_sync_ms_mean``: the part of it spent copying files to the checkpoint (RocksDB's
      ``rocksdbCommitFileSyncLatencyMs``, per task);
    - ``bytes_written``: what the state stores created on the checkpoint storage (the latency filesystem's
      count: changelogs, SST files, version zips), ``state_bytes_retained`` what ``state/`` holds at the end;
    - ``recovery_load_ms_mean``: the restarted query's first batch's ``addBatch`` (it loads every store from
      the checkpoint), ``restart_ms`` from the restarted query's start to that batch's end.
    """
    native = outcome.details["native"]
    extras = native.get("progress") or []
    commits, syncs = [], []
    first_of: dict[int, tuple[Any, dict[str, Any]]] = {}
    for event, extra in zip(outcome.progress, extras):
        life = int(extra.get("incarnation", 0))
        if life not in first_of:
            first_of[life] = (event, extra)
            continue
        if event.batch_id == 0:
            continue
        commits.append(sum(op.commit_time_ms for op in event.state_operators) / partitions)
        syncs.append(sum(float(m.get("rocksdbCommitFileSyncLatencyMs", 0) or 0)
                         for m in extra.get("customMetrics") or []) / partitions)
    restart_ms = load_ms = None
    lives = sorted(first_of)
    if len(lives) > 1:
        event, _extra = first_of[lives[1]]
        started_s = (native.get("timing_s") or {}).get(f"incarnation_{lives[1]}_started_s")
        load_ms = float(event.duration_ms.get("addBatch", 0))
        if started_s is not None and event.timestamp_ms is not None:
            restart_ms = event.timestamp_ms + float(event.duration_ms.get("triggerExecution", 0)) - started_s * 1000.0
    storage = native.get("storage") or {}
    created = [v for k, v in (storage.get("operations") or {}).items()
               if k.startswith("executor/state/") and k.endswith("/create")]
    return {"commit_ms_p50": percentile(commits, 50), "commit_ms_p99": percentile(commits, 99),
            "commit_ms_mean": statistics.fmean(commits) if commits else None,
            "file_sync_ms_mean": statistics.fmean(syncs) if syncs else None,
            "snapshot_ms_mean": None,
            # snapshot versions kept at the end (nothing is purged within minBatchesToRetain): RocksDB zips,
            # HDFS snapshot files
            "snapshot_uploads": sum(1 for f in outcome.checkpoint_files
                                    if f.startswith("state/") and f.endswith((".zip", ".snapshot"))),
            "bytes_written": sum(int(v["bytes"]) for v in created) if storage else None,
            "state_bytes_retained": (storage.get("checkpoint_bytes") or {}).get("state"),
            "recovery_load_ms_mean": load_ms, "restart_ms": restart_ms, "batches": len(outcome.batches)}
