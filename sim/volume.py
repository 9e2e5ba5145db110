"""Volume mode: record counts and key cardinalities instead of records (cluster-scale experiments).

The protocol is the same as in data mode (the reference's step graph, its
driver steps, its offset and commit log entries written to the storage, its
restart planning, the same engine running it); only the payload differs:

- a batch ends where the clock says: ``plan`` takes every record that has
  arrived when it starts (any source kind: ``rate``, ``generated`` or
  ``explicit``, see ``volume_state.VolumeSource``);
- a task carries counts: records routed to its state partition (an even
  split, as a uniform hash gives), and per state store the keys changed, held
  and removed and the output rows, from the operator's model
  (``volume_state.OperatorModel``: aggregates keep every key, windows and
  sessions evict after the watermark, dedup within a watermark grows then
  evicts, plain dedup grows for ever (or, with a watermark, holds what it has
  not passed), a join keeps both sides' rows within its time bound);
- watermarks are tracked as in data mode (``reference.protocol.query.advance_trackers``)
  from each batch's largest event time, and written to the commit log;
- state files are not written (their cost is charged), so a restart loads
  state at the cost of reading and replaying every key of the store.

Counts of a batch are computed once, when its tasks first need them, and are
the same for every partition (up to the one record of an uneven split). The
tasks' random draws (straggler factors, storage jitter) are drawn then too, for
all partitions at once, from a generator seeded with (seed, incarnation,
batch): they do not depend on the order in which tasks run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Any, cast

import numpy as np
import simpy

from reference.protocol.environment import Parts, Records
from reference.protocol.faults import SealedVersion
from reference.protocol.records import BatchBook, BatchPlan, QueryFacts, TaskState, TaskTable, Watermarks
from reference.protocol.outcome import ProgressEvent, StateOperatorProgress
from reference.protocol.query import watermarks_of
from reference.protocol.recovery import RestartPlan
from reference.protocol.seams import Clock, StepNode
from reference.protocol.sources import SourceData
from reference.protocol.task_effects import attempt_uid

from .cost_model import Profile, store_commits_ms
from .graph import SimNode
from .latency import RangeLatency
from .stage_jitter import stage_jitters
from .storage_service import StorageService
from .mode_costs import MicroBatchCosts
from .timed_incarnation import SimClock, SimCosts, StepTimes, TimedIncarnation, TimedProgress
from .volume_state import OperatorModel, StoreCounts, VolumeSource, Window, distinct_keys

__all__ = ["VolumeIncarnation", "VolumeSource", "distinct_keys"]


@dataclass
class BatchVolume:
    """The counts of one batch, per state partition, and its tasks' random draws."""

    records: int                      # input records of partitions >= ``extra``; one more below it
    extra: int
    stores: list[StoreCounts]         # one per store id, in ``store_ids`` order
    output: float                     # sink rows per partition
    changed: float                    # sum over stores
    total: float                      # sum over stores
    straggler: list[float]            # per partition: task_apply's slowdown
    jitter_bases: dict[str, int | None]   # per storage step: the draw its partitions' jitter factors follow from
    missed: list[bool]                # per partition: its task's process lacks the loaded store (a cache miss)
    sigma: float                      # the storage's jitter shape
    _jitter: dict[str, np.ndarray] = field(default_factory=dict)
    _jitter_lists: dict[str, list[float]] = field(default_factory=dict)

    def records_of(self, p: int) -> int:
        return self.records + (1 if p < self.extra else 0)

    def jitter_array(self, *steps: str) -> list[np.ndarray]:
        """Per step, every partition's jitter factor of that storage step (drawn at first use, the steps together)."""
        missing = [step for step in dict.fromkeys(steps) if step not in self._jitter]
        if missing:
            parts = len(self.straggler)
            drawn = stage_jitters(self.sigma, [self.jitter_bases[step] for step in missing], parts)
            self._jitter.update(zip(missing, drawn))
        return [self._jitter[step] for step in steps]

    def jitter(self, step: str) -> list[float]:
        """Per partition, the jitter factor of storage step ``step``."""
        found = self._jitter_lists.get(step)
        if found is None:
            found = self._jitter_lists[step] = self.jitter_array(step)[0].tolist()
        return found


