"""The ``recoveries`` check (``reference/judge/fault_effects.py``): an outcome's restarts, attempts and deliveries must be
what the faults that fired explain.

Each test starts from a correct run with a fault, makes one record wrong by hand (or a fault's place), and
requires ``recoveries`` to fail, naming the fault or the batch, and no other check; the untouched outcomes pass,
and so do the legitimate variants each rule must leave alone (an error, async progress, a restart from an
existing checkpoint, a fault that shares its point with another).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from reference.language.catalogue import make
from reference.judge.fault_effects import describe, unexplained
from reference.judge.oracles import check_outcome, failures
from reference.protocol.outcome import Outcome, Recovery, SinkEntry
from reference.protocol.run import run_scenario
from streamtest import crash, fault


def run(scenario: Any) -> Outcome:
    return run_scenario(scenario).outcome()


def failed(scenario: Any, outcome: Outcome, crashes: int = 0) -> dict[str, Any]:
    return {v.check: v for v in failures(check_outcome(scenario, outcome, external_crashes=crashes))}


def only_recoveries(scenario: Any, outcome: Outcome, says: str, crashes: int = 0) -> Any:
    bad = failed(scenario, outcome, crashes)
    assert list(bad) == ["recoveries"], bad
    assert says in bad["recoveries"].message, bad["recoveries"].message
    return bad["recoveries"]


def with_batch(outcome: Outcome, batch: int, **changes: Any) -> Outcome:
    return dataclasses.replace(outcome, batches=tuple(dataclasses.replace(b, **changes) if b.id == batch else b
                                                      for b in outcome.batches))


def with_sink(outcome: Outcome, batch: int, **changes: Any) -> Outcome:
    return dataclasses.replace(outcome, sink=tuple(dataclasses.replace(e, **changes) if e.batch == batch else e
                                                   for e in outcome.sink))


@pytest.fixture(scope="module")
def crashed() -> tuple[Any, Outcome]:
    """A running count (sync, exactly-once) whose driver crashes right after writing offsets/2."""
    scenario = make("aggregate", batches=5, faults=[crash("offset_log_write", 2)])
    outcome = run(scenario)
    assert [list(r.rerun_batches) for r in outcome.recoveries] == [[2]] and outcome.batches[2].attempts == 2
    return scenario, outcome


@pytest.fixture(scope="module")
def redelivered() -> tuple[Any, Outcome]:
    """The same, crashing right after batch 2's exactly-once sink commit: the re-run delivers batch 2 again."""
    scenario = make("aggregate", batches=5, faults=[crash("sink_commit", 2)])
    outcome = run(scenario)
    assert next(e for e in outcome.sink if e.batch == 2).deliveries == 2
    return scenario, outcome


def test_the_true_outcomes_pass(crashed, redelivered):
    for scenario, outcome in (crashed, redelivered):
        assert failed(scenario, outcome) == {}
    plain = make("aggregate", batches=4)
    assert failed(plain, run(plain)) == {}


def test_describe_names_a_fault_by_index_kind_and_place():
    assert describe(3, make(faults=[crash("offset_log_write", 2)]).faults[0]) == \
        "faults[3] (driver_crash after offset_log_write of batch 2)"
    timed = make(faults=[{"at": {"time_ms": 150}, "kind": "driver_crash"}]).faults[0]
    assert describe(0, timed) == "faults[0] (driver_crash at 150 ms)"


# ------------------------------------------------------------- faults_not_fired and restart numbers


@pytest.mark.parametrize("listed", [(1,), (0, 0)])
def test_faults_not_fired_must_name_distinct_faults_of_the_scenario(crashed, listed):
    scenario, outcome = crashed
    wrong = dataclasses.replace(outcome, faults_not_fired=listed)
    only_recoveries(scenario, wrong, f"faults_not_fired {list(listed)} does not name distinct faults")


