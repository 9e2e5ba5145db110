"""Spark's plain ``dropDuplicates`` as the operator ``dedup`` (issue 37 section 3 item 4).

Each semantic test names the Spark test or source it follows: ``StreamingDeduplicationSuite`` (sql/core tests),
``BaseStreamingDeduplicateExec`` and ``WatermarkSupport`` (``statefulOperators.scala``), ``RealTimeModeAllowlist``
and ``StreamRealTimeModeSuite``. Expected rows and states are derived by hand from those rules; the whole-query
boundary cases are in ``tests/quick/test_operator_boundaries.py`` (``dedup-*``), which
``tests/spark/test_spark_native.py`` runs on Spark itself.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st
from test_reference_properties import fault
from test_sim_volume import input_rows, store, volume_run

from reference.judge.oracles import check_outcome, failures
from reference.language.catalogue import MODES, OPERATORS, scenario_dict, spark_allows
from reference.language.operator_spec import OPERATOR_KINDS
from reference.language.operators import DEDUP_SEEN, Row, Watermark, apply_operator
from reference.protocol.modes import checked
from reference.protocol.modes.real_time import REAL_TIME_OPERATORS
from reference.language.scenario import OperatorSpec, Scenario, ScenarioError
from reference.protocol.run import run_scenario
from streamtest import reachable

SCENARIOS = Path(__file__).resolve().parents[2] / "experiments" / "scenarios"
PLAIN = OperatorSpec("dedup")


def watermarked(delay: int) -> OperatorSpec:
    return OperatorSpec("dedup", watermark_delay_ms=delay)


def rows(*triples: tuple[str, int, int]) -> list[Row]:
    return [Row(key, value, t) for key, value, t in triples]


def batch(spec: OperatorSpec, state: dict[str, Any], input_rows: list[Row],
          wm: Watermark = Watermark()) -> tuple[dict[str, Any], list[list[Any]]]:
    new, out = apply_operator(spec, {"": state}, input_rows, wm)
    return new[""], [[r.key, r.value] for r in out]


# ------------------------------------------------------------ without a watermark


def test_a_key_is_emitted_once_and_every_later_row_of_it_is_dropped():
    """StreamingDeduplicationSuite, "deduplicate with some columns": dropDuplicates("_1") emits a -> 1, drops
    a -> 2, emits b -> 1; the state holds 1, 1, then 2 keys."""
    state, out = batch(PLAIN, {}, rows(("a", 1, 10)))
    assert out == [["a", 1]] and state == {"a": DEDUP_SEEN}
    state, out = batch(PLAIN, state, rows(("a", 2, 20)))
    assert out == [] and len(state) == 1
    state, out = batch(PLAIN, state, rows(("b", 1, 30)))
    assert out == [["b", 1]] and sorted(state) == ["a", "b"]


def test_within_a_batch_the_first_row_of_a_key_wins():
    """BaseStreamingDeduplicateExec.doExecute filters the partition's rows in order: the first row whose key
    is absent is put into the state, so every later one in the same batch finds it there."""
    state, out = batch(PLAIN, {}, rows(("a", 7, 50), ("a", 1, 10), ("b", 3, 5), ("a", 9, 60)))
    assert out == [["a", 7], ["b", 3]] and sorted(state) == ["a", "b"]


def test_without_a_watermark_nothing_is_late_and_nothing_is_ever_evicted():
    """With no event-time column among the child's output, WatermarkSupport builds no predicate: a row at the
    epoch in batch 0 is not late (a watermarked operator drops it), and no watermark evicts a key, so the state
    only grows (the guide: "without watermark ... the query stores the data from all the past records")."""
    state, out = batch(PLAIN, {}, rows(("z", 1, 0)), Watermark(0, 0))
    assert out == [["z", 1]]
    state, out = batch(PLAIN, state, rows(("y", 2, 5)), Watermark(100, 10_000))
    assert out == [["y", 2]] and sorted(state) == ["y", "z"]
    watermarked_state, _ = batch(watermarked(0), {}, rows(("z", 1, 0)), Watermark(0, 0))
    assert watermarked_state == {}


# --------------------------------------------------------------- with a watermark


def test_with_a_watermark_a_duplicate_is_the_same_key_at_the_same_event_time():
    """StreamingDeduplicationSuite, "SPARK-19841: watermarkPredicate should filter based on keys":
    dropDuplicates("id", "time") on (time, id) = (1, 1), (1, 1), (1, 2) emits ids 1 and 2; a second batch's
    (1, 1) is dropped as a duplicate, (2, 3) and (2, 4) are new. Here key = id, event time = time."""
    spec = watermarked(1000)
    state, out = batch(spec, {}, rows(("1", 1, 1000), ("1", 1, 1000), ("2", 1, 1000)))
    assert out == [["1", 1], ["2", 1]] and sorted(state) == ["1|1000", "2|1000"]
    state, out = batch(spec, state, rows(("1", 1, 1000), ("3", 2, 2000), ("4", 2, 2000)), Watermark(0, 0))
    assert out == [["3", 2], ["4", 2]]
    # the same key at another event time is another row
    _, out = batch(spec, state, rows(("1", 5, 1001)), Watermark(0, 0))
    assert out == [["1", 5]]


def test_late_rows_are_dropped_and_entries_are_evicted_once_the_watermark_reaches_their_event_time():
    """StreamingDeduplicationSuite, "deduplicate with watermark": with a 10 s delay, 10..15 s (five copies each)
    give six rows and six entries; once the watermark is 15 s the entries at or before it go (WatermarkSupport:
    ``eventTime <= watermark``), and a row at 10 s is late, dropped (``numRowsDroppedByWatermark``)."""
    spec = watermarked(10_000)
    state, out = batch(spec, {}, rows(*[("k", t, t * 1000) for _ in range(5) for t in range(10, 16)]))
    assert out == [["k", t] for t in range(10, 16)] and len(state) == 6
    state, out = batch(spec, state, rows(("k", 25, 25_000)), Watermark(5_000, 15_000))
    assert out == [["k", 25]] and state == {"k|25000": DEDUP_SEEN}
    state, out = batch(spec, state, rows(("k", 10, 10_000)), Watermark(15_000, 15_000))
    assert out == [] and state == {"k|25000": DEDUP_SEEN}


def test_an_entry_at_the_eviction_watermark_goes_and_one_millisecond_later_stays():
    """WatermarkSupport.watermarkExpression: ``LessThanOrEqual(eventTime, watermark)`` evicts a key."""
    state = {"a|50": DEDUP_SEEN, "a|51": DEDUP_SEEN}
    assert batch(watermarked(20), state, [], Watermark(40, 50))[0] == {"a|51": DEDUP_SEEN}
    assert batch(watermarked(20), state, [], Watermark(40, 49))[0] == state


def test_a_row_behind_the_eviction_watermark_but_not_late_is_emitted_and_evicted_in_its_batch():
    """Late rows are filtered with ``eventTimeWatermarkForLateEvents`` (the batch before's) and state evicted
    with ``eventTimeWatermarkForEviction`` after the rows, in the CompletionIterator."""
    state, out = batch(watermarked(20), {}, rows(("a", 1, 120)), Watermark(100, 150))
    assert out == [["a", 1]] and state == {}


def test_a_key_holding_the_separator_splits_at_the_last_one():
    state, _ = batch(watermarked(0), {}, rows(("a|b", 1, 10)))
    assert state == {"a|b|10": DEDUP_SEEN}
    assert batch(watermarked(0), state, [], Watermark(0, 10))[0] == {}


# ------------------------------------------------------------------ the scenario


def raw_with(operator: dict[str, Any]) -> dict[str, Any]:
    raw = scenario_dict("dedup", batches=2)
    raw["query"]["operator"] = operator
    return raw


@pytest.mark.parametrize("operator", [{"kind": "dedup"}, {"kind": "dedup", "watermark_delay_ms": 0},
                                      {"kind": "dedup", "watermark_delay_ms": 30}])
def test_a_dedup_operator_round_trips_with_or_without_its_watermark(operator):
    scenario = Scenario.from_dict(raw_with(operator))
    assert scenario.operator == OperatorSpec("dedup", watermark_delay_ms=operator.get("watermark_delay_ms"))
    assert scenario.to_dict()["query"]["operator"] == operator
    assert Scenario.from_dict(json.loads(scenario.to_json())) == scenario
    assert scenario.store_ids == ("0",)


@pytest.mark.parametrize("operator, field, words", [
    ({"kind": "dedup", "watermark_delay_ms": -1}, "query.operator.watermark_delay_ms", ">= 0"),
    ({"kind": "dedup", "watermark_delay_ms": None}, "query.operator.watermark_delay_ms", "integer"),
    ({"kind": "dedup", "watermark_delay_ms": "10"}, "query.operator.watermark_delay_ms", "integer"),
    ({"kind": "dedup", "window_ms": 10}, "query.operator.window_ms", "unknown field"),
    ({"kind": "dedupe"}, "query.operator.kind", "dedup"),
])
def test_a_bad_dedup_operator_is_refused_naming_the_field(operator, field, words):
    with pytest.raises(ScenarioError) as caught:
        Scenario.from_dict(raw_with(operator))
    assert caught.value.field == field and words in str(caught.value)


def test_every_operator_kind_is_either_accepted_or_refused_by_real_time_mode():
    """RealTimeModeAllowlist lists StreamingDeduplicateExec (and EventTimeWatermarkExec): dedup is accepted, with
    or without a watermark; the accepted list and the refusals together name every operator kind."""
    from reference.protocol.modes.real_time import _REFUSED_OPERATORS
    assert "dedup" in REAL_TIME_OPERATORS
    assert set(REAL_TIME_OPERATORS) | set(_REFUSED_OPERATORS) == set(OPERATOR_KINDS) - {"chain"}
    assert not set(REAL_TIME_OPERATORS) & set(_REFUSED_OPERATORS)
    raw = json.loads((SCENARIOS / "real-time-dedup.json").read_text())
    for operator in ({"kind": "dedup"}, {"kind": "dedup", "watermark_delay_ms": 2000}):
        scenario = Scenario.from_dict({**raw, "query": {"operator": operator, "state_partitions": 2}})
        assert checked(scenario).engine.real_time


def test_the_catalogue_holds_plain_dedup_with_keys_that_keep_arriving():
    """The catalogue's dedup is Spark's plain form (no watermark), under every mode Spark allows for a stateful
    query; its source has keys enough that batches after the first still insert."""
    assert OPERATORS["dedup"] == {"kind": "dedup"}
    assert [m for m in MODES if spark_allows("dedup", m)] == \
        [m for m in MODES if m not in ("async_progress", "parallel_store_commit")]
    outcome = run_scenario(Scenario.from_dict(scenario_dict("dedup", batches=4))).outcome()
    assert all(entry.rows for entry in outcome.sink), "every batch emits a key it has not seen"
    held = [sum(len(outcome.state["0"][p][str(v)]) for p in ("0", "1")) for v in range(1, 5)]
    assert held == sorted(held) and held[0] < held[-1], "the state only grows"


# ---------------------------------------------------------------- real-time mode


def test_real_time_dedup_recovers_from_a_commit_log_write_failure():
    """StreamRealTimeModeSuite, "pipelined shuffle: dedup recovers from a commit-log write failure": the
    failed write of ``commits/1`` fails the query; the restart keeps batch 0's state (its keys are not emitted
    again) and re-runs batch 1, whose new key is emitted again (the sink is at-least-once)."""
    raw = json.loads((SCENARIOS / "real-time-dedup.json").read_text())
    clean = run_scenario(Scenario.from_dict(raw)).outcome()
    failing = {"kind": "storage_write_error", "at": {"step": "commit_log_write", "batch": 1, "when": "before"}}
    scenario = Scenario.from_dict({**raw, "faults": [failing]})
    result = run_scenario(scenario)
    outcome = result.outcome()
    assert failures(check_outcome(scenario, outcome, result.storage)) == []
    assert [r.to_dict() for r in outcome.recoveries] == [{"restart": 1, "resumed_at": 1, "rerun_batches": [1]}]
    first = {e.batch: e for e in clean.sink}
    again = {e.batch: e for e in outcome.sink}
    assert again[0].rows == first[0].rows and again[0].deliveries == 1
    assert first[1].rows and again[1].deliveries == 2 and sorted(again[1].rows) == sorted(first[1].rows * 2)
    emitted = [row[0] for e in outcome.sink for row in e.rows]
    assert len(set(emitted)) == len(set(row[0] for e in clean.sink for row in e.rows))


# -------------------------------------------------------- every oracle, any fault


@st.composite
def dedup_scenarios(draw: st.DrawFn) -> Scenario:
    """A dedup scenario, plain or watermarked (a delay below the source's 20 ms disorder makes rows late),
    under a mode Spark allows, with one fault."""
    batches = draw(st.integers(2, 5))
    mode = draw(st.sampled_from([m for m in MODES if spark_allows("dedup", m)]))
    d = scenario_dict("dedup", mode, seed=draw(st.integers(0, 10_000)), batches=batches,
                      retain=draw(st.integers(1, 4)), faults=[draw(fault(batches))])
    delay = draw(st.sampled_from((None, 0, 5, 30)))
    if delay is not None:
        d["query"]["operator"] = {"kind": "dedup", "watermark_delay_ms": delay}
    if mode == "pipelining":
        d["engine"]["pipeline_depth"] = draw(st.sampled_from((2, 3)))
    d["faults"] = reachable(d)
    return Scenario.from_dict(d)


@settings(max_examples=30, deadline=None)
@given(dedup_scenarios())
def test_every_oracle_holds_on_dedup_after_a_single_fault(scenario: Scenario):
    note(scenario.to_json())
    result = run_scenario(scenario)
    bad = failures(check_outcome(scenario, result.outcome(), result.storage))
    assert bad == [], "\n".join(v.describe() for v in bad)


# ------------------------------------------------------------- the volume model


def test_volume_plain_dedup_holds_every_key_it_saw_and_never_removes_one():
    keys = 2000
    out = volume_run({"kind": "dedup"}, keys=keys)
    totals, inserted = store(out), store(out, field="num_rows_updated")
    assert totals == sorted(totals) and keys * 0.9 <= totals[-1] <= keys
    assert not any(store(out, field="num_rows_removed"))
    # the volume model's counts are continuous and each batch's is reported whole, so each batch may round away
    # less than one row (sum 1,998 against 2,000 here): a key inserted twice would be a whole batch's keys over
    assert sum(inserted) == pytest.approx(totals[-1], abs=len(totals)), "every key is inserted once"
    assert [b.watermark_ms for b in out.batches] == [0] * len(out.batches)


def test_volume_watermarked_dedup_holds_the_records_the_watermark_has_not_passed():
    delay, rate, trigger = 2000, 20_000, 1000
    out = volume_run({"kind": "dedup", "watermark_delay_ms": delay}, keys=10_000_000)
    totals, removed = store(out), store(out, field="num_rows_removed")
    # sparse keys: each record is its own (key, event time); the state is what came after the watermark, the
    # delay plus the batch the watermark lags by, and everything older was removed
    assert max(totals) <= rate * (delay + 2 * trigger) / 1000
    assert totals[-1] >= rate * delay / 1000
    assert sum(removed) > 0 and sum(removed) + totals[-1] == pytest.approx(sum(input_rows(out)), rel=0.01)
    # a plain dedup over the same sparse keys keeps them all
    assert store(volume_run({"kind": "dedup"}, keys=10_000_000))[-1] > 3 * totals[-1]
