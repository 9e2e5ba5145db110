"""The reference's task effects (the ``TaskEffects`` seam, ``seams.py``): each task step done in process.

spec section 2's task steps, and the files of section 3 they leave: a task
loads its partition's stores (the executor's cached copy, else the checkpoint),
applies the batch's records, seals the new versions, writes and commits them,
and writes its output. The reference and the simulator's data mode do all of
it here, on real records and real files; the PySpark engine does it on Spark's
executors and the simulator's volume mode by counts, each behind the same hooks.

The part reads the query's facts and the batch book, and writes the task
table (``records.py``): the stores cached on executors and the sealed versions
not yet durable live there and die with the incarnation. Invariant (TIGER_STYLE): at most one state
commit per partition is pending when the next version is sealed (the store
asserts that its committed version only moves forward).
"""

from __future__ import annotations

import json
from typing import Any

from . import layout
from .faults import SealedVersion, sealed_versions
from .records import BatchBook, QueryFacts, TaskTable, Watermarks, batch_records
from .logs import CommitEntry
from .outcome import digest_rows
from .query import apply_partition, operator_watermarks, route, rows_of, sink_rows
from .state_store import StateStore, cleanup_store


def attempt_uid(number: int, b: int, p: int, attempt: int) -> str:
    """The lineage id of attempt ``attempt`` of task (b, p) in incarnation ``number`` (spec section 3)."""
    return f"r{number}b{b}p{p}a{attempt}"


class TaskOutputs:
    """What driver steps reach of the tasks' effects where the tasks leave their results in the task table and
    their files in the checkpoint: lineage ids, event-time maxima, the sink's manifest, the state files to
    purge. The reference's task steps (``InProcessTaskEffects``) and the PySpark engine's (on executors) share
    it."""

    snapshot_format: str | None = None

    def __init__(self, facts: QueryFacts, book: BatchBook, table: TaskTable):
        self.facts, self.book, self.table = facts, book, table
        self.sc, self.cfg, self.storage, self.obs = facts.sc, facts.cfg, facts.storage, facts.obs
        self.store_ids, self.parts, self.ops = facts.store_ids, facts.parts, facts.ops
        self.tasks, self.stores, self.lineage = table.tasks, table.stores, table.lineage

    def uid(self, b: int, p: int) -> str:
        return attempt_uid(self.facts.number, b, p, self.tasks[(b, p)].attempt)

    def event_time_maxima(self, b: int) -> list[list[dict[str, int]]]:
        """Batch b's event-time maxima, per partition and operator: what its tasks saw (a backend that does not
        run the records, like the simulator's volume mode, computes them from its counts)."""
        return [self.tasks[(b, p)].result.max_event_ms for p in range(self.parts)]  # type: ignore[union-attr]

    def commit_output(self, b: int) -> None:
        """The exactly-once sink's manifest names the batch's part files (a re-run replaces, never duplicates);
        an at-least-once sink has nothing to commit."""
        if self.sc.sink_mode != "exactly_once":
            return
        files = [self.tasks[(b, p)].sink_file for p in range(self.parts)]
        path = layout.manifest_path(b)
        delivery = 1
        if self.storage.exists(path):
            delivery = json.loads(self.storage.read(path))["delivery"] + 1
        body: dict[str, Any] = {"batch": b, "files": [f for f in files if f], "delivery": delivery}
        self.storage.write(path, json.dumps(body, sort_keys=True).encode(), overwrite=True)
        rows = [row for f in body["files"] for row in json.loads(self.storage.read(f))]
        self.obs.deliveries.setdefault(b, []).append(digest_rows(rows))

    def purge_state_files(self, b: int) -> None:
        """Every store's files that retention no longer needs, by the lineage of the latest commit entry."""
        if not self.store_ids:
            return
        commits = [x for x in self.book.logs.known()[layout.COMMITS] if x <= b]
        if not commits:
            return
        entry = CommitEntry.read(self.storage, commits[-1])
        for sid, per_part in entry.state_lineage.items():
            for p_text, uid in per_part.items():
                cleanup_store(self.storage, sid, int(p_text), self.cfg.min_batches_to_retain,
                              entry.batch + 1, uid)

    def batch_committed(self, b: int) -> None:
        """The tasks ran here: nobody else needs to learn it."""