JITTERED_TASK_STEPS = ("state_load", "changelog_write", "snapshot_upload", "sink_write")


@dataclass
class TaskStep:
    """A foreground task step by name, batch and partition: what ``task_cost_ms`` reads of a node."""

    step: str
    batch: int
    partition: int
    background: bool = False


def place_batch(plans: dict[int, BatchPlan], restart: RestartPlan, b: int, start: tuple[int, ...]) -> None:
    """Batch ``b``'s plan before its ``plan`` step cuts it: a re-run's logged offsets, else empty for now."""
    if b in restart.fixed_offsets:
        s, e = restart.fixed_offsets[b]
        plans[b] = BatchPlan(b, tuple(s), tuple(e), rerun=True)
    else:
        plans[b] = BatchPlan(b, start, start)


class VolumeClock(SimClock):
    """Volume mode's clock: a batch ends where the clock says, when its ``plan`` starts
    (``VolumeIncarnation.begin_step``); only the first batch is placed when the incarnation starts."""

    def plan_batches(self, restart: RestartPlan) -> None:
        place_batch(self.book.plans, restart, restart.first_batch, tuple(restart.start_offsets))


class VolumeCounts:
    """The counts of each batch of one incarnation, computed once, when its tasks first need them (batches in
    order: models that carry state, dedup, see them in order), with its tasks' random draws."""

    def __init__(self, facts: QueryFacts, book: BatchBook, watermarks: Watermarks, source: VolumeSource,
                 profile: Profile, service: StorageService):
        self.facts, self.book, self.watermarks, self.source = facts, book, watermarks, source
        self.profile, self.service = profile, service
        self.parts, self.store_ids = facts.parts, facts.store_ids
        self.volumes: dict[int, BatchVolume] = {}
        self._changed_since: dict[int, float] = {}
        keys = max(1.0, source.keys / self.parts)
        self.models = [OperatorModel(op, keys) for op in facts.ops]
        # in a chain, the share of the input that reaches each operator (its event-time counts scale by it)
        # (a restarted query starts from the input before its first batch, as if all of it reached every operator)
        self._chain_scale = [1.0] * len(facts.ops)
        self._flow = [sum(facts.restart.start_offsets) / self.parts] * len(facts.ops)
        self.restart_keys = 0.0   # ``keys_at_restart``, once the incarnation has its first trackers

    def volume(self, b: int) -> BatchVolume:
        """The counts of batch ``b`` (its plan has started, so its end offsets are fixed)."""
        found = self.volumes.get(b)
        if found is not None:
            return found
        first = self.facts.restart.first_batch
        if b - 1 >= first and b - 1 not in self.volumes:
            self.volume(b - 1)   # models that carry state (dedup) see the batches in order
        plan = self.book.plans[b]
        window = Window(self.source, self.parts, *plan.bounds)
        total = sum(e - s for s, e in zip(*plan.bounds))
        wms = watermarks_of(self.watermarks.trackers_for(b))
        trackers = self.book.trackers
        previous = watermarks_of(trackers[b - 1]) if b - 1 in trackers else wms
        n = total / self.parts
        stores: list[StoreCounts] = []
        for i, model in enumerate(self.models):
            self._flow[i] += n   # what reached operator i in this incarnation, per partition
            if i and self._flow[0] > 0:
                self._chain_scale[i] = self._flow[i] / self._flow[0]
            counts, n = model.batch(window, self._chain_scale[i], n, wms[i], previous[i])
            stores.extend(counts)
        # A task's random draws are a function of (seed, incarnation, batch, partition, step) alone, drawn
        # for the whole stage at once: the order in which tasks and steps run cannot change them.
        draws = np.random.default_rng([self.facts.sc.seed, self.facts.number, b])
        straggler = [self.profile.straggler_factor_for(u) for u in draws.random(self.parts).tolist()]
        jitter = {step: self.service.jitter_base(draws) for step in JITTERED_TASK_STEPS}
        # drawn last, and only when a miss can happen, so that the draws above never depend on it
        missed = ([self.profile.state_cache_missed(u) for u in draws.random(self.parts).tolist()]
                  if self.profile.state_cache_miss_probability > 0 else [False] * self.parts)
        found = BatchVolume(total // self.parts, total % self.parts, stores, n,
                            sum(s.changed for s in stores), sum(s.total for s in stores), straggler, jitter, missed,
                            self.service.profile.jitter_sigma)
        self.volumes[b] = found
        return found

    def keys_at_restart(self) -> float:
        """Keys a partition's stores hold at this incarnation's first version (read and replayed on load)."""
        first = self.facts.restart.first_batch
        if first == 0 or not self.store_ids:
            return 0.0
        start = tuple(self.facts.restart.start_offsets)
        window = Window(self.source, self.parts, start, start)
        wms = watermarks_of(self.book.trackers[first])
        total = 0.0
        for i, model in enumerate(self.models):
            counts, _n = model.batch(window, self._chain_scale[i], 0.0, wms[i], wms[i])
            total += sum(c.total for c in counts)
        return total

    def changed_since_snapshot(self, b: int) -> float:
        """Keys changed per partition by this incarnation's batches since the snapshot before ``b``'s (the same for
        every partition, so summed once per batch)."""
        found = self._changed_since.get(b)
        if found is None:
            every = self.facts.shape.maintenance_every()
            since = range(max(self.facts.restart.first_batch, b - every + 1), b + 1)   # this incarnation's batches
            found = self._changed_since[b] = sum((self.volumes.get(x) or self.volume(x)).changed for x in since)
        return found


