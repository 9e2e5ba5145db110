"""A small test vocabulary in the spirit of Spark's ``StreamTest``: a test reads like the scenario it checks.

    scenario = make("aggregate", "pipelining", faults=[crash("offset_log_write", 3)])
    check(scenario, on="sim", agree_with="reference")           # every oracle holds; the outcomes agree
    check(make("aggregate", "snapshot_provider", faults=[...]), expect="loud", names="2_r0b1p0a0.snapshot")

``check`` runs the scenario through the backend registry (``experiments.backends``),
judges the outcome with every oracle on the run's own checkpoint, asserts what
was expected, and returns the ``RunResult``. A failed assertion reads as the
verdicts that failed. The catalogue (``reference.language.catalogue``: the operators,
the engine modes and the builder) is re-exported, so a test needs one import.
"""

from __future__ import annotations

from typing import Any

from experiments.backends import run_backend
from reference.protocol.backend import RunOptions, RunResult
from reference.language.catalogue import MODES, OPERATORS, make, scenario_dict, spark_allows, supported_pairs
from reference.judge.compare import first_difference
from reference.judge.oracles import Verdict, check_outcome, failures
from reference.language.scenario import Scenario

__all__ = ["MODES", "OPERATORS", "RunOptions", "check", "crash", "fault", "judged", "make", "run", "scenario_dict",
           "spark_allows", "supported_pairs"]

EXPECTATIONS = ("pass", "loud", "fail")


def crash(step: str, batch: int, when: str = "after", *, partition: int | None = None,
          restart: int | None = None) -> dict[str, Any]:
    """A ``driver_crash`` at a named step of spec section 2 (``when``: before or after it)."""
    return fault("driver_crash", step, batch, when, partition=partition, restart=restart)


def fault(kind: str, step: str, batch: int, when: str = "before", *, partition: int | None = None,
          restart: int | None = None, **extra: Any) -> dict[str, Any]:
    """A fault of ``kind`` at a step (``extra``: its ``ms`` or ``path``)."""
    at: dict[str, Any] = {"step": step, "batch": batch, "when": when}
    if partition is not None:
        at["partition"] = partition
    if restart is not None:
        at["restart"] = restart
    return {"at": at, "kind": kind, **extra}


def _scenario(scenario: Scenario | dict[str, Any]) -> Scenario:
    return scenario if isinstance(scenario, Scenario) else Scenario.from_dict(scenario)


def run(scenario: Scenario | dict[str, Any], on: str = "reference", options: RunOptions = RunOptions()) -> RunResult:
    """Run a scenario on a backend, through the registry."""
    return run_backend(on, _scenario(scenario), options)


def judged(scenario: Scenario | dict[str, Any], result: RunResult) -> list[Verdict]:
    """Every oracle's verdict on a run, with its checkpoint when the backend keeps one."""
    return check_outcome(_scenario(scenario), result.outcome, result.checkpoint)


def check(scenario: Scenario | dict[str, Any], on: str = "reference", *, expect: str = "pass",
          names: str | None = None, agree_with: str | None = None, options: RunOptions = RunOptions()) -> RunResult:
    """Run ``scenario`` on ``on`` and assert the expectation; returns the run.

    - ``expect="pass"``: the run finished and every oracle holds;
    - ``expect="loud"``: the run stopped with an error (naming ``names`` when given);
    - ``expect="fail"``: some oracle fails (a planted mistake was caught); ``names`` is then the check.

    ``agree_with``: the same scenario on that backend gives an outcome that agrees
    (``reference.judge.compare.first_difference``).
    """
    assert expect in EXPECTATIONS, f"expect is one of {', '.join(EXPECTATIONS)}, not {expect!r}"
    sc = _scenario(scenario)
    result = run(sc, on, options)
    outcome = result.outcome
    if expect == "loud":
        assert outcome.error is not None, f"{sc.name} on {on}: expected the run to stop with an error; it finished"
        assert names is None or names in outcome.error, f"{sc.name} on {on}: the error does not name {names!r}: " \
                                                        f"{outcome.error}"
        return result
    bad = failures(judged(sc, result))
    if expect == "pass":
        assert outcome.error is None, f"{sc.name} on {on}: the run stopped: {outcome.error}"
        assert not bad, f"{sc.name} on {on}:\n" + "\n".join(v.describe() for v in bad)
    else:
        assert bad, f"{sc.name} on {on}: expected an oracle to fail; every oracle holds"
        assert names is None or names in [v.check for v in bad], \
            f"{sc.name} on {on}: expected {names} to fail, got {[v.check for v in bad]}"
    if agree_with is not None:
        other = run(sc, agree_with)
        difference = first_difference(other.outcome, outcome, sc.sink_mode)
        assert difference is None, f"{sc.name}: {agree_with} and {on} differ at {difference}"
    return result


def reachable(raw: dict[str, Any]) -> list[dict[str, Any]]:
    """The faults of a scenario dict, each moved off a step its query never runs (``reference.language.fault_reach``
    refuses those): a stateful step of a stateless query to ``task_apply``, ``snapshot_upload`` under the
    snapshot provider (no maintenance) to ``state_commit``. For generated scenarios: a drawn fault keeps its
    kind, batch and time, and still tests something."""
    stateless = raw["query"]["operator"]["kind"] == "map"
    provider = raw.get("engine", {}).get("state_store", {}).get("provider", "changelog")
    out = []
    for f in raw.get("faults", []):
        step = f["at"].get("step")
        if stateless and step in ("state_load", "changelog_write", "state_commit", "snapshot_upload"):
            f = {**f, "at": {**f["at"], "step": "task_apply"}}
        elif step == "snapshot_upload" and provider == "snapshot":
            f = {**f, "at": {**f["at"], "step": "state_commit"}}
        if f not in out:
            out.append(f)
    return out
