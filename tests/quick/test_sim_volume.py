"""Volume mode: the scenario's sources give the input, each operator kind its own state model.

Directions and bounds only (sim/volume_state.py documents the model): an
aggregate keeps every key, windows and sessions evict after the watermark,
dedup grows then evicts, a join keeps both sides within its time bound; rate
and explicit sources feed volume mode with their own partitions, counts and
arrival times.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, note, settings
from test_sim_strategies import scenario_strategy

from reference.protocol.outcome import Outcome
from reference.language.scenario import Scenario
from sim import Simulation, shipped_profile, simulate
from sim.simulation import CountingEnvironment
from sim.volume import VolumeIncarnation

TRIGGER_MS = 1000
RATE = 20_000
PARTS = 16


def volume_run(operator: dict[str, Any], *, keys: int, rate: int = RATE, seconds: int = 40,
               join: bool = False, seed: int = 3) -> Outcome:
    src = {"kind": "rate", "rows_per_second": rate, "duration_s": seconds, "partitions": 4, "keys": keys}
    raw: dict[str, Any] = {"name": f"volume-{operator['kind']}", "seed": seed,
                           "query": {"operator": operator, "state_partitions": PARTS},
                           "sink": {"mode": "exactly_once"}, "engine": {"trigger_interval_ms": TRIGGER_MS}}
    if join:
        raw["sources"] = {"left": src, "right": dict(src)}
    else:
        raw["source"] = src
    outcome = simulate(Scenario.from_dict(raw), "lightspeed_cluster", mode="volume").outcome()
    assert outcome.error is None
    return outcome


def store(outcome: Outcome, index: int = 0, field: str = "num_rows_total") -> list[int]:
    """One state store's metric, batch by batch."""
    return [getattr(p.state_operators[index], field) for p in outcome.progress]


def input_rows(outcome: Outcome) -> list[int]:
    return [p.num_input_rows for p in outcome.progress]


def test_aggregate_keeps_every_key_it_saw() -> None:
    keys = 3000
    out = volume_run({"kind": "aggregate", "agg": "count"}, keys=keys)
    totals = store(out)
    assert all(a <= b for a, b in zip(totals, totals[1:])), "an aggregate never forgets a key"
    assert keys * 0.9 <= totals[-1] <= keys
    assert not any(store(out, field="num_rows_removed"))
    assert all(u <= min(keys, n) for u, n in zip(store(out, field="num_rows_updated"), input_rows(out)))


def test_window_state_is_evicted_after_the_watermark() -> None:
    window = {"kind": "window_aggregate", "agg": "count", "window_ms": 2000, "watermark_delay_ms": 1000}
    many_keys = 10_000_000   # every record a new key: state follows the records it holds
    aggregate = store(volume_run({"kind": "aggregate", "agg": "count"}, keys=many_keys))
    out = volume_run(window, keys=many_keys)
    totals = store(out)
    assert totals[-1] < aggregate[-1] / 4, "closed windows leave the state"
    assert sum(store(out, field="num_rows_removed")) > aggregate[-1] / 2
    watermarks = [b.watermark_ms for b in out.batches]
    assert watermarks[-1] > watermarks[0] and watermarks == sorted(watermarks)
    # open windows: the window, the watermark delay and the batch lag, at most
    bound = RATE * (window["window_ms"] + window["watermark_delay_ms"] + 3 * TRIGGER_MS) / 1000
    assert max(totals) <= bound


