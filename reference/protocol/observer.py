"""What an outside observer sees across incarnations, and the outcome built from it (spec section 4).

The observer survives driver crashes: it is the client that watched the query,
not part of the query. It records each planned batch, each restart and which
batches the restart re-ran, each progress event and each exactly-once
delivery. ``build_outcome`` joins that with what the checkpoint holds
(retained state versions, the visible sink, the file list) into an ``Outcome``;
every backend builds its outcome with it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from .outcome import BatchRecord, Outcome, ProgressEvent, Recovery, StateMove, Timing
from .sink_files import visible_output
from .query import pipeline_store_ids
from .recovery import RestartPlan
from .retained import retained_states
from ..language.scenario import Scenario
from .storage import Storage


@dataclass
class Observer:
    """The batch history, recoveries, progress and deliveries of one query, across incarnations."""

    batches: dict[int, dict[str, Any]] = field(default_factory=dict)
    recoveries: list[Recovery] = field(default_factory=list)
    progress: list[ProgressEvent] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    attempts: dict[int, int] = field(default_factory=dict)
    deliveries: dict[int, list[str]] = field(default_factory=dict)
    faults_not_fired: list[int] = field(default_factory=list)   # indexes into the scenario's faults
    moves: dict[tuple[int, int], StateMove] = field(default_factory=dict)   # (batch, partition) -> move

    def moved(self, batch: int, moves: tuple[StateMove, ...]) -> None:
        """``plan`` of ``batch`` placed these partitions on another executor than the batch before."""
        for move in moves:
            self.moves[(batch, move.partition)] = move

    def note(self, text: str) -> None:
        self.events.append(text)

    def planned(self, batch: int, start: tuple[int, ...], end: tuple[int, ...], incarnation: int,
                rerun: bool) -> None:
        """``plan`` of a batch ran: a new attempt of it, with these boundaries."""
        self.attempts[batch] = self.attempts.get(batch, 0) + 1
        self.batches[batch] = {"id": batch, "start_offsets": list(start), "end_offsets": list(end),
                               "attempts": self.attempts[batch], "watermark_ms": None,
                               "incarnation": incarnation, "rerun": rerun}

    def committed(self, batch: int, watermark_ms: int, event: ProgressEvent) -> None:
        """The batch is committed: record its watermark and progress event."""
        self.batches[batch]["watermark_ms"] = watermark_ms
        self.progress.append(event)

    def record_recovery(self, restart: RestartPlan, number: int) -> None:
        """Incarnation ``number`` resumes from ``restart``: which batches it re-runs, and forget the dropped ones."""
        dropped = sorted(b for b in self.batches if b > restart.kept_through)
        folded = range(restart.kept_through + 1, max(restart.fixed_offsets, default=restart.kept_through) + 1)
        rerun = tuple(sorted(set(dropped) | set(folded)))
        self.recoveries.append(Recovery(number, restart.first_batch, rerun))
        for b in dropped:
            self.batches.pop(b)
        for key in [key for key in self.moves if key[0] > restart.kept_through]:
            self.moves.pop(key)   # re-planned, and recorded again, by the re-run


def build_outcome(scenario: Scenario, storage: Storage, observer: Observer, error: str | None, *,
                  backend: str = "reference", timing: Timing | None = None,
                  details: Mapping[str, Any] | None = None) -> Outcome:
    """The outcome of a run: the observer's history joined with what the checkpoint holds."""
    store_ids = pipeline_store_ids(scenario.operator.flatten())
    state, state_errors = retained_states(storage, store_ids, scenario.state_partitions,
                                          scenario.engine.min_batches_to_retain)
    batches = tuple(BatchRecord(b, tuple(rec["end_offsets"]), tuple(rec["start_offsets"]), rec.get("watermark_ms"),
                                rec["attempts"], rec.get("task_retries", 0))
                    for b, rec in sorted(observer.batches.items()) if "end_offsets" in rec)
    return Outcome(scenario.name, backend, batches, state, visible_output(storage, scenario.sink_mode,
                                                                          observer.deliveries),
                   tuple(observer.recoveries), tuple(observer.progress), tuple(storage.list()), scenario.seed, error,
                   tuple(state_errors), timing, dict(details or {}), tuple(observer.faults_not_fired),
                   tuple(observer.moves[key] for key in sorted(observer.moves)))