@pytest.mark.parametrize("numbers", [(2, 1), (1, 1), (1, 0)])
def test_restarts_are_numbered_in_order_each_once(crashed, numbers):
    scenario, outcome = crashed
    wrong = dataclasses.replace(outcome, recoveries=tuple(Recovery(n, 2, (2,)) for n in numbers))
    only_recoveries(scenario, wrong, f"restarts numbered {list(numbers)}", crashes=2)


def test_a_first_restart_numbered_zero_is_a_resume_and_is_allowed(crashed):
    scenario, outcome = crashed
    resumed = dataclasses.replace(outcome, recoveries=(Recovery(0, 0, ()),) + outcome.recoveries)
    assert failed(scenario, resumed) == {}


# ------------------------------------------------------------- a fault whose step ran fired


def test_an_erased_crash_listed_as_never_fired_is_convicted(crashed):
    scenario, outcome = crashed
    erased = dataclasses.replace(with_batch(outcome, 2, attempts=1), recoveries=(), faults_not_fired=(0,))
    v = only_recoveries(scenario, erased, "faults[0] (driver_crash after offset_log_write of batch 2) is listed "
                                          "as never fired, but batch 2 committed")
    assert v.batch == 2


@pytest.mark.parametrize("step, stateful, must", [  # at batch 1, which runs maintenance (every 2 batches)
    ("plan", True, True), ("offset_log_write", True, True), ("task_apply", True, True), ("sink_write", True, True),
    ("sink_commit", True, True), ("commit_log_write", True, True), ("state_load", True, True),
    ("changelog_write", True, True), ("state_commit", True, True),
    ("purge", True, False), ("source_commit", True, False), ("snapshot_upload", True, False),
    ("task_apply", False, True), ("sink_commit", False, True)])
def test_a_fault_at_a_step_every_committed_batch_runs_must_have_fired(step, stateful, must):
    """storage_latency fires and changes nothing, so the run is the same whether or not it is listed."""
    scenario = make("aggregate" if stateful else "map", batches=4,
                    faults=[fault("storage_latency", step, 1, ms=5)])
    outcome = run(scenario)
    assert outcome.faults_not_fired == () and failed(scenario, outcome) == {}
    listed = dataclasses.replace(outcome, faults_not_fired=(0,))
    if must:
        only_recoveries(scenario, listed, f"faults[0] (storage_latency before {step} of batch 1) is listed as never "
                                          f"fired, but batch 1 committed, so its {step} ran")
    else:
        assert failed(scenario, listed) == {}


def test_a_fault_of_a_batch_that_did_not_commit_or_that_waits_for_a_restart_may_stay_unfired():
    for at in ({"step": "plan", "batch": 3, "restart": 0}, {"step": "plan", "batch": 3}):
        scenario = make("aggregate", batches=4, faults=[{"at": at, "kind": "storage_latency", "ms": 5}])
        outcome = run(scenario)
        if "restart" in at:   # fired in life 0: listing it as unfired is not convicted (it names an incarnation)
            assert failed(scenario, dataclasses.replace(outcome, faults_not_fired=(0,))) == {}
        else:                 # a batch the outcome does not have
            shorter = dataclasses.replace(outcome, batches=outcome.batches[:3], sink=outcome.sink[:3],
                                          faults_not_fired=(0,))
            assert "recoveries" not in failed(scenario, shorter)


def test_two_faults_at_one_point_may_leave_the_second_unfired():
    """The first crashes the driver at the point; the second waits for the next match, which may never come."""
    scenario = make("aggregate", batches=4, faults=[crash("commit_log_write", 1),
                                                     fault("storage_latency", "commit_log_write", 1, "after", ms=5)])
    outcome = run(scenario)
    assert outcome.faults_not_fired == (1,) and failed(scenario, outcome) == {}


def test_an_unfired_fault_is_not_convicted_after_an_error_or_under_async_progress(crashed):
    scenario, outcome = crashed
    listed = dataclasses.replace(with_batch(outcome, 2, attempts=1), recoveries=(), faults_not_fired=(0,))
    assert unexplained(scenario, dataclasses.replace(listed, error="stopped")) is None
    async_progress = make("map", "async_progress", batches=6, faults=[fault("storage_latency", "plan", 2, ms=5)])
    outcome = run(async_progress)
    assert unexplained(async_progress, dataclasses.replace(outcome, faults_not_fired=(0,))) is None


