"""Faults at a simulated time respect ``at.restart`` (the incarnation they belong to), as step faults do.

A fault with ``at.restart = k`` fires at the first instant at or after its
``time_ms`` at which incarnation ``k`` is running: at ``time_ms`` if ``k`` runs
then, when ``k`` starts if that is later, never if ``k`` ended before
``time_ms`` or never starts.
"""

from __future__ import annotations

from typing import Any

from reference.oracles import check_outcome, failures
from reference.scenario import Scenario
from sim import simulate
from sim.simulation import Simulation


def scenario(*faults: dict[str, Any]) -> Scenario:
    return Scenario.from_dict({
        "name": "time-faults", "seed": 5,
        "source": {"kind": "generated", "partitions": 2, "keys": 8, "records_per_partition_per_batch": 5,
                   "batches": 6, "event_time": {"start_ms": 0, "step_ms": 20}},
        "query": {"operator": {"kind": "aggregate", "agg": "count"}, "state_partitions": 2},
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
    assert outcome["error"] is None
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
    assert len(run(scenario(crash_at(middle))).outcome()["recoveries"]) == 1
    assert len(run(scenario(crash_at(middle, restart=0))).outcome()["recoveries"]) == 1
    never = run(scenario(crash_at(middle, restart=1)))   # there is no incarnation 1 without another fault
    assert never.outcome()["recoveries"] == [] and crashes(never) == []
    assert never.trace.dumps() == clean.trace.dumps()


def test_time_crash_waits_for_its_incarnation_to_start() -> None:
    once = run(scenario(STEP_CRASH))
    first, second = starts(once)
    assert first < second
    # due before incarnation 1 starts: fires as it starts
    early = run(scenario(STEP_CRASH, crash_at(first, restart=1)))
    assert crashes(early) == [second]
    assert [r["restart"] for r in early.outcome()["recoveries"]] == [1, 2]
    # due while incarnation 1 runs: fires then
    during = int(second + (once.end_ms - second) / 2)
    late = run(scenario(STEP_CRASH, crash_at(during, restart=1)))
    assert crashes(late) == [during]
    assert len(late.outcome()["recoveries"]) == 2


def test_time_crash_for_an_ended_incarnation_never_fires() -> None:
    once = run(scenario(STEP_CRASH))
    first, second = starts(once)
    after_first = run(scenario(STEP_CRASH, crash_at((first + second) / 2 + 1, restart=0)))
    assert crashes(after_first) == []
    assert after_first.outcome()["recoveries"] == once.outcome()["recoveries"]
    too_late = run(scenario(STEP_CRASH, crash_at(once.end_ms + 1, restart=1)))
    assert crashes(too_late) == [] and len(too_late.outcome()["recoveries"]) == 1


def test_time_latency_spike_respects_restart() -> None:
    clean = run(scenario())
    spike = {"at": {"time_ms": 0}, "kind": "storage_latency", "ms": 3000}
    slowed = run(scenario(spike))
    assert slowed.end_ms > clean.end_ms
    elsewhere = run(scenario({**spike, "at": {"time_ms": 0, "restart": 1}}))
    assert elsewhere.end_ms == clean.end_ms
    second_life = run(scenario(STEP_CRASH, {**spike, "at": {"time_ms": 0, "restart": 1}}))
    assert second_life.end_ms > run(scenario(STEP_CRASH)).end_ms


def test_time_fault_at_a_step_respects_restart() -> None:
    """Other kinds at a time fire at the first step at or after it, in their incarnation only."""
    def fired(sim: Simulation) -> list[str]:
        return [e.detail for e in sim.trace if e.component == "faults" and e.action == "storage_write_error"]

    fault = {"at": {"time_ms": 0}, "kind": "storage_write_error"}
    assert fired(run(scenario(fault)))
    assert not fired(run(scenario({**fault, "at": {"time_ms": 0, "restart": 1}})))
    second_life = run(scenario(STEP_CRASH, {**fault, "at": {"time_ms": 0, "restart": 1}}))
    assert len(fired(second_life)) == 1
