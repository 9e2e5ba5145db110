"""Volume mode: record counts and key cardinalities instead of records (cluster-scale experiments).

The protocol is the same as in data mode (the reference's step graph, its
driver steps, its offset and commit log entries written to the storage, its
restart planning); only the payload differs:

- a batch ends where the clock says: ``plan`` takes every record that has
  arrived when it starts (``rate`` and ``generated`` sources);
- a task carries counts: records routed to its state partition (an even
  split, as a uniform hash gives), keys touched, keys in the store;
- keys follow the balls-into-bins expectation: ``n`` records over ``K`` keys
  touch ``K * (1 - (1 - 1/K) ** n)`` distinct keys; the store holds the keys
  touched by all records so far (aggregate-like state for every stateful
  operator; ``map`` keeps none and emits every record);
- state files are not written (their cost is charged), so a restart loads
  state at the cost of replaying every key.
"""

from __future__ import annotations

import math
from typing import Any

from reference.engine import BatchPlan, NodeId
from reference.logs import check_metadata, purge_logs, write_metadata
from reference.query import initial_trackers
from reference.scenario import Scenario
from reference import layout

from .engine import TimedIncarnation
from .latency import Segment


class VolumeSource:
    """Counts and arrival times of every source partition, without materialising records."""

    def __init__(self, scenario: Scenario):
        self.scenario = scenario
        self.partitions: list[tuple[str, int, int]] = []   # (side, index within the side, total records)
        for side in sorted(scenario.sources):
            src = scenario.sources[side]
            if src.kind == "explicit":
                raise ValueError(f"sources.{side}.kind: volume mode needs a rate or generated source")
            for p in range(src.partitions):
                if src.kind == "rate":
                    total = int(src.rows_per_second * src.duration_s) // src.partitions
                else:
                    total = src.records_per_partition_per_batch * src.batches
                self.partitions.append((side, p, total))
        self.keys = sum(scenario.sources[side].keys for side in scenario.sources)

    @property
    def totals(self) -> list[int]:
        return [total for _s, _p, total in self.partitions]

    def arrival_ms(self, sp: int, offset: int) -> float:
        """When record ``offset`` of source partition ``sp`` is created (as ``reference.sources``)."""
        side, p, _total = self.partitions[sp]
        src = self.scenario.sources[side]
        if src.kind == "rate":
            return float(int(offset * 1000.0 * src.partitions / src.rows_per_second))
        et = src.event_time
        return float(et.start_ms + (offset * src.partitions + p) * et.step_ms)

    def arrived(self, sp: int, now_ms: float) -> int:
        """How many records of ``sp`` exist at ``now_ms``."""
        side, p, total = self.partitions[sp]
        src = self.scenario.sources[side]
        if src.kind == "rate":
            gap_ms = 1000.0 * src.partitions / src.rows_per_second
            count = math.floor(now_ms / gap_ms) + 1
        else:
            et = src.event_time
            if et.step_ms == 0:
                return total if now_ms >= et.start_ms else 0
            count = math.floor((now_ms - et.start_ms - p * et.step_ms) / (src.partitions * et.step_ms)) + 1
        count = max(0, min(total, count))
        while count < total and self.arrival_ms(sp, count) <= now_ms:   # int() rounding at the edge
            count += 1
        while count > 0 and self.arrival_ms(sp, count - 1) > now_ms:
            count -= 1
        return count


class VolumeLatency:
    """Latency segments per delivered batch: each source partition's records spread over their arrivals."""

    def __init__(self) -> None:
        self.by_batch: dict[tuple[int, ...], list[Segment]] = {}

    def segments(self) -> list[Segment]:
        return [seg for key in sorted(self.by_batch) for seg in self.by_batch[key]]


def distinct_keys(records: float, keys: float) -> float:
    """Expected distinct keys touched by ``records`` uniform draws over ``keys`` keys."""
    if keys <= 0 or records <= 0:
        return 0.0
    return keys * -math.expm1(records * math.log1p(-1.0 / keys)) if keys > 1 else 1.0


