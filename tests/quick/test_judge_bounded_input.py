"""What is read from outside is bounded and refused by name: ``reference/language/json_input.py`` and ``reference/language/size.py``.

JSON: a repeated key, NaN or Infinity (with where it is), nesting past ``MAX_JSON_DEPTH`` (even past the
interpreter's own limit) are refused. Sizes: a scenario larger than a backend holds is refused with the size
and the limit passed, and the simulator's volume mode is named exactly when it would run the scenario.
"""

from __future__ import annotations

import pytest

from reference.language.json_input import JsonInputError, loads, nesting
from reference.language.scenario import Scenario
from reference.language.size import (
    MATERIALISED,
    MAX_JSON_DEPTH,
    VOLUME,
    SizeLimits,
    estimate,
    file_too_large,
    refusal,
    source_batches,
    source_records,
    too_large,
)
from streamtest import scenario_dict


def refused(text: str | bytes) -> str:
    with pytest.raises(JsonInputError) as caught:
        loads(text)
    return str(caught.value)


def test_plain_json_reads_as_json():
    assert loads('{"a": [1, 2.5, "x", null, true]}') == {"a": [1, 2.5, "x", None, True]}
    assert loads(b'[{"b": {}}]') == [{"b": {}}]


def test_a_repeated_key_is_refused_naming_it():
    assert refused('{"a": 1, "b": {"c": 2, "c": 3}}') == 'key "c" is given twice in one object'
    assert refused('{"' + "k" * 200 + '": 1, "' + "k" * 200 + '": 2}') == 'key "' + "k" * 79 + ' is given twice ' \
                                                                           'in one object'


@pytest.mark.parametrize("text, says", [
    ('{"a": [1, {"b": NaN}]}', "a[1].b: NaN is not a number JSON allows"),
    ("[Infinity]", "[0]: Infinity is not a number JSON allows"),
    ('{"t": {"u": -Infinity}}', "t.u: -Infinity is not a number JSON allows"),
    ("NaN", "<document>: NaN is not a number JSON allows"),
    ('[1, {"x": 2}, [3, NaN, NaN]]', "[2][1]: NaN is not a number JSON allows"),
])
def test_nan_and_infinity_are_refused_naming_where(text, says):
    assert refused(text) == says


def test_malformed_json_and_bytes_that_are_not_utf8_are_refused():
    assert refused('{"a": ') == "not valid JSON: Expecting value at line 1 column 7"
    assert refused(b'"\xff"').startswith("not UTF-8 text") or "not valid JSON" in refused(b'"\xff"')