class InProcessTaskEffects(TaskOutputs):
    """Task steps done where the incarnation runs: on real records, real stores and real files."""

    def __init__(self, facts: QueryFacts, book: BatchBook, table: TaskTable, watermarks: Watermarks,
                 store_class: type[StateStore]):
        super().__init__(facts, book, table)
        self.watermarks, self.store_class = watermarks, store_class

    def step_state_load(self, b: int, p: int) -> None:
        if self.table.task(b, p).state_handed_off:
            return
        self.ensure_stores(b, p)

    def ensure_stores(self, b: int, p: int) -> None:
        """Version b of every store of partition p: the executor's cached copy, else the checkpoint.

        A partition that moved to another executor (``rebalancing.py``) finds no copy there: the old
        executor's copy is dropped and the state loads from the checkpoint."""
        for sid in self.store_ids:
            if self.cached_store(b, p, sid) is not None:
                continue
            store = self.store_class(self.storage, sid, p, self.cfg.provider, self.cfg.min_deltas_for_snapshot)
            if b > 0:
                store.load(b, self.lineage.get((sid, p, b)))
            self.stores[(sid, p)] = store
            self.table.store_executor[(sid, p)] = self.table.executor_of(b, p)

    def cached_store(self, b: int, p: int, sid: str) -> StateStore | None:
        """Store ``sid`` of partition p at version b, cached on the executor that runs p's task of batch b;
        None when that executor must load it from the checkpoint."""
        store = self.stores.get((sid, p))
        if store is None:
            return None
        if self.table.store_executor.get((sid, p)) != self.table.executor_of(b, p):
            assert b == 0 or b in store.durable_versions, \
                f"partition {p} moves at batch {b} before version {b} of store {sid} is durable"
            return None
        uid = self.lineage.get((sid, p, b))
        return store if store.version == b and (uid is None or store.uid == uid) else None

    def step_task_apply(self, b: int, p: int) -> None:
        task = self.table.task(b, p)
        if task.state_handed_off:
            return  # a retry after the async writer took the state: only the output is redone
        self.ensure_stores(b, p)  # an executor loss may have dropped them since state_load
        self.watermarks.note_watermark(b)
        records = route(batch_records(self.facts, self.book, b), self.parts)[p]
        task.before = {sid: self.stores[(sid, p)].memento() for sid in self.store_ids}
        stores = {sid: self.stores[(sid, p)] for sid in self.store_ids}
        task.result, _changes = apply_partition(self.ops, stores, rows_of(records),
                                                operator_watermarks(self.watermarks.trackers_for(b)))
        uid = self.uid(b, p)
        for sid, store in stores.items():
            task.sealed[sid] = store.seal(uid)

    def committing(self, store: str | None) -> list[str]:
        """The stores a commit step handles: its own store's, when the step is tagged with one, else all."""
        return [store] if store is not None else self.store_ids

    def step_changelog_write(self, b: int, p: int, store: str | None = None) -> None:
        task = self.tasks[(b, p)]
        for sid in self.committing(store):
            sealed = task.sealed[sid]
            if sid not in task.written or task.written[sid].uid != sealed.uid:
                self.stores[(sid, p)].write(sealed)
                task.written[sid] = sealed

    def step_state_commit(self, b: int, p: int, store: str | None = None) -> None:
        """Commit the version whose file was written: under async state checkpointing a retry may have
        re-sealed since, and the written attempt's file is the one the commit log may name.

        Under parallel store commit each store's node commits that store, and the partition's untagged
        node does nothing: it only gathers the stores' commits, since the commit log may name the
        partition's version only once every store's file is written."""
        if store is None and self.facts.shape.commit_stores:
            return
        task = self.tasks[(b, p)]
        for sid in self.committing(store):
            if sid not in task.written:
                self.stores[(sid, p)].write(task.sealed[sid])
                task.written[sid] = task.sealed[sid]
            written = task.written[sid]
            cached = self.stores.get((sid, p))
            raced = task.sealed.get(sid) is not None and task.sealed[sid].uid != written.uid
            if cached is not None and (not raced or cached.uid == written.uid):
                cached.mark_durable(written)
            self.lineage[(sid, p, b + 1)] = written.uid

    def step_snapshot_upload(self, b: int, p: int) -> None:
        for sid in self.store_ids:
            store = self.stores.get((sid, p))
            if store is not None:
                store.do_maintenance()

    def step_sink_write(self, b: int, p: int) -> None:
        task = self.tasks[(b, p)]
        rows = sink_rows(task.result.output) if task.result else []
        path = layout.sink_part_path(b, p, self.uid(b, p))
        self.storage.write(path, json.dumps(rows).encode(), overwrite=True)
        task.sink_file = path

    def zombie_material(self, b: int, p: int) -> tuple[list[SealedVersion], list[list[Any]]]:
        """What a failed attempt of task (b, p) would have written: its sealed versions and its output rows."""
        task = self.tasks.get((b, p))
        if task is None:
            return [], []
        return sealed_versions(task.sealed), sink_rows(task.result.output) if task.result else []
