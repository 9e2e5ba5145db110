"""What the faults that fired must have left in an outcome: its restarts, re-runs, attempts and deliveries.

An outcome says which of its scenario's faults never fired (``faults_not_fired``)
and records every restart (``recoveries``), how often each batch was planned
(``attempts``) and delivered (``deliveries``). These must be what the faults
explain, on every backend (they all record them through ``observer.py``):

- a fault at a step every committed batch runs, of a batch the outcome
  committed, fired (no other fault waits at its point, none names an
  incarnation; sync progress, where every committed batch ran each of these
  steps to its commit);
- each ``driver_crash`` that fired at a driver step ended an incarnation, so
  the outcome records a restart for it (and one for the task-step crashes);
- no restart without a fault that can end an incarnation (``storage_latency``
  and ``clock_skew`` never do), beyond the crashes the caller caused itself
  (``external_crashes``: the explorer's crash cuts);
- a batch planned more than once was re-run by a restart; under sync progress
  a batch a restart re-ran was planned again;
- a batch delivered more than once was re-run (exactly-once: its commit is
  replaced by batch id), or retried (at-least-once: a retried task's part file
  stays beside the retry's; a fault that fired in one of the batch's tasks
  fails an attempt, which Spark retries); an exactly-once batch has one
  delivery digest per delivery;
- under sync progress a ``driver_crash`` between ``plan`` and ``commits/b``
  of batch b (at a driver step) makes a restart re-run b, and one after b's
  exactly-once ``sink_commit`` delivers b a second time.

``unexplained`` returns the first of these an outcome breaks, as a
``Finding`` naming the fault (``faults[i]``), the batch or the restart.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..protocol.outcome import Outcome
from ..language.scenario import Fault, Scenario
from ..language.steps import DRIVER_STEPS, TASK_STEPS

QUIET_KINDS = ("storage_latency", "clock_skew")            # faults that never end an incarnation
DAMAGE_KINDS = ("corrupt_file", "delete_file")
# steps every batch a sync run committed ran, in the incarnation that committed it (a stateful query's task
# steps too); a fault there, at a committed batch, must have fired
EVERY_BATCH_STEPS = ("plan", "offset_log_write", "task_apply", "sink_write", "sink_commit", "commit_log_write")
STATEFUL_STEPS = ("state_load", "changelog_write", "state_commit")
# driver-step points between planning batch b and writing commits/b: a crash there leaves b to re-run
RERUN_POINTS = (("plan", "after"), ("offset_log_write", "before"), ("offset_log_write", "after"),
                ("sink_commit", "before"), ("sink_commit", "after"), ("commit_log_write", "before"))
# ... of which those after b's exactly-once sink commit: the re-run commits b's output a second time
REDELIVERY_POINTS = (("sink_commit", "after"), ("commit_log_write", "before"))


@dataclass(frozen=True)
class Finding:
    """What an outcome's record of restarts, attempts or deliveries gets wrong."""

    message: str
    batch: int | None = None
    expected: Any = None
    actual: Any = None


def describe(i: int, fault: Fault) -> str:
    """``faults[1] (driver_crash after offset_log_write of batch 3)``."""
    at = fault.at
    where = f"{at.when} {at.step} of batch {at.batch}" if at.step else f"at {at.time_ms} ms"
    return f"faults[{i}] ({fault.kind} {where})"


def unexplained(scenario: Scenario, outcome: Outcome, external_crashes: int = 0) -> Finding | None:
    """The first record of ``outcome`` the faults of ``scenario`` that fired do not explain, or None."""
    faults = scenario.faults
    bad = [i for i in outcome.faults_not_fired if i >= len(faults)]
    if bad or len(set(outcome.faults_not_fired)) != len(outcome.faults_not_fired):
        return Finding(f"faults_not_fired {list(outcome.faults_not_fired)} does not name distinct faults of the "
                       f"scenario's {len(faults)}", actual=list(outcome.faults_not_fired))
    fired = [i for i in range(len(faults)) if i not in outcome.faults_not_fired]
    return (_numbering(outcome) or _unfired(scenario, outcome) or _restarts(scenario, outcome, fired,
                                                                           external_crashes)
            or _replanned(scenario, outcome) or _redelivered(scenario, outcome, fired)
            or _crash_reruns(scenario, outcome, fired))


def _numbering(outcome: Outcome) -> Finding | None:
    numbers = [r.restart for r in outcome.recoveries]
    if numbers != sorted(set(numbers)):   # so 0 (a resume of an existing checkpoint) can only come first
        return Finding(f"restarts numbered {numbers}: each restart starts the next incarnation", actual=numbers)
    return None


def _unfired(scenario: Scenario, outcome: Outcome) -> Finding | None:
    """A fault listed as never fired although its step ran: at a committed batch, alone at its point."""
    if outcome.error or scenario.engine.progress_mode != "sync":
        return None
    steps = EVERY_BATCH_STEPS + (STATEFUL_STEPS if scenario.store_ids else ())
    committed = {b.id for b in outcome.batches}
    for i in outcome.faults_not_fired:
        at = scenario.faults[i].at
        if at.step not in steps or at.restart is not None or at.batch not in committed:
            continue
        shared = [f for f in scenario.faults if f.at.step == at.step and f.at.batch == at.batch
                  and f.at.when == at.when]
        if len(shared) == 1:
            return Finding(f"{describe(i, scenario.faults[i])} is listed as never fired, but batch {at.batch} "
                           f"committed, so its {at.step} ran", batch=at.batch)
    return None