# ------------------------------------------------------------- restarts the crashes bring, and no more


def test_a_crash_that_fired_brings_a_restart(crashed):
    scenario, outcome = crashed
    erased = dataclasses.replace(with_batch(outcome, 2, attempts=1), recoveries=())
    v = only_recoveries(scenario, erased, "faults[0] (driver_crash after offset_log_write of batch 2) fired (it is "
                                          "not listed as never fired), and 1 crash(es) need as many restarts; the "
                                          "outcome records 0")
    assert (v.expected, v.actual) == (1, 0)
    assert unexplained(scenario, dataclasses.replace(erased, error="stopped")) is None


def test_crashes_at_task_steps_need_one_restart_between_them_and_each_driver_crash_its_own():
    scenario = make("aggregate", batches=5, faults=[crash("task_apply", 1, partition=0),
                                                     crash("task_apply", 2, partition=1),
                                                     crash("commit_log_write", 3)])
    outcome = run(scenario)
    assert len(outcome.recoveries) == 3 and failed(scenario, outcome) == {}
    assert unexplained(scenario, restarts_kept(outcome, 2)) is None   # one for the task-step crashes, one for the other
    finding = unexplained(scenario, restarts_kept(outcome, 1))
    assert finding is not None and (finding.expected, finding.actual) == (2, 1)


def restarts_kept(outcome: Outcome, keep: int) -> Outcome:
    """``outcome`` with only its first ``keep`` restarts, the batches the others re-ran planned once less."""
    dropped = [b for r in outcome.recoveries[keep:] for b in r.rerun_batches]
    return dataclasses.replace(outcome, recoveries=outcome.recoveries[:keep], batches=tuple(
        dataclasses.replace(b, attempts=b.attempts - dropped.count(b.id)) for b in outcome.batches))


def test_a_restart_no_fired_fault_can_bring_is_convicted_unless_the_caller_crashed_it(crashed):
    scenario, outcome = crashed
    invented = dataclasses.replace(with_batch(outcome, 3, attempts=2),
                                   recoveries=outcome.recoveries + (Recovery(2, 3, (3,)),))
    v = only_recoveries(scenario, invented, "the outcome records 2 restart(s), but only 1 fault(s) that fired can "
                                            "end an incarnation")
    assert (v.expected, v.actual) == (1, 2)
    assert failed(scenario, invented, crashes=1) == {}


def test_latency_and_clock_faults_never_explain_a_restart():
    scenario = make("aggregate", batches=4, faults=[fault("storage_latency", "plan", 1, ms=5),
                                                     fault("clock_skew", "plan", 2, ms=5)])
    outcome = run(scenario)
    invented = dataclasses.replace(with_batch(outcome, 2, attempts=2), recoveries=(Recovery(1, 2, (2,)),))
    only_recoveries(scenario, invented, "1 restart(s), but only 0 fault(s)")
    finding = unexplained(scenario, invented, external_crashes=1)
    assert finding is None


def test_the_message_counts_the_crashes_from_outside(crashed):
    scenario, outcome = crashed
    invented = dataclasses.replace(outcome, recoveries=outcome.recoveries + (Recovery(2, 3, ()), Recovery(3, 3, ())))
    finding = unexplained(scenario, invented, external_crashes=1)
    assert finding is not None and "and 1 crash(es) came from outside the scenario" in finding.message
    assert (finding.expected, finding.actual) == (2, 3)


# ------------------------------------------------------------- attempts


def test_a_batch_planned_again_was_re_run_by_a_restart(crashed):
    scenario, outcome = crashed
    v = only_recoveries(scenario, with_batch(outcome, 3, attempts=2), "batch 3 was planned 2 times, but no restart "
                                                                      "re-ran it")
    assert (v.batch, v.expected, v.actual) == (3, 1, 2)


