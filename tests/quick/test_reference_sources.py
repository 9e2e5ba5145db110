"""Sources are deterministic from the seed, and keys route to partitions by a stable hash."""

from __future__ import annotations

import subprocess
import sys

from reference.judge.oracles import check_outcome, failures
from reference.protocol.run import run_scenario
from reference.language.scenario import Scenario
from reference.protocol.sources import SourceData, partition_of


def explicit_scenario() -> Scenario:
    records = [[0, "a", 1, 5, 10], [1, "b", 2, 7, 20], [0, "a", 3, 900, 1500], [1, "c", 4, 1000, 1999],
               [0, "b", 5, 1100, 2100]]
    return Scenario.from_dict({
        "name": "explicit", "seed": 0,
        "source": {"kind": "explicit", "records": records, "batch_ms": 1000},
        "query": {"operator": {"kind": "aggregate", "agg": "sum"}, "state_partitions": 2},
        "faults": [{"at": {"step": "commit_log_write", "batch": 1}, "kind": "driver_crash"}]})


def test_explicit_records_are_batched_by_arrival_time():
    data = SourceData(explicit_scenario())
    assert data.planned_batches() == 3
    assert [data.planned_end_offsets(b) for b in range(3)] == [[1, 1], [2, 2], [3, 2]]


def test_explicit_source_survives_a_crash_with_every_oracle():
    scenario = explicit_scenario()
    result = run_scenario(scenario)
    outcome = result.outcome()
    assert failures(check_outcome(scenario, outcome, result.storage)) == []
    final = {}
    for pairs in (outcome.state["0"][p][str(3)] for p in ("0", "1")):
        final.update(dict(map(tuple, pairs)))
    assert final == {"a": 4, "b": 7, "c": 4}


def test_rate_source_is_deterministic_and_spreads_records_evenly():
    d = {"name": "rate", "seed": 3, "source": {"kind": "rate", "rows_per_second": 200, "duration_s": 2,
                                               "partitions": 4, "keys": 10},
         "query": {"operator": {"kind": "map"}, "state_partitions": 2}}
    first, second = SourceData(Scenario.from_dict(d)), SourceData(Scenario.from_dict(d))
    assert first.partitions == second.partitions
    assert first.totals == [100, 100, 100, 100]
    assert first.partitions[1][50].arrival_ms == 1000  # 50 rows/s per partition: the 51st arrives at 1 s
    d["seed"] = 4
    assert SourceData(Scenario.from_dict(d)).partitions != first.partitions


def test_key_routing_does_not_depend_on_the_interpreters_hash_seed():
    keys = [f"k{i}" for i in range(50)]
    here = [partition_of(k, 7) for k in keys]
    code = "from reference.protocol.sources import partition_of; print([partition_of(f'k{i}', 7) for i in range(50)])"
    for seed in ("1", "2"):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                             env={"PYTHONHASHSEED": seed, "PATH": ""})
        assert out.stdout.strip() == str(here)
    assert len(set(here)) == 7


def test_a_process_keeps_the_records_of_the_latest_sources_only():
    """A long-lived Spark worker runs point after point; holding every earlier scenario's records made each later
    point's tasks slower (reference/protocol/sources.py). The latest sources stay cached, whatever their faults."""
    scenario = explicit_scenario()
    other = Scenario.from_dict({**scenario.to_dict(), "seed": 1})
    refaulted = Scenario.from_dict({**scenario.to_dict(), "faults": []})
    first = SourceData.of(scenario)
    assert SourceData.of(refaulted) is first            # faults are not part of the records
    second = SourceData.of(other)
    assert second is not first and SourceData.of(other) is second
    assert list(SourceData._cache.values()) == [second]
    assert SourceData.of(scenario) is not first         # generated again, equal records
    assert SourceData.of(scenario).partitions == first.partitions
