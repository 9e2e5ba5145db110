"""Faults that can never fire, or never end, refused when the scenario is read (spec section 2).

A fault that no step of any run can match tests nothing, and a run that
carries it says so only in its outcome's ``faults_not_fired``. Where the
scenario alone shows that it cannot fire, ``Scenario.from_dict`` refuses it,
naming the fault:

- a fault at a step of a batch past the last batch any backend can cut: a
  generated source's ``batches`` (``Scenario.check_faults``); for the other
  sources, the batches of fixed cuts, or under the trigger's cuts (every
  batch takes at least one new record) one per record; in real-time mode,
  the deadlines up to the last arrival;
- a fault at a step only a stateful query runs (``state_load``,
  ``changelog_write``, ``state_commit``, ``snapshot_upload``) on a stateless
  one; ``snapshot_upload`` under the ``snapshot`` provider, which has no
  maintenance;
- a time past ``MAX_TIME_MS``;
- a ``storage_latency`` longer than ``MAX_LATENCY_FAULT_MS``: a backend that
  sleeps it (the Spark engine) would not finish; a ``clock_skew`` past
  ``MAX_TIME_MS``.

What only a run can tell (a time past the end of that run, a maintenance
round a timed backend skipped) is reported after the run, on screen.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping, Protocol, Sequence

from .engine_config import EngineConfig
from .fault_spec import Fault
from .operator_spec import OperatorSpec
from .source_spec import MAX_TIME_MS, Source, source_batches, source_records

MAX_LATENCY_FAULT_MS = 3_600_000   # an hour: a storage_latency fault a backend sleeps must end
STATEFUL_STEPS = ("state_load", "changelog_write", "state_commit", "snapshot_upload")


class Scenario(Protocol):
    """What of a ``reference.language.scenario.Scenario`` the check reads: its parts, so ``scenario.py`` (which calls the
    check while it reads a scenario) and this module do not import each other."""

    @property
    def sources(self) -> Mapping[str, Source]: ...
    @property
    def faults(self) -> Sequence[Fault]: ...
    @property
    def engine(self) -> EngineConfig: ...
    @property
    def operator(self) -> OperatorSpec: ...
    @property
    def store_ids(self) -> tuple[str, ...]: ...


def last_batch(scenario: Scenario) -> int:
    """One past the highest batch id any backend can run: fixed cuts give ``size.source_batches``; a timed
    backend cutting by its trigger takes at least one new record per batch."""
    if scenario.engine.real_time:   # every backend ends a real-time batch at its deadline (real_time.deadline_ms)
        step_ms = scenario.engine.real_time_step_ms
        return max(source_batches(replace(src, batch_ms=step_ms)) for src in scenario.sources.values())
    fixed = scenario.engine.batch_cuts == "fixed"
    return max(source_batches(src) if fixed or src.kind == "generated" else
               max(source_batches(src), source_records(src))
               for src in scenario.sources.values())


def unreachable(scenario: Scenario) -> tuple[str, str] | None:
    """(field, why) of the first fault the scenario shows can never fire or never end, or None."""
    end = last_batch(scenario)
    for i, fault in enumerate(scenario.faults):
        where, at = f"faults[{i}]", fault.at
        if at.time_ms is not None and at.time_ms > MAX_TIME_MS:
            return f"{where}.at.time_ms", f"{at.time_ms} ms never comes: times are at most {MAX_TIME_MS} ms"
        if fault.kind == "storage_latency" and fault.ms is not None and fault.ms > MAX_LATENCY_FAULT_MS:
            return f"{where}.ms", (f"a storage_latency of {fault.ms} ms: at most {MAX_LATENCY_FAULT_MS} ms (an "
                                   "hour), since a backend that sleeps it must finish")
        if fault.kind == "clock_skew" and fault.ms is not None and abs(fault.ms) > MAX_TIME_MS:
            return f"{where}.ms", f"a clock_skew of {fault.ms} ms: at most {MAX_TIME_MS} ms"
        if at.step in STATEFUL_STEPS and not scenario.store_ids:
            return f"{where}.at.step", (f"{at.step} never runs: the query ({scenario.operator.kind}) keeps no "
                                        "state, so this fault could never fire")
        if at.step == "snapshot_upload" and scenario.engine.provider == "snapshot":
            return f"{where}.at.step", ("snapshot_upload never runs under the snapshot provider (a snapshot is "
                                        "written at every commit, with no maintenance)")
        if at.batch is not None and at.batch >= end:
            return f"{where}.at.batch", (f"batch {at.batch} never runs: no backend cuts more than {end} batches "
                                         f"(0..{end - 1}) from this input")
    return None
