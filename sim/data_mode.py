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
import simpy

from reference.protocol.environment import Parts, Records
from reference.protocol.outcome import ProgressEvent
from reference.protocol.progress import UntimedProgress
from reference.protocol.query import route
from reference.protocol.records import BatchBook, QueryFacts, TaskTable
from reference.protocol.seams import Clock, StepNode
from reference.protocol.state_store import plan_load
from reference.protocol.task_effects import InProcessTaskEffects

from .cost_model import Profile, store_commits_ms
from .latency import RecordLatency
from .mode_costs import MicroBatchCosts
from .random_draws import Draws
from .storage_service import StorageService
from .timed_incarnation import SimClock, SimCosts, StepTimes, TimedIncarnation, TimedProgress

MISS_STREAM = 7   # the seed component of a task's state-cache draw (``state_cache_miss_probability``)


class DataIncarnation(TimedIncarnation):
    """One incarnation in data mode."""

    def __init__(self, *args: Any, latency_book: RecordLatency, **kwargs: Any):
        self.latency_book = latency_book
        super().__init__(*args, **kwargs)

    def sim_parts(self, records: Records) -> Parts:
        """SimPy's clock cutting as the reference does, the reference's task effects, timed progress, and the
        costs of real records' steps."""
        r = records
        clock = SimClock(r.facts, r.book, self.clock)
        effects = InProcessTaskEffects(r.facts, r.book, r.table, r.watermarks, r.store_class)
        self.costs = DataCosts(r.facts, r.book, r.table, clock, self.times, self.profile, self.service, self.clock,
                               self.mode_costs, effects, self.rng, self.latency_book)
        return Parts(clock, effects, DataProgress(r.facts, r.book, r.table, self.times, self.profile, self.clock,
                                                  self.latency_book), self.costs)

    # ----------------------------------------------------------- batches
    def has_batch(self, b: int) -> bool:
        return b in self.plans

    def plan_ready_ms(self, b: int) -> float:
        """When the mode lets the batch plan (``mode_costs``): at the first trigger that finds the batch's
        (fixed) input arrived; in real-time mode as soon as the last batch committed."""
        plan = self.plans[b]
        return self.mode_costs.plan_ready_ms(self.clock.now,
                                             lambda: self.trigger_ms(float(self.data.input_ready_ms(*plan.bounds))))


class DataProgress(TimedProgress):
    """Data mode's progress: the reference's event with the simulated durations; a batch's records' latencies
    end when its output becomes visible (if this is their first delivery)."""

    def __init__(self, facts: QueryFacts, book: BatchBook, table: TaskTable, times: StepTimes, profile: Profile,
                 env: simpy.Environment, latency_book: RecordLatency):
        super().__init__(facts, times, profile, env)
        self.untimed = UntimedProgress(facts, book, table)
        self.data, self.plans, self.latency_book = facts.data, book.plans, latency_book

    def event(self, b: int) -> ProgressEvent:
        return self.untimed.progress_event(b)

    def output_visible(self, b: int) -> None:
        plan = self.plans[b]
        self.latency_book.delivered(((r.source_partition, r.offset, r.arrival_ms)
                                     for r in self.data.slice(*plan.bounds)), self.env.now)


class DataCosts(SimCosts):
    """Data mode's step costs: a task step's cost from the sizes the reference's steps really read and write."""

    def __init__(self, facts: QueryFacts, book: BatchBook, table: TaskTable, clock: Clock, times: StepTimes,
                 profile: Profile, service: StorageService, env: simpy.Environment, mode_costs: MicroBatchCosts,
                 effects: InProcessTaskEffects, rng: Draws, latency_book: RecordLatency):
        super().__init__(facts, book, clock, times, profile, service, env, mode_costs)
        self.effects, self.rng, self.latency_book = effects, rng, latency_book
        self.data, self.plans, self.parts, self.number = facts.data, book.plans, facts.parts, facts.number
        self.store_ids, self.storage = facts.store_ids, facts.storage
        self.tasks, self.stores, self.lineage = table.tasks, table.stores, table.lineage
        # (store, partition) -> the keys changed since its last snapshot (what a RocksDB snapshot uploads)
        self.changed_since_snapshot: dict[tuple[str, int], set[str]] = {}

    def task_cost_ms(self, node: StepNode) -> float:
        step, b, p = node.step, node.batch, node.partition
        prof, svc = self.profile, self.service
        if step == "state_load":
            return self._state_load_ms(b, p)
        if step == "task_apply" and self.mode_costs.long_running():
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
        if self.mode_costs.long_running():
            return 0.0   # each record was delivered while the task ran (``_long_running_task_ms``)
        result = self.tasks[(b, p)].result
        rows = len(result.output) if result else 0
        return self.sink_write_ms(rows * prof.bytes_per_output_row)

    def _long_running_task_ms(self, b: int, p: int) -> float:
        """A long-running task (real-time mode, ``mode_costs``): it reads partition p's records of batch b as
        they arrive and delivers each to the sink on its own, where its latency ends."""
        records = sorted(route(self.data.slice(*self.plans[b].bounds), self.parts)[p], key=lambda r: r.arrival_ms)

        def delivered(i: int, visible_ms: float) -> None:
            record = records[i]
            self.latency_book.delivered([(record.source_partition, record.offset, record.arrival_ms)], visible_ms)
        return self.mode_costs.task_apply_ms([r.arrival_ms for r in records], self.env.now, b, self.profile,
                                             bool(self.store_ids), self.profile.straggler_factor(self.rng),
                                             delivered)

    def _state_load_ms(self, b: int, p: int) -> float:
        prof, svc = self.profile, self.service
        total = 0.0
        missed = b > 0 and prof.state_cache_miss_probability > 0 and prof.state_cache_missed(
            float(np.random.default_rng([self.sc.seed, self.number, b, p, MISS_STREAM]).random()))
        for sid in self.store_ids:
            uid = self.lineage.get((sid, p, b))
            if b == 0 or (self.effects.cached_store(b, p, sid) is not None and not missed):
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
