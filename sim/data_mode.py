"""Data mode: the real operator semantics on real records, real checkpoint files (spec sections 2-4).

Batch boundaries are the reference's (``SourceData.planned_end_offsets``), so
an outcome can be compared with the reference's batch for batch; the clock
decides only *when* a batch is planned: once its input has arrived
(``SourceData.input_ready_ms``, the rule every timed backend uses) and the
trigger interval has passed (real-time mode: its long-running tasks deliver
each record as it arrives, ``real_time.py``). Step effects are the reference's step
functions, over a ``reference.protocol.storage.DurableStorage``, so the checkpoint is
the reference's format byte for byte. Costs come from the sizes those steps
really read and write.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from reference.protocol.outcome import ProgressEvent
from reference.protocol.query import route
from reference.protocol.real_time import deadline_ms
from reference.protocol.seams import StepNode
from reference.protocol.state_store import plan_load

from .cost_model import store_commits_ms
from .latency import RecordLatency
from .real_time import long_running_task
from .timed_incarnation import TimedIncarnation

MISS_STREAM = 7   # the seed component of a task's state-cache draw (``state_cache_miss_probability``)


class DataIncarnation(TimedIncarnation):
    """One incarnation in data mode."""

    def __init__(self, *args: Any, latency_book: RecordLatency, **kwargs: Any):
        self.latency_book = latency_book
        # (store, partition) -> the keys changed since its last snapshot (what a RocksDB snapshot uploads)
        self.changed_since_snapshot: dict[tuple[str, int], set[str]] = {}
        super().__init__(*args, **kwargs)

    # ----------------------------------------------------------- batches
    def has_batch(self, b: int) -> bool:
        return b in self.plans

    def plan_ready_ms(self, b: int) -> float:
        """Plan at the first trigger that finds the batch's (fixed) input arrived. Real-time mode plans the
        next long-running batch as soon as the last one committed (Spark runs it with
        ``ProcessingTimeTrigger(0)``): its tasks read records as they arrive."""
        if self.cfg.real_time:
            return self.clock.now
        plan = self.plans[b]
        return self.trigger_ms(float(self.data.input_ready_ms(*plan.bounds)))

    # ------------------------------------------------------------- costs
    def cost_ms(self, node: StepNode) -> float:
        """The driver's and the tasks' costs; in real-time mode's bounded-replay variant a persisted progress
        point inside a batch is no new plan (the long-running tasks go on), so it costs nothing."""
        if node.step == "plan" and self.cfg.real_time and node.batch != self.restart.first_batch and \
                node.batch % self.cfg.real_time_steps_per_batch:
            return 0.0
        return super().cost_ms(node)

    def task_cost_ms(self, node: StepNode) -> float:
        step, b, p = node.step, node.batch, node.partition
        prof, svc = self.profile, self.service
        if step == "state_load":
            return self._state_load_ms(b, p)
        if step == "task_apply" and self.cfg.real_time:
            return self._long_running_task_ms(b, p)
        if step == "task_apply":
            plan = self.plans[b]
            records = len(route(self.data.slice(*plan.bounds), self.parts)[p])
            return prof.task_apply_ms(records, prof.straggler_factor(self.rng))
        parallel = self.cfg.parallel_store_commit
        if step == "changelog_write":
            sealed = self.tasks[(b, p)].sealed.values()
            for sid, s in self.tasks[(b, p)].sealed.items():
                self.changed_since_snapshot.setdefault((sid, p), set()).update(key for key, _value in s.changes)
            # the checkpoint's files are the reference's (a snapshot provider's holds the whole state); the cost
            # is what Spark uploads (``Profile.commit_files_bytes``)
            return svc.store_files_ms([prof.commit_files_bytes(self.cfg.provider, len(s.changes)) for s in sealed],
                                      parallel)
        if step == "state_commit":
            return store_commits_ms([prof.state_commit_ms(len(sealed.changes), len(self.stores[(sid, p)].data))
                                     for sid, sealed in self.tasks[(b, p)].sealed.items()
                                     if (sid, p) in self.stores], parallel)
        if step == "snapshot_upload":
            return self._snapshot_ms(p)
        assert step == "sink_write", f"no cost for task step {step}"
        if self.cfg.real_time:
            return 0.0   # each record was delivered while the task ran (``_long_running_task_ms``)
        result = self.tasks[(b, p)].result
        rows = len(result.output) if result else 0
        return self.sink_write_ms(rows * prof.bytes_per_output_row)

    def _long_running_task_ms(self, b: int, p: int) -> float:
        """Real-time mode: the task reads partition p's records of batch b as they arrive, delivers each to
        the sink on its own (its latency ends there), and stops at the batch's deadline (``real_time.py``)."""
        now = self.clock.now
        records = sorted(route(self.data.slice(*self.plans[b].bounds), self.parts)[p], key=lambda r: r.arrival_ms)
        task = long_running_task([r.arrival_ms for r in records], now,
                                 deadline_ms(b, self.cfg.real_time_step_ms), self.profile, bool(self.store_ids))
        for record, visible_ms in zip(records, task.delivered_ms):
            self.latency_book.delivered([(record.source_partition, record.offset, record.arrival_ms)], visible_ms)
        return task.end_ms - now

    def _state_load_ms(self, b: int, p: int) -> float:
        prof, svc = self.profile, self.service
        total = 0.0
        missed = b > 0 and prof.state_cache_miss_probability > 0 and prof.state_cache_missed(
            float(np.random.default_rng([self.sc.seed, self.number, b, p, MISS_STREAM]).random()))
        for sid in self.store_ids:
            uid = self.lineage.get((sid, p, b))
            if b == 0 or (self.cached_store(b, p, sid) is not None and not missed):
                total += prof.state_load_cached_ms
                continue
            try:
                plan = plan_load(self.storage, sid, p, b, uid)
            except Exception:  # the load itself will fail loudly; charge one listing
                total += svc.list_ms(stream="executor")
                continue
            files = ([plan.base_file] if plan.base_file else []) + list(plan.replayed)
            size = sum(len(self.storage.read(f)) for f in files if self.storage.exists(f))
            total += prof.state_open_ms + svc.list_ms(stream="executor") + sum(svc.read_ms(0) for _ in files) \
                + svc.transfer_ms(size) \
                + prof.state_replay_ms(int(size / max(prof.bytes_per_state_key, 1.0)))
        return total

    def _snapshot_ms(self, p: int) -> float:
        total = 0.0
        for sid in self.store_ids:
            store = self.stores.get((sid, p))
            pending = store.pending_snapshot if store is not None else None
            if pending is not None and pending.version in store.durable_versions:  # type: ignore[union-attr]
                changed = self.changed_since_snapshot.pop((sid, p), set())
                keys = self.profile.snapshot_upload_keys(self.cfg.provider, len(pending.snapshot or ()), len(changed))
                total += self.profile.snapshot_ms(keys) + \
                    self.service.state_writes_ms([keys * self.profile.bytes_per_state_key], False)
        return total

    # ------------------------------------------------------- observations
    def output_visible(self, b: int) -> None:
        """The batch's output becomes visible: its records' latencies may end here (if this is their first)."""
        plan = self.plans[b]
        self.latency_book.delivered(((r.source_partition, r.offset, r.arrival_ms)
                                     for r in self.data.slice(*plan.bounds)), self.clock.now)

    def progress_event(self, b: int) -> ProgressEvent:
        return self.timed_progress(b, super().progress_event(b))