class CountedTaskEffects:
    """Volume mode's task effects (the ``TaskEffects`` seam): a task's bookkeeping only. Counts stand for its
    records, and it writes no files: no state files to purge, no manifest to commit."""

    snapshot_format: str | None = None

    def __init__(self, facts: QueryFacts, book: BatchBook, table: TaskTable, source: VolumeSource):
        self.number, self.parts, self.store_ids, self.ops = facts.number, facts.parts, facts.store_ids, facts.ops
        self.plans, self.tasks, self.lineage, self.source = book.plans, table.tasks, table.lineage, source

    def uid(self, b: int, p: int) -> str:
        return attempt_uid(self.number, b, p, self.tasks[(b, p)].attempt)

    def event_time_maxima(self, b: int) -> list[list[dict[str, int]]]:
        """Batch ``b``'s largest event time per side, for every operator (one entry: the whole batch)."""
        plan = self.plans[b]
        window = Window(self.source, self.parts, *plan.bounds)
        maxima: dict[str, int] = {}
        for side in sorted(set(self.source.sides)):
            span = window.event_span(side)
            if span is not None:
                maxima[side] = int(span[1])
        return [[maxima] * len(self.ops)]

    def purge_state_files(self, b: int) -> None:
        """Nothing: volume mode keeps no state files (``purge`` deletes the logs only)."""

    def step_state_load(self, b: int, p: int) -> None:
        if (b, p) not in self.tasks:
            self.tasks[(b, p)] = TaskState()

    def step_task_apply(self, b: int, p: int) -> None:
        if (b, p) not in self.tasks:
            self.tasks[(b, p)] = TaskState()

    def step_changelog_write(self, b: int, p: int, store: str | None = None) -> None:
        pass

    def step_state_commit(self, b: int, p: int, store: str | None = None) -> None:
        uid = self.uid(b, p)
        for sid in self.store_ids:
            self.lineage[(sid, p, b + 1)] = uid

    def land_stage(self, b: int, steps: tuple[str, ...]) -> None:
        """The effects of every task of stage ``b`` (``stage.StageRun``), as its steps would have had them."""
        tasks = self.tasks
        commit = self.step_state_commit if "state_commit" in steps else None
        for p in range(self.parts):
            if (b, p) not in tasks:   # step_state_load and step_task_apply
                tasks[(b, p)] = TaskState()
            if commit is not None:
                commit(b, p)

    def step_snapshot_upload(self, b: int, p: int) -> None:
        pass

    def step_sink_write(self, b: int, p: int) -> None:
        pass

    def zombie_material(self, b: int, p: int) -> tuple[list[SealedVersion], list[list[Any]]]:
        """A failed attempt leaves no sealed version and no rows: its zombie writes carry nothing."""
        return [], []

    def commit_output(self, b: int) -> None:
        """Nothing: the tasks wrote no files for a manifest to name."""

    def batch_committed(self, b: int) -> None:
        for p in range(self.parts):   # lineage of versions a restart could still name is in the commit log
            for sid in self.store_ids:
                self.lineage.pop((sid, p, b - 2), None)