def test_under_sync_progress_a_batch_a_restart_re_ran_was_planned_again(crashed):
    scenario, outcome = crashed
    v = only_recoveries(scenario, with_batch(outcome, 2, attempts=1), "restart 1 re-ran batch 2, but the batch was "
                                                                      "planned only once")
    assert (v.batch, v.expected, v.actual) == (2, 2, 1)
    resumed = dataclasses.replace(with_batch(outcome, 2, attempts=1),
                                  recoveries=(Recovery(0, 0, ()),) + outcome.recoveries)
    assert unexplained(scenario, resumed) is None   # a resumed checkpoint: the first plan was another process's
    folded = dataclasses.replace(outcome, recoveries=(Recovery(1, 2, (2, 9)),))
    assert unexplained(scenario, folded) is None    # a re-run batch the outcome does not hold is not convicted


def test_async_progress_re_runs_are_not_held_to_a_second_plan():
    scenario = make("map", "async_progress", batches=6, faults=[crash("offset_log_write", 3)])
    outcome = run(scenario)
    assert outcome.recoveries and failed(scenario, outcome) == {}
    rerun = outcome.recoveries[0].rerun_batches
    once = dataclasses.replace(outcome, batches=tuple(dataclasses.replace(b, attempts=1) if b.id in rerun else b
                                                      for b in outcome.batches))
    assert unexplained(scenario, once) is None


# ------------------------------------------------------------- deliveries


def test_a_second_exactly_once_delivery_needs_a_re_run(crashed):
    scenario, outcome = crashed
    entry = next(e for e in outcome.sink if e.batch == 1)
    twice = with_sink(outcome, 1, deliveries=2, delivery_digests=entry.delivery_digests * 2)
    v = only_recoveries(scenario, twice, "batch 1 was delivered 2 times, but it was never re-run")
    assert (v.batch, v.expected, v.actual) == (1, 1, 2)
    replanned = dataclasses.replace(with_batch(twice, 1, attempts=2),
                                    recoveries=outcome.recoveries + (Recovery(2, 1, (1,)),))
    assert failed(scenario, replanned, crashes=1) == {}


def test_an_exactly_once_batch_has_one_delivery_digest_per_delivery(redelivered):
    scenario, outcome = redelivered
    entry = next(e for e in outcome.sink if e.batch == 2)
    v = only_recoveries(scenario, with_sink(outcome, 2, delivery_digests=entry.delivery_digests[:1]),
                        "batch 2 was delivered 2 times, with 1 delivery digest(s)")
    assert (v.expected, v.actual) == (2, 1)
    assert unexplained(scenario, with_sink(outcome, 2, delivery_digests=())) is None   # a backend without digests


def test_at_least_once_deliveries_are_explained_by_a_re_run_or_a_retry():
    scenario = make("aggregate", batches=4, sink="at_least_once")
    outcome = run(scenario)
    twice = with_sink(outcome, 1, deliveries=2)
    only_recoveries(scenario, twice, "batch 1 was delivered 2 times, but it was never re-run or retried")
    assert unexplained(scenario, with_batch(twice, 1, task_retries=1)) is None
    zombie = make("aggregate", batches=4, sink="at_least_once", faults=[fault("zombie_write", "sink_write", 1,
                                                                              partition=0)])
    zombied = run(zombie)
    assert next(e for e in zombied.sink if e.batch == 1).deliveries == 2 and failed(zombie, zombied) == {}
    unreported = with_batch(zombied, 1, task_retries=0)   # a backend that does not count its task retries
    assert unexplained(zombie, unreported) is None
    elsewhere = make("aggregate", batches=4, sink="at_least_once", faults=[fault("zombie_write", "sink_write", 2,
                                                                                 partition=0)])
    finding = unexplained(elsewhere, unreported)
    assert finding is not None and "batch 1 was delivered 2 times" in finding.message
    at_a_time = make("aggregate", batches=4, sink="at_least_once",
                     faults=[{"at": {"time_ms": 100}, "kind": "task_failure"}])
    assert unexplained(at_a_time, unreported) is None   # a fault at a time may have failed any task
    exactly_once = make("aggregate", batches=4)
    retried = with_batch(with_sink(run(exactly_once), 1, deliveries=2), 1, task_retries=1)
    finding = unexplained(exactly_once, retried)   # a retried task never commits an exactly-once batch twice
    assert finding is not None and "never re-run" in finding.message


