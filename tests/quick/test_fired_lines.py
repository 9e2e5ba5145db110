"""Where a fault fired, as `run`, `check` and `diff` print it (``experiments.judging.fired_lines``).

Native Spark reports, in an outcome's free-form ``details.native.faults_fired``, the file operation and path inside
Spark's checkpoint code where each fault fired, or the executor and task that halted. The lines name the fault as
the scenario states it and the place as the backend reports it; anything malformed in ``details`` (an outcome file
is input) is skipped, never trusted or raised on.
"""

from __future__ import annotations

import dataclasses

from experiments.judging import fired_lines
from streamtest import fault, make, run


def outcome_with(scenario, details):
    return dataclasses.replace(run(scenario).outcome, details=details)


SCENARIO = make("aggregate", "sync", batches=5, faults=[fault("storage_write_error", "offset_log_write", 3),
                                                         fault("executor_loss", "state_commit", 2, partition=1)])


def test_each_fired_fault_is_named_with_the_operation_path_executor_and_task_it_fired_in():
    details = {"native": {"faults_fired": [
        {"fault": 0, "kind": "storage_write_error", "op": "rename", "when": "after", "path": "offsets/3",
         "incarnation": 0},
        {"fault": 1, "kind": "executor_loss", "executor": "1", "partitionId": 1, "attemptNumber": 0},
    ]}}
    assert fired_lines(SCENARIO, outcome_with(SCENARIO, details)) == [
        "faults[0] (storage_write_error before offset_log_write of batch 3) fired after the rename of offsets/3, "
        "in incarnation 0",
        "faults[1] (executor_loss before state_commit of batch 2) fired in executor 1, in the task of partition 1, "
        "attempt 0",
    ]


def test_an_outcome_without_native_details_prints_nothing():
    assert fired_lines(SCENARIO, outcome_with(SCENARIO, {})) == []


def test_malformed_details_are_skipped_not_raised_on():
    for native in ("text", {"faults_fired": "x"}, {"faults_fired": ["x", 3, None]},
                   {"faults_fired": [{"fault": 2}, {"fault": -1}, {"fault": True}, {"fault": "0"}]}):
        assert fired_lines(SCENARIO, outcome_with(SCENARIO, {"native": native})) == [], native
