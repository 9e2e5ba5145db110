"""The driver's steps (spec section 2): the protocol's own effects, the same on every backend.

``plan`` fixes a batch's offsets (asking the clock where an open batch ends),
``offset_log_write`` and ``commit_log_write`` write the two logs (under async
progress only when an entry is due, ``checkpoint_interval_ms``), ``purge``
deletes what retention no longer keeps, ``sink_commit`` makes the output the
batch's, and ``source_commit`` records the batch's progress. No backend
replaces these effects: where a driver step meets a backend it calls a seam
(``seams.py``): the clock, the tasks' effects, the progress reporter.

Invariants asserted here (TIGER_STYLE): commit entries are written in batch
order; the lineage id of a committed version never changes; a batch re-runs
with exactly its logged offsets.
"""

from __future__ import annotations

from . import layout
from .failures import QueryFailure
from .incarnation_state import IncarnationState
from .logs import CommitEntry, OffsetEntry, PurgeRound, log_batches, purge_round, run_purge_round, threshold_of
from .outcome import DURATION_KEYS, ProgressEvent, StateOperatorProgress
from .query import watermarks_of


class DriverSteps(IncarnationState):
    """The driver steps' effects, and the untimed progress the reference reports."""

    def step_plan(self, b: int) -> None:
        self.await_plan(b)
        plan = self.plans[b]
        if self.cfg.real_time:
            self.start_at_committed_end(b)
        if plan.end is None:
            end = self.cut_now(b)
            assert all(s <= e <= t for s, e, t in zip(plan.start, end, self.data.totals)), \
                f"batch {b}: a cut {end} must lie between its start {plan.start} and the input's end"
            plan.end = end
            if end != tuple(self.data.totals):
                self.open_batch(b + 1, end)
        self.fetch_sources(b)
        self.obs.planned(b, plan.start, plan.end, self.number, plan.rerun)
        self.obs.moved(b, self.placement.moves_at(b))

    def fetch_sources(self, b: int) -> None:
        """A redelivering source fetches up to the batch's cut and persists its fetch state (``redelivery.py``);
        a re-run batch reads the persisted ledger instead."""
        plan = self.plans[b]
        if plan.rerun:
            return
        for sp, layer in self.fetchers.items():
            end = plan.bounds[1][sp]
            if end > 0:
                layer.fetch(self.data.partitions[sp][end - 1].arrival_ms)
            layer.persist(self.storage, b)

    def start_at_committed_end(self, b: int) -> None:
        """Real-time mode: batch ``b`` starts where batch b-1's offset entry ended (Spark: ``committedOffsets
        ++= endOffsets`` in ``markMicroBatchEnd``, then ``runBatch`` reads from them); its deadline cut never
        lies before its start."""
        plan = self.plans[b]
        start = self.reported_ends.get(b - 1)
        if start is None or start == plan.start:
            return
        plan.start = start
        if plan.end is not None:
            plan.end = tuple(max(e, s) for e, s in zip(plan.end, start))

    def offsets_to_log(self, b: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """The offsets ``offsets/b`` holds. Micro-batch: the planned ones, logged before the tasks run.
        Real-time mode: the end is collected from the tasks at the end of the batch (Spark:
        ``populateBatchOffsetsForRTM`` reads each task's report from ``RealTimeStreamScanExec``'s
        accumulator and merges them): every task that reached the deadline reported the batch's cut; while a
        task has not reported, the driver has only the batch's start."""
        plan = self.plans[b]
        if not self.cfg.real_time:
            return plan.bounds
        reported = all(self.tasks.get((b, p)) is not None and self.tasks[(b, p)].result is not None
                       for p in range(self.parts))
        end = plan.bounds[1] if reported else plan.start
        self.reported_ends[b] = end
        self.obs.batches[b]["end_offsets"] = list(end)
        return plan.start, end

    def step_offset_log_write(self, b: int) -> None:
        if self.cfg.progress_mode == "async" and not self._persist_offsets(b):
            return
        start, end = self.offsets_to_log(b)
        entry = OffsetEntry(b, start, end)
        path = layout.offset_path(b)
        if self.storage.exists(path):
            logged = OffsetEntry.read(self.storage, b)
            # async progress folds unlogged batches into a re-run, so only its end is fixed
            same = logged.end == end and (self.cfg.progress_mode == "async" or logged.start == start)
            if not same:
                raise QueryFailure(f"{path}: already logged with other offsets; a batch must re-run "
                                   f"with exactly its logged offsets")
        else:
            self.storage.write(path, entry.encode())
        self.persisted_offsets.add(b)
        self._logged(layout.OFFSETS, b)

    def offsets_persist_due(self, b: int) -> bool:
        """Async progress: an offset entry is written only once ``checkpoint_interval_ms`` has passed."""
        if self.cfg.progress_mode == "sync":
            return True
        last = self.last_persisted_time_ms
        return b == self.restart.first_batch or last is None or \
            self.logical_time_ms(b) - last >= self.cfg.checkpoint_interval_ms

    def _persist_offsets(self, b: int) -> bool:
        if self.offsets_persist_due(b):
            self.last_persisted_time_ms = self.logical_time_ms(b)
            return True
        return False

    def step_purge(self, b: int) -> None:
        self.purge_log_entries(self.purge_round_of(b))
        self.purge_state_files(b)

    def next_purge_round(self) -> PurgeRound | None:
        """The purge round this incarnation would run now (``reference.protocol.logs.purge_round``)."""
        known = self.known_logs()
        threshold = threshold_of(known[layout.OFFSETS], known[layout.COMMITS], self.cfg.min_batches_to_retain,
                                 self.cfg.progress_mode)
        return purge_round(threshold, self.last_purged_batch)

    def purge_round_of(self, b: int) -> PurgeRound | None:
        """The round purge ``b`` runs, decided when it starts (Spark computes the threshold when it calls
        ``purge``); an untimed step starts and ends at once."""
        return self.next_purge_round()

    def purge_log_entries(self, rnd: PurgeRound | None) -> list[str]:
        """Purge both logs as Spark's ``HDFSMetadataLog.purge`` does (``reference.protocol.logs.PurgeRound``): the
        same entries as ``purge_logs`` deletes, with Spark's storage operations."""
        if rnd is None:
            return []
        deleted = run_purge_round(self.storage, rnd, self.known_logs()[layout.COMMITS][-1])
        self.last_purged_batch = rnd.threshold - 1
        with self._log_lock:
            assert self._log_index is not None
            for ids in self._log_index.values():
                ids.difference_update([x for x in ids if x < rnd.threshold])
        return deleted

    def _committed_batches(self) -> list[int]:
        return log_batches(self.storage, layout.COMMITS)

    def step_sink_commit(self, b: int) -> None:
        self.commit_output(b)
        self.output_visible(b)

    def step_commit_log_write(self, b: int) -> None:
        trackers_after = self.trackers_after(b)
        if self.cfg.progress_mode != "async" or b in self.persisted_offsets:   # async: only persisted entries
            assert b > self.last_commit_written, \
                f"commit entries are written in batch order: commits/{b} after commits/{self.last_commit_written}"
            lineage = {sid: {str(p): self.lineage[(sid, p, b + 1)] for p in range(self.parts)}
                       for sid in self.store_ids}
            path = layout.commit_path(b)
            if self.storage.exists(path):
                assert CommitEntry.read(self.storage, b).state_lineage == lineage, \
                    f"{path}: the lineage of a committed version never changes"
            entry = CommitEntry(b, watermarks_of(self.trackers_for(b))[0], trackers_after, lineage)
            self.storage.write(path, entry.encode(), overwrite=True)
            self.last_commit_written = b
            self._logged(layout.COMMITS, b)
            self.obs.batches[b]["watermark_ms"] = entry.watermark_ms   # the watermark commits/b holds
        self.batch_committed(b)

    def step_source_commit(self, b: int) -> None:
        self.obs.committed(b, watermarks_of(self.trackers_for(b))[0], self.progress_event(b))
        self.progress_reported(b)

    # ------------------------------------------------------------ progress
    def progress_event(self, b: int) -> ProgressEvent:
        """A StreamingQueryProgress-shaped record. The reference is untimed: durations are 0."""
        plan = self.plans[b]
        rows = sum(e - s for s, e in zip(*plan.bounds))
        operators = []
        for sid in self.store_ids:
            total = sum(len(self.stores[(sid, p)].data) for p in range(self.parts) if (sid, p) in self.stores)
            changes = [c for p in range(self.parts) for c in self.tasks[(b, p)].sealed[sid].changes]
            operators.append(StateOperatorProgress(sid, total, sum(1 for _k, v in changes if v is not None),
                                                   sum(1 for _k, v in changes if v is None)))
        return ProgressEvent(b, rows, 0.0, 0.0, {k: 0 for k in DURATION_KEYS}, tuple(operators))

    def output_visible(self, b: int) -> None:
        """The reference measures no latency."""

    def progress_reported(self, b: int) -> None:
        """Nobody listens to the reference's progress."""
