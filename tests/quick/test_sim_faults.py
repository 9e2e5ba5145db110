"""Faults in the simulator: at a time they respect ``at.restart``; at a step they cost simulated time.

A fault with ``at.restart = k`` fires at the first instant at or after its
``time_ms`` at which incarnation ``k`` is running: at ``time_ms`` if ``k`` runs
then, when ``k`` starts if that is later, never if ``k`` ended before
``time_ms`` or never starts. A fault at a step is decided by the reference's
``apply_fault`` and charged on the simulated clock; the restarts are the
reference's ``Supervisor``, with its one give-up message.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from reference.judge.oracles import check_outcome, failures
from reference.language.scenario import Scenario, ScenarioError
from reference.protocol.supervisor import MAX_RESTARTS, gave_up_message
from sim import shipped_profile, simulate
from sim.simulation import Simulation, resolve_profile


def scenario(*faults: dict[str, Any], partitions: int = 2, batches: int = 6, step_ms: int = 20) -> Scenario:
    """A running count over ``partitions`` source and state partitions; a record every ``step_ms``."""
    return Scenario.from_dict({
        "name": "sim-faults", "seed": 5,
        "source": {"kind": "generated", "partitions": partitions, "keys": 8, "records_per_partition_per_batch": 5,
                   "batches": batches, "event_time": {"start_ms": 0, "step_ms": step_ms}},
        "query": {"operator": {"kind": "aggregate", "agg": "count"}, "state_partitions": partitions},
        "sink": {"mode": "exactly_once"}, "engine": {}, "faults": list(faults)})


def crash_at(time_ms: float, restart: int | None = None) -> dict[str, Any]:
    at: dict[str, Any] = {"time_ms": int(time_ms)}
    if restart is not None:
        at["restart"] = restart
    return {"at": at, "kind": "driver_crash"}


STEP_CRASH = {"at": {"step": "commit_log_write", "batch": 1}, "kind": "driver_crash"}


def run(sc: Scenario) -> Simulation:
    sim = simulate(sc)
    outcome = sim.outcome()
    assert outcome.error is None
    assert not failures(check_outcome(sc, outcome, sim.storage)), "every oracle must hold"
    return sim


def starts(sim: Simulation) -> list[float]:
    """When each incarnation started."""
    return [e.time_ms for e in sim.trace if e.component == "supervisor" and e.action == "start"]


def crashes(sim: Simulation) -> list[float]:
    """When a driver crash at a time fired (a crash at a step is traced with the step instead)."""
    return [e.time_ms for e in sim.trace if e.component == "faults" and e.action == "driver_crash"
            and e.detail.startswith("at time_ms")]


def test_time_crash_fires_only_in_its_incarnation() -> None:
    clean = run(scenario())
    middle = clean.end_ms / 2
    assert len(run(scenario(crash_at(middle))).outcome().recoveries) == 1
    assert len(run(scenario(crash_at(middle, restart=0))).outcome().recoveries) == 1
    with pytest.raises(ScenarioError, match="restart 1 never comes"):   # no incarnation 1 without another fault
        scenario(crash_at(middle, restart=1))


def test_time_crash_waits_for_its_incarnation_to_start() -> None:
    once = run(scenario(STEP_CRASH))
    first, second = starts(once)
    assert first < second
    # due before incarnation 1 starts: fires as it starts
    early = run(scenario(STEP_CRASH, crash_at(first, restart=1)))
    assert crashes(early) == [second]
    assert [r.restart for r in early.outcome().recoveries] == [1, 2]
    # due while incarnation 1 runs: fires then
    during = int(second + (once.end_ms - second) / 2)
    late = run(scenario(STEP_CRASH, crash_at(during, restart=1)))
    assert crashes(late) == [during]
    assert len(late.outcome().recoveries) == 2


def test_time_crash_for_an_ended_incarnation_never_fires() -> None:
    once = run(scenario(STEP_CRASH))
    first, second = starts(once)
    after_first = run(scenario(STEP_CRASH, crash_at((first + second) / 2 + 1, restart=0)))
    assert crashes(after_first) == []
    assert after_first.outcome().recoveries == once.outcome().recoveries
    too_late = run(scenario(STEP_CRASH, crash_at(once.end_ms + 1, restart=1)))
    assert crashes(too_late) == [] and len(too_late.outcome().recoveries) == 1
    assert too_late.outcome().faults_not_fired == (1,)   # the outcome says the timed crash never fired


def test_time_latency_spike_respects_restart() -> None:
    clean = run(scenario())
    spike = {"at": {"time_ms": 0}, "kind": "storage_latency", "ms": 3000}
    slowed = run(scenario(spike))
    assert slowed.end_ms > clean.end_ms
    with pytest.raises(ScenarioError, match="restart 1 never comes"):
        scenario({**spike, "at": {"time_ms": 0, "restart": 1}})
    second_life = run(scenario(STEP_CRASH, {**spike, "at": {"time_ms": 0, "restart": 1}}))
    assert second_life.end_ms > run(scenario(STEP_CRASH)).end_ms


def test_time_fault_at_a_step_respects_restart() -> None:
    """Other kinds at a time fire at the first step at or after it, in their incarnation only."""
    def fired(sim: Simulation) -> list[str]:
        return [e.detail for e in sim.trace if e.component == "faults" and e.action == "storage_write_error"]

    fault = {"at": {"time_ms": 0}, "kind": "storage_write_error"}
    assert fired(run(scenario(fault)))
    with pytest.raises(ScenarioError, match="restart 1 never comes"):
        scenario({**fault, "at": {"time_ms": 0, "restart": 1}})
    second_life = run(scenario(STEP_CRASH, {**fault, "at": {"time_ms": 0, "restart": 1}}))
    assert len(fired(second_life)) == 1


def steady(*faults: dict[str, Any]) -> Scenario:
    """One state partition, all input there at time 0: every step is on the critical path."""
    return scenario(*faults, partitions=1, batches=3, step_ms=0)


def test_step_faults_charge_their_simulated_time() -> None:
    """``apply_fault``'s decisions, on the simulated clock: a slow write takes its ``ms``, a retried task its
    rescheduling (``retry_cost_ms``), an executor loss also a new executor's ``executor_replacement_ms``."""
    profile = shipped_profile("lightspeed_cluster")
    profile = replace(profile, storage=replace(profile.storage, jitter_sigma=0.0), straggler_probability=0.0)
    clean = simulate(steady(), profile).end_ms
    slow = simulate(steady({"at": {"step": "commit_log_write", "batch": 1}, "kind": "storage_latency", "ms": 700}),
                    profile)
    assert slow.end_ms - clean == pytest.approx(700)
    retry_ms = profile.scheduling_delay_ms + profile.network_rtt_ms + profile.per_task_overhead_ms
    task = {"at": {"step": "task_apply", "batch": 1, "partition": 0}, "kind": "task_failure"}
    failed = simulate(steady(task), profile)
    assert failed.outcome().error is None and failed.end_ms - clean == pytest.approx(retry_ms)
    lost = simulate(steady({**task, "kind": "executor_loss"}), profile)
    assert lost.end_ms - clean == pytest.approx(retry_ms + profile.executor_replacement_ms)


