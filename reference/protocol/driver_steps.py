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

from typing import Callable

from . import layout
from .failures import QueryFailure
from .graph import Node
from .incarnation_views import IncarnationViews
from .logs import CommitEntry, OffsetEntry, PurgeRound, log_batches, purge_round, run_purge_round
from .outcome import ProgressEvent
from .records import BatchPlan, offset_entry_due
from .query import watermarks_of


def concurrent_update(path: str, b: int) -> str:
    """Spark's failure when a log entry it adds exists already (``HDFSMetadataLog.add`` returns false;
    ``QueryExecutionErrors.concurrentStreamLogUpdate``): another job wrote it, whatever it holds."""
    return f"{path}: Concurrent update to the log. Multiple streaming jobs detected for {b}"


class DriverSteps(IncarnationViews):
    """The driver steps' effects. Where they meet a backend they call the seam hooks below, which the
    incarnation (``incarnation.py``) answers from its parts."""

    # the seam hooks the driver steps call: the incarnation answers them from its parts (``incarnation.py``)
    await_plan: Callable[[int], None]
    cut_now: Callable[[int], tuple[int, ...]]
    logical_time_ms: Callable[[int], int]
    nodes_added: Callable[[list[Node]], None]
    commit_output: Callable[[int], None]
    purge_state_files: Callable[[int], None]
    batch_committed: Callable[[int], None]
    progress_event: Callable[[int], ProgressEvent]
    output_visible: Callable[[int], None]
    progress_reported: Callable[[int], None]
    purge_round_of: Callable[[int], "PurgeRound | None"]

    # ------------------------------------------------------------ its logs
    def known_logs(self) -> dict[str, list[int]]:
        """The ids of both logs (sorted) as this incarnation knows them (``records.LogIndex``)."""
        return self.book.logs.known()

    def _logged(self, folder: str, b: int) -> None:
        self.book.logs.logged(folder, b)

    # ----------------------------------------------------------- the steps
    def open_batch(self, b: int, start: tuple[int, ...]) -> None:
        """Add batch ``b``, still open, and its step-graph nodes; ``nodes_added`` tells the scheduler."""
        self.plans[b] = BatchPlan(b, start, None)
        added = []
        for node in self.shape.batch_nodes(b):
            real = tuple(d for d in node.deps if d in self.nodes)
            self.nodes[node.id] = Node(node.id, real, node.background)
            added.append(self.nodes[node.id])
        self.nodes_added(added)

    def step_plan(self, b: int) -> None:
        self.await_plan(b)
        plan = self.plans[b]
        self.start_where_the_mode_says(b)
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

    def start_where_the_mode_says(self, b: int) -> None:
        """Batch ``b`` starts where its mode says (``batch_start``: in real-time mode where batch b-1's offset
        entry ended); a cut never lies before its start."""
        plan = self.plans[b]
        start = self.mode.batch_start(b, plan.start, self.reported_ends)
        if start == plan.start:
            return
        plan.start = start
        if plan.end is not None:
            plan.end = tuple(max(e, s) for e, s in zip(plan.end, start))

    def offsets_to_log(self, b: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """The offsets ``offsets/b`` holds, as the mode says (``logged_offsets``: the planned ones, or in
        real-time mode the end the tasks reported, which is then where the next batch starts)."""
        plan = self.plans[b]
        reported = all(self.tasks.get((b, p)) is not None and self.tasks[(b, p)].result is not None
                       for p in range(self.parts))
        start, end = self.mode.logged_offsets(*plan.bounds, reported)
        if self.mode.offsets_from_tasks:
            self.reported_ends[b] = end
            self.obs.batches[b]["end_offsets"] = list(end)
        return start, end

    def step_offset_log_write(self, b: int) -> None:
        if not self._persist_offsets(b):
            return
        start, end = self.offsets_to_log(b)
        entry = OffsetEntry(b, start, end)
        path = layout.offset_path(b)
        if self.storage.exists(path):
            if not self.plans[b].rerun:   # only a batch re-run after a restart finds its entry written
                raise QueryFailure(concurrent_update(path, b))
            logged = OffsetEntry.read(self.storage, b)
            if not self.mode.same_offset_entry(logged, start, end):
                raise QueryFailure(f"{path}: already logged with other offsets; a batch must re-run "
                                   f"with exactly its logged offsets")
        else:
            self.storage.write(path, entry.encode())
        self.persisted_offsets.add(b)
        self._logged(layout.OFFSETS, b)

    def offsets_persist_due(self, b: int) -> bool:
        """Whether ``offsets/b`` is written (the mode's ``offset_entry_due``: async progress writes one only once
        ``checkpoint_interval_ms`` has passed)."""
        return offset_entry_due(self.facts, self.book, b, self.logical_time_ms(b))

    def _persist_offsets(self, b: int) -> bool:
        if self.offsets_persist_due(b):
            self.last_persisted_time_ms = self.logical_time_ms(b)
            return True
        return False

    def step_purge(self, b: int) -> None:
        self.purge_log_entries(self.purge_round_of(b))
        self.purge_state_files(b)

    def next_purge_round(self, b: int) -> PurgeRound | None:
        """The purge round purge ``b`` would run now (``reference.protocol.logs.purge_round``), at the mode's
        threshold."""
        known = self.known_logs()
        threshold = self.mode.purge_threshold(known[layout.OFFSETS], known[layout.COMMITS],
                                              self.cfg.min_batches_to_retain, b)
        return purge_round(threshold, self.last_purged_batch)

    def decide_purge(self, b: int) -> None:
        """A timed backend starts purge ``b``: its round is decided now (Spark computes the threshold when it
        calls ``purge``), the step's cost reads it and its effect runs it (``purge_round_of``)."""
        self.book.decided_purges[b] = self.next_purge_round(b)

    def purge_log_entries(self, rnd: PurgeRound | None) -> list[str]:
        """Purge both logs as Spark's ``HDFSMetadataLog.purge`` does (``reference.protocol.logs.PurgeRound``): the
        same entries as ``purge_logs`` deletes, with Spark's storage operations."""
        if rnd is None:
            return []
        deleted = run_purge_round(self.storage, rnd, self.known_logs()[layout.COMMITS][-1])
        self.last_purged_batch = rnd.threshold - 1
        self.book.logs.forget_below(rnd.threshold)
        return deleted

    def _committed_batches(self) -> list[int]:
        return log_batches(self.storage, layout.COMMITS)

    def step_sink_commit(self, b: int) -> None:
        self.commit_output(b)
        self.output_visible(b)

    def step_commit_log_write(self, b: int) -> None:
        trackers_after = self.trackers_after(b)
        if self.mode.commit_entry_due(b, self.persisted_offsets):   # async progress: only persisted entries
            assert b > self.last_commit_written, \
                f"commit entries are written in batch order: commits/{b} after commits/{self.last_commit_written}"
            lineage = {sid: {str(p): self.lineage[(sid, p, b + 1)] for p in range(self.parts)}
                       for sid in self.store_ids}
            path = layout.commit_path(b)
            if self.storage.exists(path):   # no batch is committed twice: another job wrote it
                raise QueryFailure(concurrent_update(path, b))
            entry = CommitEntry(b, watermarks_of(self.trackers_for(b))[0], trackers_after, lineage)
            self.storage.write(path, entry.encode())
            self.last_commit_written = b
            self._logged(layout.COMMITS, b)
            self.obs.batches[b]["watermark_ms"] = entry.watermark_ms   # the watermark commits/b holds
        self.batch_committed(b)

    def step_source_commit(self, b: int) -> None:
        self.obs.committed(b, watermarks_of(self.trackers_for(b))[0], self.progress_event(b))
        self.progress_reported(b)