class VolumeProgress(TimedProgress):
    """Volume mode's progress: the batch's counts with the simulated durations; the offsets not visible before
    end their latency when the batch's output becomes visible."""

    def __init__(self, facts: QueryFacts, book: BatchBook, times: StepTimes, profile: Profile,
                 env: simpy.Environment, counts: VolumeCounts, latency_book: RangeLatency):
        super().__init__(facts, times, profile, env)
        self.plans, self.counts, self.latency_book, self.source = book.plans, counts, latency_book, counts.source
        self.parts, self.store_ids = facts.parts, facts.store_ids

    def event(self, b: int) -> ProgressEvent:
        plan = self.plans[b]
        rows = sum(e - s for s, e in zip(*plan.bounds))
        counts = self.counts.volume(b)
        operators = tuple(StateOperatorProgress(sid, int(s.total * self.parts),
                                                int((s.changed - s.removed) * self.parts),
                                                int(s.removed * self.parts))
                          for sid, s in zip(self.store_ids, counts.stores))
        return ProgressEvent(b, rows, state_operators=operators)

    def output_visible(self, b: int) -> None:
        plan, now = self.plans[b], self.env.now
        for sp, (lo, hi) in enumerate(zip(*plan.bounds)):
            if hi > lo:
                self.latency_book.delivered(sp, lo, hi, now, partial(self.source.arrival_ms, sp))


