"""What the oracles' verdicts say, beyond pass or fail (reference/judge/oracles.py, spec section 5).

Found by mutation testing the judge: which batch, partition and rows a
failing verdict names, how many versions a passing one counted, when a check
has nothing to judge, and a damaged file a load can fall back past. Each
expectation is derived by hand from the crafted outcome.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from reference.language.catalogue import make, scenario_dict
from reference.judge.oracles import FAIL, PASS, Verdict, check_outcome, failures
from reference.protocol.logs import CommitEntry, encode_entry
from reference.protocol.outcome import Outcome, Recovery
from reference.protocol.run import run_scenario
from reference.language.scenario import Scenario
from reference.protocol.changelog import decode_state_file, encode_state_file
from reference.protocol.state_store import store_files


@pytest.fixture(scope="module")
def count() -> tuple[Any, Outcome, Any]:
    scenario = make("aggregate", batches=5, retain=10)
    finished = run_scenario(scenario)
    return scenario, finished.outcome(), finished.storage


def verdict(scenario: Any, outcome: Outcome, check: str, storage: Any = None) -> Verdict:
    return next(v for v in check_outcome(scenario, outcome, storage) if v.check == check)


def test_describe_prints_expected_and_actual_only_for_a_failure_that_has_them():
    assert Verdict("no_loss", FAIL, "short", batch=3, actual=[1, 2]).describe() == (
        '[FAIL] no_loss (batch 3): short\n    expected: null\n    actual:   [1, 2]')
    assert Verdict("no_loss", FAIL, "short", expected=4).describe().endswith("expected: 4\n    actual:   null")
    assert Verdict("no_loss", FAIL, "short").describe() == "[FAIL] no_loss: short"
    assert Verdict("no_loss", PASS, "fine", expected=4, actual=4).describe() == "[PASS] no_loss: fine"


def test_identity_names_the_lowest_partition_beyond_the_scenario(count):
    scenario, outcome, _ = count
    state = {sid: dict(parts, **{"12": {}, "9": {}}) for sid, parts in outcome.state.items()}
    v = verdict(scenario, dataclasses.replace(outcome, state=state), "identity")
    assert v.status == FAIL and v.partition == 9 and v.message.startswith("partition 9 is not one of the scenario's")


def test_state_equivalence_counts_every_version_it_compared(count):
    scenario, outcome, _ = count
    versions = sum(len(vs) for parts in outcome.state.values() for vs in parts.values())
    assert versions == 2 * 5    # 2 partitions, versions 1..5 all retained (retain 10)
    v = verdict(scenario, outcome, "state_equivalence")
    assert v.status == PASS and v.message == "10 retained versions equal the failure-free run"


def test_exactly_once_names_the_first_uncommitted_batch_with_a_sink_commit(count):
    scenario, outcome, _ = count
    sink = outcome.sink + (dataclasses.replace(outcome.sink[0], batch=8), dataclasses.replace(outcome.sink[0], batch=7))
    v = verdict(scenario, dataclasses.replace(outcome, sink=sink), "output_semantics")
    assert v.status == FAIL and v.batch == 7


@pytest.fixture(scope="module")
def wide() -> tuple[Scenario, Outcome]:
    """A stateless pass-through, at-least-once, 2 source partitions x 6 records = 12 rows per batch."""
    d = scenario_dict("map", batches=3, sink="at_least_once")
    d["source"]["records_per_partition_per_batch"] = 6
    scenario = Scenario.from_dict(d)
    return scenario, run_scenario(scenario).outcome()


def with_rows(outcome: Outcome, batch: int, rows: tuple[Any, ...]) -> Outcome:
    return dataclasses.replace(outcome, sink=tuple(dataclasses.replace(e, rows=rows) if e.batch == batch else e
                                                   for e in outcome.sink))


def test_at_least_once_verdicts_show_at_most_ten_rows(wide):
    scenario, outcome = wide
    assert len(outcome.sink[1].rows) == 12
    lost = verdict(scenario, with_rows(outcome, 1, ()), "output_semantics")
    assert "lost rows" in lost.message and len(lost.expected) == 10 and len(lost.actual) == 10
    foreign = tuple([f"stranger-{i:02d}", i] for i in range(12))
    extra = verdict(scenario, with_rows(outcome, 1, outcome.sink[1].rows + foreign), "output_semantics")
    assert "never produces" in extra.message
    assert extra.actual == [json.dumps([f"stranger-{i:02d}", i]) for i in range(10)]


def test_at_least_once_shows_at_most_ten_strangers_of_a_re_run_batch(wide):
    scenario, outcome = wide
    stray = dataclasses.replace(outcome.sink[0], batch=5, rows=tuple([f"s{i:02d}", i] for i in range(12)))
    wrong = dataclasses.replace(outcome, sink=outcome.sink + (stray,),
                                recoveries=(Recovery(restart=1, resumed_at=5, rerun_batches=(5,)),))
    v = verdict(scenario, wrong, "output_semantics")
    assert "no committed batch produces" in v.message and len(v.actual) == 10


def test_retention_leaves_a_run_that_stopped_with_an_error_to_no_loss(count):
    scenario, outcome, _ = count
    state = json.loads(json.dumps(outcome.state))
    state["0"]["1"].pop("4")
    wrong = dataclasses.replace(outcome, state=state, error="stopped")
    assert verdict(scenario, wrong, "retention").status == PASS
    assert verdict(scenario, dataclasses.replace(wrong, error=None), "retention").status == FAIL


def test_lineage_of_a_stateless_query_has_nothing_to_trace():
    scenario = make("map", batches=3)
    finished = run_scenario(scenario)
    v = verdict(scenario, finished.outcome(), "lineage", finished.storage)
    assert v.status == PASS and v.message == "no committed state to trace"


def test_checkpoint_names_a_damaged_snapshot_even_when_loads_fall_back_past_it(count):
    """SPARK-21696: a corrupt snapshot must fall back to changelogs; the state still loads right, but the
    checkpoint check names the damaged file."""
    scenario, outcome, storage = count
    damaged = storage.copy()
    path = next(p for (v, _u, kind), p in store_files(damaged, "0", 1).items() if v == 4 and kind == "snapshot")
    damaged.write(path, damaged.read(path)[:5], overwrite=True)
    bad = {v.check: v for v in failures(check_outcome(scenario, outcome, damaged))}
    assert "checkpoint" in bad and "state_equivalence" not in bad
    v = bad["checkpoint"]
    # the message names the file and says why it does not decode (a snapshot cut to 5 bytes: its header)
    assert v.message.startswith(f"{path} is damaged (it does not decode: ") and "truncated" in v.message
    assert (v.partition, v.version) == (1, 4)


def test_describe_cuts_expected_and_actual_at_300_characters():
    text = Verdict("no_loss", FAIL, "long", expected="e" * 400, actual="a" * 400).describe()
    expected_line, actual_line = text.split("\n")[1:]
    assert expected_line == '    expected: "' + "e" * 299 and actual_line == '    actual:   "' + "a" * 299


def test_the_async_progress_limit_rounds_the_interval_up_to_whole_batches():
    from reference.judge.oracles import async_progress_replay_limit
    # batches are planned every max(trigger, 100) ms; an entry persists once the interval has passed; the
    # restart re-runs from after the previous persisted entry through the newest batch planned, and the latest
    # persisted entry is itself one of the batches planned and not committed (2, or the pipeline depth)
    assert async_progress_replay_limit(make("map", "async_progress")) == 2 + 2 - 1          # 200 ms / 100 ms
    assert async_progress_replay_limit(make("map", "async_progress", progress={
        "mode": "async", "checkpoint_interval_ms": 250})) == 3 + 2 - 1                      # ceil(2.5)
    assert async_progress_replay_limit(make("map", "async_progress", trigger_interval_ms=300)) == 1 + 2 - 1
    assert async_progress_replay_limit(make("map", "async_progress", pipelining=True, pipeline_depth=3)) == 2 + 3 - 1


def test_reconstruction_loads_each_version_from_its_own_snapshot_too(count):
    """A snapshot of version 2 with wrong (well-formed) content: loading version 2 from it differs."""
    scenario, outcome, storage = count
    tampered = storage.copy()
    path = next(p for (v, _u, kind), p in store_files(tampered, "0", 1).items() if v == 2 and kind == "snapshot")
    header, records = decode_state_file(tampered.read(path), path)
    tampered.write(path, encode_state_file(header, tuple((k, v + 1) for k, v in records)), overwrite=True)
    v = verdict(scenario, outcome, "reconstruction", tampered)
    assert v.status == FAIL and (v.partition, v.version) == (1, 2) and "the snapshot of version 2" in v.message


def test_reconstruction_counts_every_load_from_every_base(count):
    """Versions 1..5 retained, snapshots at 2 and 4: version v loads from version 0 and from each snapshot
    at or below it, so 1 + 2 + 2 + 3 + 3 = 11 loads per partition, 22 for both."""
    scenario, outcome, storage = count
    v = verdict(scenario, outcome, "reconstruction", storage)
    assert v.status == PASS and v.message == "22 loads from every base equal the failure-free run"


def test_checkpoint_verdicts_name_every_one_of_several_problems(count):
    scenario, outcome, storage = count
    half = storage.copy()
    half.delete("commits/4")
    v = verdict(scenario, dataclasses.replace(outcome, checkpoint_files=tuple(half.list())), "checkpoint", half)
    assert (v.expected, v.actual) == (4, 3)
    listed = sorted(p for p in storage.list() if p.startswith("sink/"))
    thin = storage.copy()
    for path in listed[:6]:
        thin.delete(path)
    v = verdict(scenario, outcome, "checkpoint", thin)
    assert v.message.startswith(f"2 problems: 6 file(s) the outcome lists are not in the checkpoint, first "
                                f"{listed[0]}\n") and f"sink_files: {listed[0]}: file not found" in v.message
    two = storage.copy()
    two.delete("commits/2")
    two.delete("offsets/3")
    v = verdict(scenario, dataclasses.replace(outcome, checkpoint_files=tuple(two.list())), "checkpoint", two)
    assert v.message.startswith("3 problems: commit_order: commits/2 is missing") and "commit_has_offsets" in v.message


def test_retention_names_the_first_version_that_would_not_load(count):
    scenario, outcome, _ = count
    v = verdict(scenario, dataclasses.replace(outcome, state_errors=("first error", "second error")), "retention")
    assert v.message == "a retained version would not load: first error (and 1 more)"


def test_an_unreadable_commit_entry_is_a_verdict_not_a_traceback(count):
    scenario, outcome, storage = count
    older = storage.copy()
    older.write("commits/1", b"v1\n{", overwrite=True)
    verdicts = {v.check: v for v in check_outcome(scenario, outcome, older)}
    assert verdicts["lineage"].status == PASS          # an unreadable older entry names no lineage to check
    assert verdicts["checkpoint"].status == FAIL and "commits/1" in verdicts["checkpoint"].message
    latest = storage.copy()
    latest.write("commits/4", b"v1\n{", overwrite=True)
    verdicts = {v.check: v for v in check_outcome(scenario, outcome, latest)}
    for check in ("reconstruction", "lineage"):
        assert verdicts[check].status == FAIL and verdicts[check].message.startswith("unreadable checkpoint file: "
                                                                                     "commits/4")
    assert verdicts["checkpoint"].status == FAIL and "commits/4" in verdicts["checkpoint"].message


def test_a_verdict_is_frozen_and_its_dict_leaves_out_what_it_does_not_say():
    v = Verdict("no_loss", FAIL, "short", batch=3)
    assert v.to_dict() == {"check": "no_loss", "status": FAIL, "message": "short", "batch": 3}
    with pytest.raises(dataclasses.FrozenInstanceError):
        v.status = PASS   # type: ignore[misc]


def test_identity_names_the_lowest_store_the_query_does_not_have(count):
    scenario, outcome, _ = count
    v = verdict(scenario, dataclasses.replace(outcome, state=dict(outcome.state, **{"8": {}, "7": {}})), "identity")
    assert v.status == FAIL and v.operator == "7"


def test_exactly_once_shows_the_rows_of_the_uncommitted_batch_it_names(count):
    scenario, outcome, _ = count
    sink = outcome.sink + (dataclasses.replace(outcome.sink[0], batch=8),
                           dataclasses.replace(outcome.sink[1], batch=7))
    v = verdict(scenario, dataclasses.replace(outcome, sink=sink), "output_semantics")
    assert v.batch == 7 and v.actual == list(outcome.sink[1].rows)


def test_at_least_once_duplicates_and_stray_batches_show_at_most_ten_rows(wide):
    scenario, outcome = wide
    rows = outcome.sink[1].rows
    v = verdict(scenario, with_rows(outcome, 1, rows + rows[:1]), "output_semantics")
    assert "duplicate" in v.message and v.actual == [json.dumps(rows[0])]
    v = verdict(scenario, with_rows(outcome, 1, rows + rows), "output_semantics")
    assert "duplicate" in v.message and len(v.actual) == 10
    stray = dataclasses.replace(outcome.sink[0], batch=6)
    v = verdict(scenario, dataclasses.replace(outcome, sink=outcome.sink + (stray,)), "output_semantics")
    assert "neither committed nor re-run" in v.message and v.actual == list(stray.rows)[:10] and len(v.actual) == 10


def test_file_reading_checks_pass_a_stopped_run_whose_checkpoint_holds_no_commit(count):
    scenario, outcome, storage = count
    no_commits = storage.copy()
    for path in no_commits.list("commits/"):
        no_commits.delete(path)
    stopped = dataclasses.replace(outcome, error="stopped before its first commit")
    for check in ("reconstruction", "lineage"):
        assert verdict(scenario, stopped, check, no_commits).status == PASS


def test_unreadable_metadata_and_an_outcome_without_boundaries_are_verdicts(count):
    scenario, outcome, storage = count
    broken = storage.copy()
    broken.write("metadata", b"v1\n{", overwrite=True)
    v = verdict(scenario, outcome, "checkpoint", broken)
    assert v.status == FAIL and v.message.startswith("unreadable metadata: metadata: ")
    shapeless = dataclasses.replace(outcome, batches=(dataclasses.replace(outcome.batches[0], start_offsets=None),)
                                    + outcome.batches[1:])
    [only] = check_outcome(scenario, shapeless, storage)
    assert (only.check, only.status) == ("outcome_shape", FAIL) and "batch 0 has no start_offsets" in only.message


def test_identity_counts_partitions_from_zero_and_source_partitions_per_batch(count):
    scenario, outcome, _ = count
    state = {sid: dict(parts, **{"2": {}}) for sid, parts in outcome.state.items()}   # partitions are 0 and 1
    assert verdict(scenario, dataclasses.replace(outcome, state=state), "identity").partition == 2
    short = dataclasses.replace(outcome.batches[0], start_offsets=(0,), end_offsets=(3,))
    v = verdict(scenario, dataclasses.replace(outcome, batches=(short,) + outcome.batches[1:]), "outcome_shape")
    assert v.message == "outcome cannot be judged: ValueError(\"batch 0's offsets name 1 and 1 source partitions; " \
                        "the scenario has 2\")"


def test_an_outcome_whose_offsets_are_not_numbers_cannot_be_judged(count):
    scenario, outcome, _ = count
    wrong = dataclasses.replace(outcome.batches[0], end_offsets=("x", "y"))
    [only] = check_outcome(scenario, dataclasses.replace(outcome, batches=(wrong,) + outcome.batches[1:]))
    assert (only.check, only.status) == ("outcome_shape", FAIL) and "TypeError" in only.message


def test_the_untimed_async_progress_verdict_states_its_limit():
    scenario = make("map", "async_progress", batches=4)
    v = verdict(scenario, run_scenario(scenario).outcome(), "replay_bound")
    assert v.status == PASS and "at most 3 batches" in v.message


def test_lineage_goes_on_past_an_unreadable_older_commit_entry(count):
    scenario, outcome, storage = count
    both = storage.copy()
    both.write("commits/1", b"v1\n{", overwrite=True)
    entry = CommitEntry.read(both, 2)
    lineage = {sid: dict(parts) for sid, parts in entry.state_lineage.items()}
    lineage["0"]["1"] = "r9b2p1a9"
    both.write("commits/2", encode_entry({"batch": 2, "watermark_ms": entry.watermark_ms,
                                          "next_trackers": entry.next_trackers, "state_lineage": lineage}),
               overwrite=True)
    v = verdict(scenario, outcome, "lineage", both)
    assert v.status == FAIL and (v.version, v.expected) == (3, "r9b2p1a9")


def test_no_loss_passes_a_stateful_run_of_empty_input_that_committed_no_batch():
    """A rate source too slow to emit a row in its duration: nothing to lose, and a backend that skips empty
    batches (as Spark does) commits none, so there is no newest version to look for."""
    d = scenario_dict("aggregate", batches=2)
    d["source"] = {"kind": "rate", "partitions": 1, "rows_per_second": 1, "duration_s": 0.5}
    scenario = Scenario.from_dict(d)
    finished = run_scenario(scenario)
    nothing = dataclasses.replace(finished.outcome(), batches=())
    v = verdict(scenario, nothing, "no_loss", finished.storage)
    assert (v.status, v.message) == (PASS, "all input up to the committed offsets is reflected")
    v = verdict(scenario, nothing, "retention", finished.storage)
    assert (v.status, v.message) == (PASS, "nothing to retain")


def test_retention_of_a_stateless_query_has_nothing_to_retain():
    scenario = make("map", batches=2)
    finished = run_scenario(scenario)
    v = verdict(scenario, finished.outcome(), "retention", finished.storage)
    assert (v.status, v.message) == (PASS, "nothing to retain")