def test_dedup_grows_then_evicts() -> None:
    keys, delay = 2000, 2000
    out = volume_run({"kind": "dedup_within_watermark", "watermark_delay_ms": delay}, keys=keys)
    totals, removed = store(out), store(out, field="num_rows_removed")
    inserted = store(out, field="num_rows_updated")
    first_eviction = next(i for i, r in enumerate(removed) if r > 0)
    assert first_eviction > 0 and totals[:first_eviction] == sorted(totals[:first_eviction]), "it grows first"
    assert max(totals) <= keys
    assert sum(inserted[first_eviction + 1:]) > 0, "an evicted key is inserted again by its next record"
    assert keys < sum(inserted) < sum(input_rows(out)), "duplicates within the delay are dropped"
    # with sparse keys the state is what arrived within the delay, so a longer delay keeps more
    sparse = {d: store(volume_run({"kind": "dedup_within_watermark", "watermark_delay_ms": d},
                                  keys=10_000_000))[-1] for d in (1000, 4000)}
    assert sparse[4000] > 2 * sparse[1000]


def test_join_keeps_both_sides_within_the_time_bound() -> None:
    def join(bound: int) -> Outcome:
        return volume_run({"kind": "join", "time_bound_ms": bound, "watermark_delay_ms": 1000}, keys=5000,
                          rate=5000, join=True)

    narrow, wide = join(500), join(3000)
    for out in (narrow, wide):
        left, right = store(out, 0), store(out, 1)
        assert [o.operator_name for o in out.progress[0].state_operators] == ["0.left", "0.right"]
        assert max(left) > 0 and max(right) > 0
        assert sum(store(out, 0, "num_rows_removed")) > 0 and sum(store(out, 1, "num_rows_removed")) > 0
    assert store(wide, 0)[-1] > store(narrow, 0)[-1], "a wider time bound keeps more rows"
    bound = 5000 * (3000 + 1000 + 3 * TRIGGER_MS) / 1000
    assert max(store(wide, 0)) <= bound and max(store(wide, 1)) <= bound


def test_session_state_times_out_sparse_keys_only() -> None:
    session = {"kind": "stateful_function", "function": "session_sum", "timeout_ms": 1000,
               "watermark_delay_ms": 500}
    dense = volume_run(session, keys=200)
    assert not any(store(dense, field="num_rows_removed")), "a key seen every batch never times out"
    assert max(store(dense)) <= 200
    sparse = volume_run(session, keys=10_000_000)
    assert sum(store(sparse, field="num_rows_removed")) > 0
    assert max(store(sparse)) <= RATE * (1000 + 500 + 3 * TRIGGER_MS) / 1000


def test_map_keeps_no_state() -> None:
    raw = {"name": "volume-map", "seed": 1,
           "source": {"kind": "rate", "rows_per_second": 1000, "duration_s": 5, "partitions": 2},
           "query": {"operator": {"kind": "map"}, "state_partitions": 4}, "sink": {"mode": "at_least_once"}}
    out = simulate(Scenario.from_dict(raw), mode="volume").outcome()
    assert all(p.state_operators == () for p in out.progress)
    assert sum(input_rows(out)) == 5000


def test_rate_source_partitions_and_rate_drive_the_input() -> None:
    raw = {"name": "volume-rate", "seed": 2,
           "source": {"kind": "rate", "rows_per_second": 9000, "duration_s": 20, "partitions": 3, "keys": 50},
           "query": {"operator": {"kind": "aggregate", "agg": "sum"}, "state_partitions": 8},
           "engine": {"trigger_interval_ms": TRIGGER_MS}}
    out = simulate(Scenario.from_dict(raw), "lightspeed_cluster", mode="volume").outcome()
    batches = out.batches
    assert all(len(b.end_offsets) == 3 for b in batches)
    assert batches[-1].end_offsets == (60_000,) * 3
    assert all(b.start_offsets == a.end_offsets for a, b in zip(batches, batches[1:]))
    assert sum(input_rows(out)) == 180_000
    steady = [p.input_rows_per_second for p in out.progress[2:-2]]
    assert steady and all(0.7 * 9000 <= r <= 1.3 * 9000 for r in steady)