# ------------------------------------------------------------- what a crash at a point must leave


@pytest.mark.parametrize("step, when", [("plan", "after"), ("offset_log_write", "before"),
                                        ("offset_log_write", "after"), ("sink_commit", "before"),
                                        ("sink_commit", "after"), ("commit_log_write", "before")])
def test_a_crash_between_plan_and_commit_re_runs_its_batch(step, when):
    scenario = make("aggregate", batches=5, faults=[crash(step, 2, when)])
    outcome = run(scenario)
    assert 2 in outcome.recoveries[0].rerun_batches and failed(scenario, outcome) == {}
    elsewhere = dataclasses.replace(outcome, recoveries=(Recovery(1, 3, (3,)),))
    elsewhere = with_batch(with_batch(elsewhere, 2, attempts=1), 3, attempts=2)
    if step == "sink_commit" and when == "after" or step == "commit_log_write":   # the second delivery moves too
        elsewhere = with_sink(with_sink(elsewhere, 2, deliveries=1, delivery_digests=()), 3, deliveries=2,
                              delivery_digests=())
    v = only_recoveries(scenario, elsewhere, f"fired while batch 2 was planned and not committed, but no restart "
                                             "re-ran batch 2")
    assert v.batch == 2


@pytest.mark.parametrize("step, when", [("plan", "before"), ("commit_log_write", "after"),
                                        ("source_commit", "before")])
def test_a_crash_outside_that_span_is_not_held_to_re_run_its_batch(step, when):
    scenario = make("aggregate", batches=5, faults=[crash(step, 2, when)])
    outcome = run(scenario)
    assert 2 not in {b for r in outcome.recoveries for b in r.rerun_batches}
    assert failed(scenario, outcome) == {}


@pytest.mark.parametrize("step, when", [("sink_commit", "after"), ("commit_log_write", "before")])
def test_a_crash_after_an_exactly_once_sink_commit_delivers_the_batch_again(step, when):
    scenario = make("aggregate", batches=5, faults=[crash(step, 2, when)])
    outcome = run(scenario)
    assert failed(scenario, outcome) == {}
    once = with_sink(outcome, 2, deliveries=1, delivery_digests=())
    v = only_recoveries(scenario, once, f"fired after batch 2's sink commit, so its re-run delivered it again; the "
                                        "outcome records 1 delivery(ies)")
    assert (v.expected, v.actual) == (2, 1)
    at_least_once = make("aggregate", batches=5, sink="at_least_once", faults=[crash(step, 2, when)])
    alo = run(at_least_once)
    assert unexplained(at_least_once, with_sink(alo, 2, deliveries=1)) is None


def test_the_crash_rules_stand_aside_after_an_error_a_damage_fault_or_under_async_progress(crashed):
    scenario, outcome = crashed
    moved = dataclasses.replace(outcome, recoveries=(Recovery(1, 3, (3,)),))
    moved = with_batch(with_batch(moved, 2, attempts=1), 3, attempts=2)
    assert unexplained(scenario, dataclasses.replace(moved, error="stopped")) is None
    damaged = make("aggregate", batches=5, faults=[crash("offset_log_write", 2),
                                                    {"at": {"step": "plan", "batch": 4}, "kind": "delete_file",
                                                     "path": "commits/0"}])
    assert unexplained(damaged, moved) is None
    async_progress = make("map", "async_progress", batches=6, faults=[crash("offset_log_write", 3)])
    outcome = run(async_progress)
    nothing_re_run = dataclasses.replace(outcome, recoveries=(Recovery(1, 5, ()),), batches=tuple(
        dataclasses.replace(b, attempts=1) for b in outcome.batches))
    assert unexplained(async_progress, nothing_re_run) is None


