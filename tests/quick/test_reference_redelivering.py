"""The redelivering source (issue 17 part 2): a broker that reorders and redelivers, and one fetch-and-dedup layer
that gives deterministic offsets and persists what recovery needs (``reference/protocol/redelivery.py``)."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reference.protocol import layout
from reference.language.catalogue import make, redelivering_source, scenario_dict
from reference.protocol.incarnation import Incarnation
from reference.judge.explorer import Model, first_graph, writing_cuts
from reference.judge.oracles import check_outcome, failures
from reference.protocol.redelivery import Delivery, FetchLayer, broker_timeline, sources_path
from reference.protocol.run import Run, Schedule, run_scenario
from reference.language.scenario import Broker, Scenario, ScenarioError
from reference.protocol.sources import SourceData
from reference.language.steps import DRIVER_STEPS
from reference.protocol.storage import CheckpointFormatError, DurableStorage


# ------------------------------------------------------------ planted mistakes (never in a shipped path)
class NoDedup(FetchLayer):
    """Offsets in arrival order, without dedup: every redelivery gets a new offset."""

    def is_new(self, message_id: int, seen: set[int]) -> bool:
        return True


class DedupNotPersisted(FetchLayer):
    """The ledger is persisted (a re-run reads its batch) but a restarted layer's dedup set starts empty."""

    restored = 0

    def restore(self, storage, latest_logged):
        super().restore(storage, latest_logged)
        self.restored = len(self.state.ledger)

    def dedup_set(self) -> set[int]:
        return set(self.state.ledger[self.restored:])


def planted(layer: type[FetchLayer]) -> Model:
    return Model(incarnation_class=type(f"{layer.__name__}Incarnation", (Incarnation,), {"fetch_layer_class": layer}))


def redelivering(operator: str = "aggregate", mode: str = "sync", **kw) -> Scenario:
    return make(operator, mode, source_kind="redelivering", **kw)


# A hand-made timeline: message 2 overtakes 0 and 1; 2 and 0 come again, 0 to the other subscriber.
HAND = [Delivery(5, 2, 0, False), Delivery(7, 0, 1, False), Delivery(9, 1, 0, False), Delivery(12, 2, 0, True),
        Delivery(15, 3, 1, False), Delivery(20, 0, 0, True)]


# ------------------------------------------------------------ validation
@pytest.mark.parametrize("field,value,words", [
    ("redelivery_rate", 1.5, "a redelivery rate outside [0, 1]"),
    ("redelivery_rate", -0.1, "a redelivery rate outside [0, 1]"),
    ("ack_coverage", 2, "an ACK coverage outside [0, 1]"),
    ("messages", 0, "expected an integer >= 1"),
    ("interval_ms", 0, "expected an integer >= 1"),
    ("reorder_ms", -1, "expected an integer >= 0"),
    ("redeliver_after_ms", "soon", "expected an integer"),
    ("partitions", 2, "unknown field"),
])
def test_bad_broker_parameters_are_refused_naming_the_field(field, value, words):
    d = scenario_dict(source_kind="redelivering")
    d["source"][field] = value
    with pytest.raises(ScenarioError) as err:
        Scenario.from_dict(d)
    assert err.value.field == f"source.{field}"
    assert words in str(err.value)


def test_a_redelivering_source_round_trips_and_has_one_partition():
    sc = redelivering()
    assert Scenario.from_dict(sc.to_dict()).to_dict() == sc.to_dict()
    assert sc.sources["main"].partitions == 1
    assert sc.to_dict()["source"] == redelivering_source()


# ------------------------------------------------------------ the broker
def test_without_reordering_or_redelivery_the_broker_delivers_in_publish_order():
    messages, deliveries = broker_timeline(Broker(5, interval_ms=10), keys=3, seed=1, side="main")
    assert [(d.ms, d.message_id, d.redelivery) for d in deliveries] == [(0, 0, False), (10, 1, False),
                                                                         (20, 2, False), (30, 3, False),
                                                                         (40, 4, False)]
    assert [m.publish_ms for m in messages] == [0, 10, 20, 30, 40]


@pytest.mark.parametrize("coverage", [0.0, 1.0])
def test_every_message_is_redelivered_at_rate_one_to_the_other_subscriber_under_full_coverage(coverage):
    _messages, deliveries = broker_timeline(Broker(8, interval_ms=10, reorder_ms=30, redelivery_rate=1.0,
                                                   redeliver_after_ms=100, ack_coverage=coverage),
                                            keys=3, seed=2, side="main")
    by_id: dict[int, list[Delivery]] = {}
    for d in deliveries:
        by_id.setdefault(d.message_id, []).append(d)
    assert sorted(by_id) == list(range(8))
    for first, again in by_id.values():
        assert (first.redelivery, again.redelivery) == (False, True)
        assert again.ms == first.ms + 100
        assert (again.subscriber != first.subscriber) == (coverage == 1.0)