def test_explicit_source_in_volume_mode() -> None:
    records = [[p, f"k{(i * 7 + p) % 5}", 1, 40 * i + p, 40 * i + p] for i in range(60) for p in range(3)]
    raw = {"name": "volume-explicit", "seed": 3,
           "source": {"kind": "explicit", "records": records},
           "query": {"operator": {"kind": "aggregate", "agg": "count"}, "state_partitions": 2},
           "engine": {"trigger_interval_ms": 200}}
    sc = Scenario.from_dict(raw)
    out = simulate(sc, mode="volume").outcome()
    assert out.error is None
    assert out.batches[-1].end_offsets == (60, 60, 60)
    assert sum(input_rows(out)) == len(records) == out.latency().count
    assert len(out.batches) > 3, "arrival times spread the records over batches"
    for batch, progress in zip(out.batches, out.progress):
        assert progress.timestamp_ms is not None
        for p, end in enumerate(batch.end_offsets):
            if end:   # a batch takes only records that had arrived when it was planned
                assert records[(end - 1) * 3 + p][4] <= progress.timestamp_ms
    assert max(store(out)) <= 5, "the state holds at most the distinct keys of the records"


@settings(max_examples=40)
@given(scenario_strategy())
def test_volume_mode_runs_what_data_mode_runs(scenario: Scenario) -> None:
    """Every operator, mode and fault of the differential tests: the input is consumed once, in order."""
    note(scenario.to_json())
    first = simulate(scenario, mode="volume")
    outcome = first.outcome()
    assert outcome.details["sim"]["mode"] == "volume"
    batches = outcome.batches
    if outcome.error is None:
        totals = tuple(first.data.totals)
        assert batches and batches[-1].end_offsets == totals
        assert batches[0].start_offsets == (0,) * len(totals)
        assert all(b.start_offsets == a.end_offsets for a, b in zip(batches, batches[1:]))
        assert outcome.latency().count == sum(totals), "every record's latency, once"
    again = simulate(scenario, mode="volume")
    assert again.outcome().to_json() == outcome.to_json() and again.trace.dumps() == first.trace.dumps()


@pytest.mark.parametrize("engine", [{"pipelining": False}, {"pipelining": True},
                                    {"state_checkpoint": "async"}, {"pipelining": True, "state_checkpoint": "async"}])
def test_fused_task_steps_give_the_same_run(engine: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """Volume mode runs a task's unwatched steps under one timeout: the same run as step by step, to the byte.

    With the shipped profile's stragglers and jitter: a task's draws must not depend on the order
    in which steps run. A traced run never fuses (its trace shows every step), so tracing must not
    change the outcome either.
    """
    sc = Scenario.from_dict({
        "name": "volume-fusion", "seed": 1,
        "source": {"kind": "rate", "rows_per_second": 40_000, "duration_s": 15, "partitions": 4, "keys": 1000},
        "query": {"operator": {"kind": "window_aggregate", "agg": "count", "window_ms": 1000,
                               "watermark_delay_ms": 500}, "state_partitions": 40},
        "engine": {"trigger_interval_ms": 500, "state_store": {"maintenance_interval_ms": 2000}, **engine}})
    profile = shipped_profile("lightspeed_cluster")
    assert profile.straggler_probability > 0 and profile.storage.jitter_sigma > 0
    runs = {}
    for fuse in (True, False):
        monkeypatch.setattr(VolumeIncarnation, "fuse_task_steps", fuse)
        env = CountingEnvironment()
        sim = Simulation(sc, profile, "volume", trace_enabled=False, env=env)
        sim.run()
        runs[fuse] = (sim.outcome().to_json(), sim.trace.count, env.processed)
    assert runs[True][:2] == runs[False][:2]
    assert runs[True][2] < runs[False][2], "fusion must take fewer SimPy events"
    monkeypatch.setattr(VolumeIncarnation, "fuse_task_steps", True)
    traced = simulate(sc, profile, mode="volume", trace_enabled=True)
    assert traced.outcome().to_json() == runs[True][0]
    assert sum(1 for e in traced.trace if e.component.startswith("executor")) > 0