class VolumeIncarnation(TimedIncarnation):
    """One incarnation in volume mode."""

    def __init__(self, *args: Any, latency_book: VolumeLatency, **kwargs: Any):
        self.latency_book = latency_book
        self.counts: dict[tuple[int, int], tuple[int, float, float]] = {}  # (b, p) -> records, changed, total
        super().__init__(*args, **kwargs)

    # ------------------------------------------------------------ batches
    def _setup(self, restart: Any) -> None:
        check_metadata(self.storage, self.sc.query_digest())
        if not self.storage.exists(layout.METADATA):
            write_metadata(self.storage, f"query-{self.sc.seed}", self.sc.query_digest())
        self.initial = initial_trackers(self.ops)
        self.trackers[restart.first_batch] = self.initial
        for sid, per_part in restart.lineage.items():
            for p, uid in per_part.items():
                self.lineage[(sid, int(p), restart.lineage_version)] = uid
        self._placeholder(restart.first_batch, tuple(restart.start_offsets))

    def _placeholder(self, b: int, start: tuple[int, ...]) -> None:
        if b in self.restart.fixed_offsets:
            s, e = self.restart.fixed_offsets[b]
            self.plans[b] = BatchPlan(b, tuple(s), tuple(e), rerun=True)
        else:
            self.plans[b] = BatchPlan(b, start, start)

    def has_batch(self, b: int) -> bool:
        previous = self.plans[b - 1]
        if b in self.plans:
            return True
        if list(previous.end) == self.data.totals and b > max(self.restart.fixed_offsets, default=-1):
            return False
        self._placeholder(b, previous.end)
        return True

    def plan_ready_ms(self, b: int) -> float:
        plan, now = self.plans[b], self.clock.now
        if plan.rerun:
            return now
        ready = now
        if self.last_plan_start_ms is not None:
            ready = max(ready, self.last_plan_start_ms + self.cfg.trigger_interval_ms)
        waiting = [self.data.arrival_ms(sp, lo) for sp, lo in enumerate(plan.start) if lo < self.data.totals[sp]]
        return max(ready, min(waiting)) if waiting else ready

    def begin_step(self, node_id: NodeId) -> None:
        super().begin_step(node_id)
        plan = self.plans.get(node_id.batch)
        if node_id.step == "plan" and plan is not None and not plan.rerun:
            now = self.clock.now
            plan.end = tuple(max(lo, self.data.arrived(sp, now)) for sp, lo in enumerate(plan.start))

    # -------------------------------------------------------------- counts
    def _records(self, b: int, p: int) -> int:
        plan = self.plans[b]
        total = sum(e - s for s, e in zip(plan.start, plan.end))
        return total // self.parts + (1 if p < total % self.parts else 0)

    def _keys_per_partition(self) -> float:
        return max(1.0, self.data.keys / self.parts)

    def _store_keys(self, b: int) -> float:
        """Keys in one partition's store after batch ``b`` (all records up to its end)."""
        return distinct_keys(sum(self.plans[b].end) / self.parts, self._keys_per_partition())

    # ---------------------------------------------------------------- steps
    def trackers_for(self, b: int) -> list[dict[str, Any]]:
        return self.initial

    def trackers_after(self, b: int) -> list[dict[str, Any]]:
        return self.initial

    def step_purge(self, b: int) -> None:
        purge_logs(self.storage, self.cfg.min_batches_to_retain)

    def step_state_load(self, b: int, p: int) -> None:
        self.task(b, p)

    def step_task_apply(self, b: int, p: int) -> None:
        self.task(b, p)
        n = self._records(b, p)
        changed = distinct_keys(n, self._keys_per_partition()) if self.store_ids else 0.0
        total = self._store_keys(b) if self.store_ids else 0.0
        self.counts[(b, p)] = (n, changed, total)

    def step_changelog_write(self, b: int, p: int) -> None:
        pass

    def step_state_commit(self, b: int, p: int) -> None:
        for sid in self.store_ids:
            self.lineage[(sid, p, b + 1)] = self.uid(b, p)

    def step_snapshot_upload(self, b: int, p: int) -> None:
        pass

    def step_sink_write(self, b: int, p: int) -> None:
        pass

    def step_sink_commit(self, b: int) -> None:
        plan, now = self.plans[b], self.clock.now
        key = tuple(plan.end)
        if key in self.latency_book.by_batch:
            return
        segs = []
        for sp, (lo, hi) in enumerate(zip(plan.start, plan.end)):
            if hi > lo:
                segs.append((hi - lo, now - self.data.arrival_ms(sp, hi - 1), now - self.data.arrival_ms(sp, lo)))
        self.latency_book.by_batch[key] = segs

    # ---------------------------------------------------------------- costs
    def task_cost_ms(self, node_id: NodeId) -> float:
        step, b, p = node_id.step, node_id.batch, node_id.partition
        prof, svc = self.profile, self.service
        n, changed, total = self.counts.get((b, p), (self._records(b, p), 0.0, 0.0))
        stores = len(self.store_ids)
        if step == "state_load":
            if b == self.restart.first_batch and b > 0:
                keys = self._store_keys(b - 1) * stores
                return svc.read_ms(keys * prof.bytes_per_state_key) + prof.state_replay_ms(int(keys))
            return prof.state_load_cached_ms * stores
        if step == "task_apply":
            return prof.task_apply_ms(n, prof.straggler_factor(self.rng))
        if step == "changelog_write":
            return svc.atomic_write_ms(changed * stores * prof.bytes_per_state_key)
        if step == "state_commit":
            return stores * prof.state_commit_ms(int(changed), int(total))
        if step == "snapshot_upload":
            keys = self._store_keys(b) * stores
            return prof.snapshot_ms(int(keys)) + svc.atomic_write_ms(keys * prof.bytes_per_state_key)
        assert step == "sink_write", f"no cost for task step {step}"
        rows = changed if self.store_ids else n
        return svc.atomic_write_ms(rows * prof.bytes_per_output_row)

    def progress_event(self, b: int) -> dict[str, Any]:
        plan = self.plans[b]
        rows = sum(e - s for s, e in zip(plan.start, plan.end))
        per_part = [self.counts.get((b, p), (0, 0.0, 0.0)) for p in range(self.parts)]
        operators = [{"operatorName": sid, "numRowsTotal": int(sum(c[2] for c in per_part)),
                      "numRowsUpdated": int(sum(c[1] for c in per_part)), "numRowsRemoved": 0,
                      "commitTimeMs": 0, "memoryUsedBytes": 0} for sid in self.store_ids]
        for p in range(self.parts):
            self.counts.pop((b - 2, p), None)
        event = {"batchId": b, "numInputRows": rows, "inputRowsPerSecond": 0.0, "processedRowsPerSecond": 0.0,
                 "stateOperators": operators}
        return self.timed_progress(b, event)