def test_the_catalogue_broker_delivers_out_of_order():
    data = SourceData.of(redelivering())
    published = [r.event_time_ms for r in data.partitions[0]]   # event time is the publish time
    assert published != sorted(published)
    assert sorted(published) == [i * 10 for i in range(24)]     # every message once: 24 messages, one per 10 ms


# ------------------------------------------------------------ the fetch layer
def test_the_fetch_layer_dedups_and_gives_offsets_in_first_delivery_order():
    layer = FetchLayer(0, HAND)
    layer.fetch(10)
    assert layer.state.ledger == (2, 0, 1)
    layer.fetch(20)
    assert layer.state.ledger == (2, 0, 1, 3)
    assert layer.ids(1, 3) == (0, 1)
    with pytest.raises(CheckpointFormatError, match=r"offsets \[3, 5\) are not all assigned"):
        layer.ids(3, 5)
    wrong = NoDedup(0, HAND)
    wrong.fetch(10)
    wrong.fetch(20)
    assert wrong.state.ledger == (2, 0, 1, 2, 3, 0)


def test_a_restart_resumes_from_the_latest_logged_batch_and_ignores_an_orphan():
    storage = DurableStorage()
    layer = FetchLayer(0, HAND)
    layer.fetch(10)
    layer.persist(storage, 0)
    layer.fetch(13)                        # batch 1 fetched (the redelivery of 2 dropped), its offsets never logged
    layer.persist(storage, 1)
    again = FetchLayer(0, HAND)
    again.restore(storage, 0)
    assert (again.state.through_ms, again.state.ledger) == (10, (2, 0, 1))
    again.fetch(20)
    assert again.state.ledger == (2, 0, 1, 3)
    with pytest.raises(CheckpointFormatError, match="sources/0/4: missing"):
        FetchLayer(0, HAND).restore(storage, 4)


@settings(max_examples=80)
@given(seed=st.integers(0, 10**6), messages=st.integers(1, 30), interval=st.integers(1, 20),
       reorder=st.integers(0, 60), rate=st.floats(0, 1), after=st.integers(1, 120), coverage=st.floats(0, 1),
       cuts=st.lists(st.integers(0, 800), max_size=8), crash=st.integers(0, 8), logged=st.integers(0, 8))
def test_every_message_gets_one_offset_the_same_across_a_crash_at_any_cut(seed, messages, interval, reorder, rate,
                                                                          after, coverage, cuts, crash, logged):
    """Whatever the broker and the cuts, and wherever a crash loses the fetches after the last logged batch,
    the ledger names every message once, in the same order as a run without a crash."""
    _m, deliveries = broker_timeline(Broker(messages, interval, reorder, rate, after, coverage), 5, seed, "main")
    times = sorted(cuts) + [max(d.ms for d in deliveries)]
    crash, logged = min(crash, len(times) - 1), min(logged, crash, len(times) - 1)
    straight = FetchLayer(0, deliveries)
    for t in times:
        straight.fetch(t)
    assert sorted(straight.state.ledger) == list(range(messages))
    storage, layer = DurableStorage(), FetchLayer(0, deliveries)
    for b, t in enumerate(times[:crash + 1]):
        layer.fetch(t)
        layer.persist(storage, b)          # the fetch of batches logged+1..crash is lost: their offsets never logged
    restarted = FetchLayer(0, deliveries)
    restarted.restore(storage, logged)
    for t in times[logged + 1:]:
        restarted.fetch(t)
    assert restarted.state.ledger == straight.state.ledger
    expected = [d.message_id for d in sorted(deliveries, key=lambda d: (d.ms, d.message_id)) if not d.redelivery]
    assert list(straight.state.ledger) == expected


# ------------------------------------------------------------ whole runs
@settings(max_examples=25)
@given(step=st.sampled_from(DRIVER_STEPS), batch=st.integers(0, 3), when=st.sampled_from(["before", "after"]),
       seed=st.integers(0, 1000), mode=st.sampled_from(["sync", "pipelining", "async_state"]))
def test_a_crash_at_any_driver_step_keeps_every_oracle_and_the_same_offsets(step, batch, when, seed, mode):
    crash = [{"at": {"step": step, "batch": batch, "when": when}, "kind": "driver_crash"}]
    sc = redelivering(mode=mode, seed=seed, faults=crash)
    result = run_scenario(sc)
    assert result.error is None
    assert failures(check_outcome(sc, result.outcome(), result.storage)) == []
    data = SourceData.of(sc)
    last = max(b.id for b in result.outcome().batches)
    layer = FetchLayer(0, data.redelivering[0].deliveries)
    layer.restore(result.storage, last)
    first_delivered = [d.message_id for d in data.redelivering[0].deliveries if not d.redelivery]
    assert list(layer.state.ledger) == first_delivered        # every message once, in first-delivery order


def test_a_crash_between_the_fetch_and_the_offset_log_write_is_a_cut_and_is_safe():
    sc = redelivering()
    inc = first_graph(sc, Model())
    fetch, log = inc.nid("plan", 1), inc.nid("offset_log_write", 1)
    cut = next(c for c in writing_cuts(inc) if fetch in c and log not in c)
    run = Run(sc, schedule=Schedule(prefix=cut, crash_after_prefix=True))
    run.life()
    assert run.storage.exists(sources_path(0, 1)) and not run.storage.exists(layout.offset_path(1))
    finished = run.finish()
    assert failures(check_outcome(sc, finished.outcome(), finished.storage, external_crashes=1)) == []