class VolumeIncarnation(TimedIncarnation):
    """One incarnation in volume mode: its parts count (``VolumeClock``, ``CountedTaskEffects``,
    ``VolumeProgress``, over ``VolumeCounts``); the class adds the mode interface and the task steps' costs."""

    # Task step costs come from the batch's counts and draws (fixed when its tasks start) and task step
    # effects are the task's own bookkeeping, so a task may run the steps nothing else waits for under
    # one timeout: the run is the same as step by step, to the byte.
    fuse_task_steps = True
    # ... and for the same reasons a batch's tasks may run as one stage where nothing can tell (``stage.py``)
    run_stages = True

    def __init__(self, scenario: Any, source: VolumeSource, *args: Any, latency_book: RangeLatency,
                 **kwargs: Any):
        self.source = source
        self.latency_book = latency_book
        # The reference's parts that read records are all replaced by volume mode's (``sim_parts``), so the
        # reference never reads ``data`` as a ``SourceData``.
        super().__init__(scenario, cast(SourceData, source), *args, **kwargs)
        self.counts.restart_keys = self.counts.keys_at_restart()

    def sim_parts(self, records: Records) -> Parts:
        r = records
        self.counts = VolumeCounts(r.facts, r.book, r.watermarks, self.source, self.profile, self.service)
        self.counted = CountedTaskEffects(r.facts, r.book, r.table, self.source)
        clock = VolumeClock(r.facts, r.book, self.clock)
        self.costs = self.volume_costs = VolumeCosts(r.facts, r.book, clock, self.times, self.profile, self.service,
                                                     self.clock, self.mode_costs, self.counts)
        return Parts(clock, self.counted, VolumeProgress(r.facts, r.book, self.times, self.profile, self.clock,
                                                         self.counts, self.latency_book), self.costs)

    def volume(self, b: int) -> BatchVolume:
        return self.counts.volume(b)

    def land_stage(self, b: int, steps: tuple[str, ...]) -> None:
        self.counted.land_stage(b, steps)

    # ------------------------------------------------------------ batches
    def has_batch(self, b: int) -> bool:
        previous = self.plans[b - 1]
        if b in self.plans:
            return True
        if list(previous.bounds[1]) == self.source.totals and b > max(self.restart.fixed_offsets, default=-1):
            return False
        place_batch(self.plans, self.restart, b, previous.bounds[1])
        return True

    def plan_ready_ms(self, b: int) -> float:
        """Plan at the trigger, once a record not yet taken has arrived (a re-run batch: at once).

        Not ``SourceData.input_ready_ms``: in volume mode a batch's end is not
        known before it is planned (``plan`` takes whatever has arrived), so the
        question is when the first record past the previous batch arrives, not
        when a fixed batch's last one did. A re-run batch's input, logged before
        the crash, has always arrived already.
        """
        plan, now = self.plans[b], self.clock.now
        if plan.rerun:
            return now
        source = self.source
        waiting = [source.arrival_ms(sp, lo) for sp, lo in enumerate(plan.start) if lo < source.totals[sp]]
        return self.trigger_ms(min(waiting) if waiting else None)

    def begin_step(self, node: SimNode) -> None:
        if node.step == "plan":
            super().begin_step(node)
            plan = self.plans.get(node.batch)
            if plan is not None and not plan.rerun:
                now = self.clock.now
                plan.end = tuple(max(lo, self.source.arrived(sp, now)) for sp, lo in enumerate(plan.start))