def test_nesting_is_bounded_and_never_exhausts_the_stack():
    assert loads("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH) is not None
    assert refused("[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1)) == \
        f"nested {MAX_JSON_DEPTH + 1} levels deep, deeper than the {MAX_JSON_DEPTH} this reads"
    assert refused("[" * 100_000 + "]" * 100_000) == f"nested deeper than the {MAX_JSON_DEPTH} levels this reads"
    assert refused('{"a":' * 70 + "1" + "}" * 70).startswith("nested 70 levels deep")


def test_nesting_counts_containers_only():
    assert nesting(1) == 0 and nesting([]) == 1 and nesting({"a": [1, {"b": []}]}) == 4
    assert nesting([[], [[[]]], {}]) == 4
    assert nesting([[[[]]], 1]) == 4 and nesting({"a": [[[]]], "b": "x"}) == 4   # past a scalar too


def test_the_first_of_several_constants_is_named():
    assert refused("[NaN, Infinity]") == "[0]: NaN is not a number JSON allows"
    assert refused("[1, Infinity, NaN]") == "[1]: Infinity is not a number JSON allows"


# ------------------------------------------------------------------------------------ sizes


def scenario(**source) -> Scenario:
    raw = scenario_dict("aggregate")
    raw["source"] = source or raw["source"]
    return Scenario.from_dict(raw)


def test_the_estimate_counts_records_batches_partitions_and_steps_without_allocating():
    generated = scenario()
    size = estimate(generated)
    assert (size.records, size.batches, size.state_partitions) == (2 * 3 * 4, 4, 2)
    assert size.graph_nodes == 4 * (6 + 2 * 6)
    rate = scenario(kind="rate", rows_per_second=10**12, duration_s=2, partitions=3)
    assert source_records(rate.sources["main"]) == (2 * 10**12 // 3) * 3
    assert source_batches(rate.sources["main"]) == 2000 // 1000 + 1
    explicit = scenario(kind="explicit", partitions=1, batch_ms=10, records=[[0, "k", 1, 0, 35], [0, "k", 1, 0, 5]])
    assert source_batches(explicit.sources["main"]) == 4 and source_records(explicit.sources["main"]) == 2


def test_too_large_names_the_first_limit_passed_with_the_numbers():
    assert too_large(scenario()) is None
    tight = SizeLimits(records=23, batches=3, state_partitions=1, graph_nodes=10, what="a tight backend")
    assert too_large(scenario(), tight) == ("24 records in 4 batches from 2 source partitions over 2 state "
                                            "partitions (72 protocol steps): records 24 exceed the 23 a tight "
                                            "backend can run here")
    assert "batches 4 exceed the 3" in (too_large(scenario(), SizeLimits(batches=3)) or "")
    assert "state partitions 2 exceed the 1" in (too_large(scenario(), SizeLimits(state_partitions=1)) or "")
    assert "graph nodes 72 exceed the 71" in (too_large(scenario(), SizeLimits(graph_nodes=71)) or "")
    assert "source partitions 2 exceed the 1" in (too_large(scenario(), SizeLimits(source_partitions=1)) or "")
    assert too_large(scenario(), SizeLimits(records=24, batches=4, state_partitions=2, graph_nodes=72)) is None


def test_the_refusal_names_the_volume_mode_only_where_it_would_run_the_scenario():
    rate = scenario(kind="rate", rows_per_second=10**12, duration_s=2, partitions=2)
    says = refusal(rate, MATERIALISED) or ""
    assert "records 2,000,000,000,000 exceed the 5,000,000" in says and "--sim-mode volume" in says
    assert refusal(rate, VOLUME) is None
    raw = scenario_dict("aggregate")
    raw["source"]["batches"] = 10**9
    many = Scenario.from_dict(raw)
    assert "--sim-mode volume" not in (refusal(many, MATERIALISED) or "x")
    assert "shrink the scenario" in (refusal(many, MATERIALISED) or "")
    assert "batches 1,000,000,000 exceed the 100,000 the simulator's volume mode" in (refusal(many, VOLUME) or "")
    redelivering = Scenario.from_dict(scenario_dict("aggregate", source_kind="redelivering"))
    assert refusal(redelivering, SizeLimits(records=1)) is not None
    assert "--sim-mode volume" not in (refusal(redelivering, SizeLimits(records=1)) or "")


def test_the_limits_are_the_documented_ones():
    """README, the command line: input files up to 256 MiB, checkpoint files up to 1 GiB, JSON 64 deep."""
    from reference.language.size import MAX_CHECKPOINT_FILE_BYTES, MAX_INPUT_FILE_BYTES
    assert (MAX_INPUT_FILE_BYTES, MAX_CHECKPOINT_FILE_BYTES, MAX_JSON_DEPTH) == (268_435_456, 1_073_741_824, 64)


def test_size_values_are_frozen():
    import dataclasses
    with pytest.raises(dataclasses.FrozenInstanceError):
        MATERIALISED.records = 1   # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        estimate(scenario()).records = 1   # type: ignore[misc]


def test_state_partitions_are_held_up_to_4096():
    raw = scenario_dict("aggregate", batches=1)
    raw["query"]["state_partitions"] = 4096
    assert too_large(Scenario.from_dict(raw)) is None
    raw["query"]["state_partitions"] = 4097
    assert "state partitions 4,097 exceed the 4,096" in (too_large(Scenario.from_dict(raw)) or "")


def test_the_volume_mode_counts_up_to_a_quadrillion_records():
    exactly = scenario(kind="rate", rows_per_second=10**12, duration_s=1000, partitions=1)
    assert estimate(exactly).records == 10**15 and too_large(exactly, VOLUME) is None
    more = scenario(kind="rate", rows_per_second=10**12 + 1, duration_s=1000, partitions=1)
    assert "records 1,000,000,000,001,000 exceed the 1,000,000,000,000,000" in (too_large(more, VOLUME) or "")


def test_batches_of_every_source_kind():
    """A rate source of 1 s in 7 ms batches: 142 whole batches and the last part of one. A redelivering
    source of 7 messages one every 10 ms, each first delivered up to 5 ms late: the last by 65 ms, so 7
    batches of 10 ms."""
    rate = scenario(kind="rate", rows_per_second=10, duration_s=1, partitions=1, batch_ms=7)
    assert source_batches(rate.sources["main"]) == 143
    raw = scenario_dict("aggregate", source_kind="redelivering")
    raw["source"].update(messages=7, interval_ms=10, reorder_ms=5, batch_ms=10)
    redelivering = Scenario.from_dict(raw)
    assert source_batches(redelivering.sources["main"]) == 7
    from reference.protocol.sources import SourceData
    assert SourceData.of(redelivering).planned_batches() <= 7
    import dataclasses
    explicit = scenario(kind="explicit", partitions=1, batch_ms=1, records=[[0, "k", 1, 0, 3]])
    assert source_batches(explicit.sources["main"]) == 4
    empty = dataclasses.replace(explicit.sources["main"], records=())
    assert source_batches(empty) == 1 and source_records(empty) == 0


def test_a_file_size_is_checked_against_its_limit():
    assert file_too_large(10, 10) is None
    assert file_too_large(11, 10) == "11 bytes, more than the 10 bytes this reads"
