"""``lightspeed diff SCENARIO --backends reference,spark-native`` agrees under faults fired inside Spark's own
checkpoint code (``experiments/scenarios/native-*.json``, the running count of the demo with one fault each):
a storage write error at an offset log write, a driver crash right after a commit log write, a latency spike
on one commit log write, a failed state store write. Both backends pass every oracle, their batches, state
and sink agree, and the native outcome says where the fault fired (the operation and the path).
``make test`` runs one of them (tests/soak.py); ``make soak`` all four.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments.diff import compare_backends
from experiments.judging import fired_lines
from reference.protocol.backend import RunOptions
from reference.language.scenario import load_scenario
from tests.soak import soak_or_short

SCENARIOS = Path(__file__).resolve().parents[2] / "experiments" / "scenarios"
# scenario -> (when, operation, path relative to Spark's checkpoint) where its fault fires in Spark
FIRES = {
    "native-storage-error-offset-log": ("after", "rename", "offsets/3"),
    "native-crash-after-commit-log": ("after", "rename", "commits/3"),
    "native-latency-spike-commit-log": ("before", "rename", "commits/2"),
    "native-failed-state-store-write": ("after", "create", "state/0/0/3.changelog"),
}


@pytest.mark.spark
@pytest.mark.soak
@pytest.mark.parametrize("name", soak_or_short(sorted(FIRES), ["native-latency-spike-commit-log"]))
def test_reference_and_spark_native_agree_under_a_fault_fired_inside_spark(name):
    scenario = load_scenario(str(SCENARIOS / f"{name}.json"))
    comparison = compare_backends(scenario, ["reference", "spark-native"],
                                  {"reference": RunOptions(), "spark-native": RunOptions()})
    assert [r.name for r in comparison.ran] == ["reference", "spark-native"]
    for run in comparison.runs:
        assert not run.failed, (run.name, [v.describe() for v in run.failed])
    assert comparison.differences == [("reference", "spark-native", None)]
    native = comparison.runs[1].result
    assert native is not None
    [fired] = native.outcome.details["native"]["faults_fired"]
    assert (fired["when"], fired["op"], fired["path"]) == FIRES[name]
    when, op, path = FIRES[name]
    [line] = fired_lines(scenario, native.outcome)          # what `diff` prints under its table
    assert line.startswith("faults[0] (") and f"fired {when} the {op} of {path}" in line, line
    if scenario.faults[0].kind == "driver_crash":
        assert [d["exit_status"] for d in native.outcome.details["native"]["jvm_deaths"]] == [86]