def test_sink_entries_of_other_kinds_change_nothing():
    """A SinkEntry with one delivery and no digests is what a backend without digests reports."""
    scenario = make("aggregate", batches=3)
    outcome = run(scenario)
    plain = dataclasses.replace(outcome, sink=tuple(SinkEntry(e.batch, e.rows) for e in outcome.sink))
    assert unexplained(scenario, plain) is None


def test_findings_are_frozen(crashed):
    import dataclasses
    scenario, outcome = crashed
    finding = unexplained(scenario, dataclasses.replace(outcome, recoveries=()))
    assert finding is not None
    with pytest.raises(dataclasses.FrozenInstanceError):
        finding.batch = 0   # type: ignore[misc]


def test_without_crashes_from_outside_an_invented_restart_is_unexplained(crashed):
    scenario, outcome = crashed
    invented = dataclasses.replace(outcome, recoveries=outcome.recoveries + (Recovery(2, 3, ()),))
    assert unexplained(scenario, invented) is not None
    assert unexplained(scenario, invented, external_crashes=1) is None


def test_a_fault_is_held_to_fire_unless_another_waits_at_the_very_same_point():
    """Two latency faults before plan, of batches 1 and 2, or before plan of 1 and task_apply of 1: each alone at
    its point, so either listed as unfired is convicted; the first listed that may stay unfired is passed over."""
    for second in (fault("storage_latency", "plan", 2, ms=5), fault("storage_latency", "task_apply", 1, ms=5),
                   fault("storage_latency", "plan", 1, "after", ms=5)):
        scenario = make("aggregate", batches=4, faults=[fault("storage_latency", "plan", 1, ms=5), second])
        outcome = run(scenario)
        assert outcome.faults_not_fired == () and failed(scenario, outcome) == {}
        finding = unexplained(scenario, dataclasses.replace(outcome, faults_not_fired=(0,)))
        assert finding is not None and finding.message.startswith("faults[0] (storage_latency before plan of batch 1)")
    scenario = make("aggregate", batches=4, faults=[fault("storage_latency", "purge", 1, ms=5),
                                                     fault("storage_latency", "plan", 2, ms=5)])
    both = dataclasses.replace(run(scenario), faults_not_fired=(0, 1))
    finding = unexplained(scenario, both)
    assert finding is not None and finding.message.startswith("faults[1] (storage_latency before plan of batch 2)")


def test_the_first_crash_needing_a_restart_is_named():
    scenario = make("aggregate", batches=5, faults=[crash("offset_log_write", 1), crash("commit_log_write", 3)])
    outcome = run(scenario)
    assert len(outcome.recoveries) == 2 and failed(scenario, outcome) == {}
    erased = restarts_kept(outcome, 0)
    finding = unexplained(scenario, erased)
    assert finding is not None and finding.message.startswith("faults[0] (driver_crash after offset_log_write of "
                                                              "batch 1) fired")
    assert (finding.expected, finding.actual) == (2, 0)


def test_a_crash_rule_passes_over_a_fault_that_is_not_a_crash():
    scenario = make("aggregate", batches=5, faults=[fault("storage_latency", "plan", 1, ms=5),
                                                     crash("offset_log_write", 2)])
    outcome = run(scenario)
    assert failed(scenario, outcome) == {}
    moved = dataclasses.replace(outcome, recoveries=(Recovery(1, 3, (3,)),))
    moved = with_batch(with_batch(moved, 2, attempts=1), 3, attempts=2)
    finding = unexplained(scenario, moved)
    assert finding is not None and finding.message.startswith("faults[1] (driver_crash after offset_log_write")


def test_a_redelivery_of_a_batch_missing_from_the_sink_counts_none(redelivered):
    scenario, outcome = redelivered
    gone = dataclasses.replace(outcome, sink=tuple(e for e in outcome.sink if e.batch != 2))
    finding = unexplained(scenario, gone)
    assert finding is not None and finding.message.endswith("the outcome records 0 delivery(ies)")
    assert (finding.expected, finding.actual) == (2, 0)