def test_offsets_without_dedup_are_caught_by_the_output_oracle():
    sc = redelivering()
    result = planted(NoDedup).run(sc)
    caught = Counter(v.check for v in failures(check_outcome(sc, result.outcome(), result.storage)))
    assert caught["output_semantics"] >= 1 and caught["state_equivalence"] >= 1


def test_the_simulators_volume_mode_refuses_a_redelivering_source_by_name():
    from experiments.profiles import sim_profile
    from sim.simulation import SimModeError, Simulation
    with pytest.raises(SimModeError, match="a redelivering source needs data mode"):
        Simulation(redelivering(), sim_profile("local_spark"), mode="volume")


def test_each_batch_fetches_exactly_through_the_arrival_of_its_last_record():
    """One message every 70 ms, no reordering, no redelivery, 60 ms cuts: each batch takes one message, so batch b
    fetches through message b's delivery (b * 70 ms) and its persisted fetch state names offsets 0..b. Hand-derived;
    the first batch holds a single record (a fetch skipped for it would leave offset 0 without a message)."""
    d = scenario_dict("aggregate", source_kind="redelivering")
    d["source"].update({"messages": 5, "interval_ms": 70, "reorder_ms": 0, "batch_ms": 60, "redelivery_rate": 0.0})
    scenario = Scenario.from_dict(d)
    finished = run_scenario(scenario)
    outcome = finished.outcome()
    assert outcome.error is None
    assert [(b.id, b.start_offsets, b.end_offsets) for b in outcome.batches] == \
        [(b, (b,), (b + 1,)) for b in range(5)]
    for b in range(5):
        state = json.loads(finished.storage.read(sources_path(0, b)))
        assert (state["through_ms"], state["ledger"]) == (70 * b, list(range(b + 1))), b


def test_the_broker_has_two_subscribers_and_message_values_one_to_nine():
    """600 messages, each redelivered: both subscribers, and only they, get deliveries, and the values drawn
    cover 1..9 and nothing else."""
    import dataclasses
    side, src = next(iter(redelivering().sources.items()))
    big = dataclasses.replace(src.broker, messages=600, redelivery_rate=1.0)
    messages, deliveries = broker_timeline(big, keys=4, seed=3, side=side)
    assert {d.subscriber for d in deliveries} == {0, 1}
    assert {m.value for m in messages} == set(range(1, 10))


def test_messages_and_deliveries_are_values():
    import dataclasses
    with pytest.raises(dataclasses.FrozenInstanceError):
        HAND[0].ms = 1  # type: ignore[misc]
    scenario = Scenario.from_dict(scenario_dict(source_kind="redelivering"))
    src = next(iter(scenario.sources.values()))
    messages, _ = broker_timeline(src.broker, keys=4, seed=1, side="events")
    with pytest.raises(dataclasses.FrozenInstanceError):
        messages[0].value = 0  # type: ignore[misc]


def test_the_fetch_state_file_is_canonical_json_of_format_version_one():
    storage = DurableStorage()
    layer = FetchLayer(0, HAND)
    layer.fetch(10)
    layer.persist(storage, 0)
    assert storage.read(sources_path(0, 0)) == b'{"batch": 0, "ledger": [2, 0, 1], "through_ms": 10, "version": 1}'
    storage.write(sources_path(0, 1), b'{"version": 1, "batch": 1, "through_ms": 12, "ledger": [2]}')
    again = FetchLayer(0, HAND)
    again.restore(storage, 1)
    assert (again.state.through_ms, again.state.ledger) == (12, (2,))
    storage.write(sources_path(0, 2), b'{"version": 2, "batch": 2, "through_ms": 12, "ledger": [2]}')
    with pytest.raises(CheckpointFormatError, match="sources/0/2: fetch state version 2, expected 1"):
        FetchLayer(0, HAND).restore(storage, 2)


@pytest.mark.parametrize("raw", [b"not json", b'{"version": 1, "batch": 0}',
                                 b'{"version": 1, "batch": 0, "through_ms": 5, "ledger": 5}',
                                 b'{"version": 1, "batch": 0, "through_ms": "soon", "ledger": []}'])
def test_a_damaged_fetch_state_is_refused_naming_the_file(raw):
    storage = DurableStorage()
    storage.write(sources_path(0, 3), raw)
    with pytest.raises(CheckpointFormatError, match=r"sources/0/3: unreadable fetch state"):
        FetchLayer(0, HAND).restore(storage, 3)


def test_offsets_before_zero_are_refused():
    layer = FetchLayer(0, HAND)
    layer.fetch(10)
    with pytest.raises(CheckpointFormatError, match=r"offsets \[-1, 2\) are not all assigned"):
        layer.ids(-1, 2)