def _restarts(scenario: Scenario, outcome: Outcome, fired: list[int], external_crashes: int) -> Finding | None:
    """As many restarts as the crashes that fired bring, and no more than the faults that fired can."""
    restarts = [r for r in outcome.recoveries if r.restart >= 1]
    crashes = [i for i in fired if scenario.faults[i].kind == "driver_crash" and scenario.faults[i].at.step]
    at_driver = [i for i in crashes if scenario.faults[i].at.step in DRIVER_STEPS]
    needed = len(at_driver) + (len(crashes) > len(at_driver))
    if not outcome.error and len(restarts) < needed:
        return Finding(f"{describe(crashes[0], scenario.faults[crashes[0]])} fired (it is not listed as never "
                       f"fired), and {needed} crash(es) need as many restarts; the outcome records "
                       f"{len(restarts)}", expected=needed, actual=len(restarts))
    able = [i for i in fired if scenario.faults[i].kind not in QUIET_KINDS]
    if len(restarts) > len(able) + external_crashes:
        return Finding(f"the outcome records {len(restarts)} restart(s), but only {len(able)} fault(s) that fired "
                       f"can end an incarnation" + (f", and {external_crashes} crash(es) came from outside the "
                                                    "scenario" if external_crashes else ""),
                       expected=len(able) + external_crashes, actual=len(restarts))
    return None


def _replanned(scenario: Scenario, outcome: Outcome) -> Finding | None:
    """A batch planned again was re-run by a restart, and (sync) one a restart re-ran was planned again."""
    rerun = {b for r in outcome.recoveries for b in r.rerun_batches}
    for batch in outcome.batches:
        if batch.attempts > 1 and batch.id not in rerun:
            return Finding(f"batch {batch.id} was planned {batch.attempts} times, but no restart re-ran it",
                           batch=batch.id, expected=1, actual=batch.attempts)
    resumed = any(r.restart == 0 for r in outcome.recoveries)   # a checkpoint this run did not write
    if scenario.engine.progress_mode != "sync" or resumed:
        return None
    attempts = {b.id: b.attempts for b in outcome.batches}
    for r in outcome.recoveries:
        for b in r.rerun_batches:
            if b in attempts and attempts[b] < 2:
                return Finding(f"restart {r.restart} re-ran batch {b}, but the batch was planned only once",
                               batch=b, expected=2, actual=attempts[b])
    return None


def _redelivered(scenario: Scenario, outcome: Outcome, fired: list[int]) -> Finding | None:
    """A batch delivered more than once was re-run (or, at-least-once, retried: a task whose attempt failed,
    or a fault that fired in a task of the batch, which fails the attempt); one digest per delivery."""
    # a batch planned twice is in a restart's re-runs (``_replanned``), so the re-runs are every re-planned batch
    rerun: set[int | None] = {b for r in outcome.recoveries for b in r.rerun_batches}
    once = scenario.sink_mode == "exactly_once"
    if not once:
        if any(scenario.faults[i].at.step is None for i in fired):
            return None   # a fault at a time may have failed any task
        rerun |= {b.id for b in outcome.batches if b.task_retries > 0}
        rerun |= {scenario.faults[i].at.batch for i in fired if scenario.faults[i].at.step in TASK_STEPS}
    for entry in outcome.sink:
        if entry.deliveries > 1 and entry.batch not in rerun:
            how = "re-run" if once else "re-run or retried"
            return Finding(f"batch {entry.batch} was delivered {entry.deliveries} times, but it was never {how}",
                           batch=entry.batch, expected=1, actual=entry.deliveries)
        if once and entry.delivery_digests and len(entry.delivery_digests) != entry.deliveries:
            return Finding(f"batch {entry.batch} was delivered {entry.deliveries} times, with "
                           f"{len(entry.delivery_digests)} delivery digest(s)", batch=entry.batch,
                           expected=entry.deliveries, actual=len(entry.delivery_digests))
    return None


def _crash_reruns(scenario: Scenario, outcome: Outcome, fired: list[int]) -> Finding | None:
    """Sync progress: a crash that fired between planning b and commits/b re-ran b; after b's exactly-once
    sink commit, it delivered b again. (Damage faults can take the manifest that counts deliveries.)"""
    if outcome.error or scenario.engine.progress_mode != "sync" \
            or any(f.kind in DAMAGE_KINDS for f in scenario.faults):
        return None
    rerun = {b for r in outcome.recoveries for b in r.rerun_batches}
    deliveries = {e.batch: e.deliveries for e in outcome.sink}
    for i in fired:
        fault = scenario.faults[i]
        point = (fault.at.step, fault.at.when)
        if fault.kind != "driver_crash" or point not in RERUN_POINTS:
            continue
        b = fault.at.batch
        if b not in rerun:
            return Finding(f"{describe(i, fault)} fired while batch {b} was planned and not committed, but no "
                           f"restart re-ran batch {b}", batch=b, actual=sorted(rerun))
        delivered = deliveries.get(b, 0)
        if scenario.sink_mode == "exactly_once" and point in REDELIVERY_POINTS and delivered < 2:
            return Finding(f"{describe(i, fault)} fired after batch {b}'s sink commit, so its re-run delivered it "
                           f"again; the outcome records {delivered} delivery(ies)", batch=b, expected=2,
                           actual=delivered)
    return None