class VolumeCosts(SimCosts):
    """Volume mode's step costs: a task step's cost from its batch's counts and draws (``VolumeCounts``)."""

    def __init__(self, facts: QueryFacts, book: BatchBook, clock: Clock, times: StepTimes, profile: Profile,
                 service: StorageService, env: simpy.Environment, mode_costs: MicroBatchCosts, counts: VolumeCounts):
        super().__init__(facts, book, clock, times, profile, service, env, mode_costs)
        self.counts, self.parts, self.store_ids, self.shape = counts, facts.parts, facts.store_ids, facts.shape

    def task_cost_ms(self, node: StepNode) -> float:
        step, b, p = node.step, node.batch, node.partition
        prof, svc = self.profile, self.service
        counts = self.counts.volumes.get(b) or self.counts.volume(b)
        if step == "task_apply":
            return prof.task_apply_ms(counts.records_of(p), counts.straggler[p])
        parallel = self.cfg.parallel_store_commit
        if step == "state_commit":
            return store_commits_ms([prof.state_commit_ms(int(s.changed), int(s.total)) for s in counts.stores],
                                    parallel)
        jitter = counts.jitter(step)[p]
        if step == "sink_write":
            return self.sink_write_ms(counts.output * prof.bytes_per_output_row, jitter)
        if step == "changelog_write":
            return svc.store_files_ms([prof.commit_files_bytes(self.cfg.provider, s.changed) for s in counts.stores],
                                      parallel, jitter)
        if step == "state_load":
            return self._state_load_ms(b, p, counts, jitter)
        assert step == "snapshot_upload", f"no cost for task step {step}"
        keys = prof.snapshot_upload_keys(self.cfg.provider, int(counts.total), int(self.counts.changed_since_snapshot(b)))
        return prof.snapshot_ms(keys) + svc.state_writes_ms([keys * prof.bytes_per_state_key], False, jitter)

    def _loading(self, b: int, counts: BatchVolume) -> list[int]:
        """The partitions whose state load in batch ``b`` is not the cached one (``_state_load_ms``)."""
        if b == self.restart.first_batch and b > 0:
            return list(range(self.parts))
        if b == 0 or (not self.shape.moved and not any(counts.missed)):
            return []
        return [p for p in range(self.parts) if (b, p) in self.shape.moved or counts.missed[p]]

    def _state_load_ms(self, b: int, p: int, counts: BatchVolume, jitter: float) -> float:
        """Partition ``p``'s state load in batch ``b``: cached, or read and replayed (a restart, a move, a miss)."""
        prof = self.profile
        if b == self.restart.first_batch and b > 0:
            keys = self.counts.restart_keys
        elif ((b, p) in self.shape.moved or counts.missed[p]) and b > 0:   # the state before batch b, loaded
            keys = (self.counts.volumes.get(b - 1) or counts).total
        else:
            return prof.state_load_cached_ms * len(self.store_ids)
        return prof.state_open_ms * len(self.store_ids) + \
            self.service.read_ms(keys * prof.bytes_per_state_key, jitter) + prof.state_replay_ms(int(keys))

    def stage_costs(self, b: int, steps: tuple[str, ...]) -> dict[str, list[float]]:
        """Per step, every partition's ``task_cost_ms`` of batch ``b``, to the bit, computed for the stage at once.

        A cost is a function of the batch's counts and the partition's draws; where
        it is a base cost times the partition's jitter, the base is computed once
        (a factor 1.0 leaves it unchanged) and multiplied by the jitter array.
        """
        counts = self.counts.volumes.get(b) or self.counts.volume(b)
        prof, parts = self.profile, self.parts
        counts.jitter_array(*(step for step in steps if step in ("changelog_write", "sink_write")))
        out: dict[str, list[float]] = {}
        for step in steps:
            if step == "task_apply":   # the partitions' records differ by one at most, their slowdowns take 2 values
                table = {(records, slowdown): prof.task_apply_ms(records, slowdown)
                         for records in {counts.records_of(0), counts.records_of(parts - 1)}
                         for slowdown in set(counts.straggler)}
                row = [table[counts.records_of(p), slowdown] for p, slowdown in enumerate(counts.straggler)]
            elif step == "state_commit":
                row = [self.task_cost_ms(TaskStep(step, b, 0))] * parts
            elif step == "state_load":
                row = [prof.state_load_cached_ms * len(self.store_ids)] * parts
                for p in self._loading(b, counts):   # jitter only where a store is read
                    row[p] = self._state_load_ms(b, p, counts, counts.jitter(step)[p])
            elif step == "sink_write":
                base = self.sink_write_ms(counts.output * prof.bytes_per_output_row, 1.0)
                row = (base * counts.jitter_array(step)[0]).tolist()
            else:
                assert step == "changelog_write", f"no stage cost for task step {step}"
                row = self._changelog_writes_ms(counts, counts.jitter_array(step)[0])
            out[step] = row
        return out

    def _changelog_writes_ms(self, counts: BatchVolume, jitter: np.ndarray) -> list[float]:
        """Every partition's ``changelog_write`` (``StorageService.store_files_ms`` over a jitter array): each
        store's files one after the other, the stores in turn or the slowest of them."""
        prof, svc = self.profile, self.service
        files = [prof.commit_files_bytes(self.cfg.provider, s.changed) for s in counts.stores]
        per_store = [sum((svc.atomic_write_ms(size, 1.0, "executor") * jitter for size in sizes),
                         np.zeros(len(jitter))) for sizes in files]
        charged = sum(sum(sizes) for sizes in files)
        for _p in range(len(jitter)):   # the bytes every task's commit is charged for, in turn
            svc.state_bytes_charged += charged
        if not per_store:
            return [0.0] * len(jitter)
        if self.cfg.parallel_store_commit:
            return np.maximum.reduce(per_store).tolist()
        return sum(per_store[1:], per_store[0]).tolist()