def test_a_query_that_never_survives_gives_up_with_the_one_message() -> None:
    """The restart loop is the reference's ``Supervisor``: after ``MAX_RESTARTS`` restarts it gives up."""
    crashes = [{"at": {"step": "plan", "batch": 0, "restart": life}, "kind": "driver_crash"}
               for life in range(MAX_RESTARTS + 1)]
    sim = simulate(steady(*crashes))
    outcome = sim.outcome()
    assert outcome.error == gave_up_message()
    assert len(outcome.recoveries) == MAX_RESTARTS + 1
    assert starts(sim) == sorted(starts(sim)) and len(starts(sim)) == MAX_RESTARTS + 1


def test_a_timed_fault_of_a_kind_the_clock_does_not_fire_is_not_a_driver_crash() -> None:
    """Only driver_crash and storage_latency are fired by the clock; a clock_skew at a time is matched at the first
    step at or after it, and moves the clock without restarting anything."""
    clean = run(scenario())
    skew = {"at": {"time_ms": int(clean.end_ms / 2)}, "kind": "clock_skew", "ms": 50}
    assert run(scenario(skew)).outcome().recoveries == ()


def test_a_storage_latency_spike_of_zero_ms_changes_nothing() -> None:
    clean = run(scenario())
    spike = {"at": {"time_ms": int(clean.end_ms / 2)}, "kind": "storage_latency", "ms": 0}
    assert run(scenario(spike)).end_ms == clean.end_ms


def test_a_timed_crash_due_after_the_query_ended_never_fires() -> None:
    """No ``at.restart``: the clock reaches the time with no incarnation running (the query consumed its input),
    so nothing is stopped and the outcome lists the fault as never fired."""
    clean = run(scenario())
    late = run(scenario(crash_at(clean.end_ms + 1)))
    assert late.outcome().recoveries == ()
    assert late.outcome().faults_not_fired == (0,)
    assert late.end_ms == clean.end_ms


def test_a_timed_fault_fires_at_exactly_its_time_and_a_spike_lasts_exactly_its_ms() -> None:
    for ms in (0, 700):
        sim = run(scenario({"at": {"time_ms": 0}, "kind": "storage_latency", "ms": ms},
                           {"at": {"time_ms": 40}, "kind": "storage_latency", "ms": ms}))
        fired = [e.time_ms for e in sim.trace if e.component == "faults" and e.action == "storage_latency"]
        assert fired == [0, 40]
        assert sim.service.spikes == [(0, ms), (40, 40 + ms)]


def test_every_clock_fault_is_counted_off_once_whether_or_not_it_fired() -> None:
    """``clock_faults_left`` keeps tasks from fusing their steps while a clock fault may still fire: it starts at
    the number of clock faults and each one's process takes exactly one off when it ends."""
    clean = run(scenario())
    spike = {"at": {"time_ms": 0}, "kind": "storage_latency", "ms": 10}
    sim = Simulation(scenario(spike, crash_at(clean.end_ms / 2), crash_at(clean.end_ms * 10)), resolve_profile(None))
    assert sim.clock_faults_left == 3
    sim.run()
    assert sim.clock_faults_left == 0
    assert sim.outcome().faults_not_fired == (2,)
