"""The checks that tie an outcome to its scenario and its checkpoint: identity, watermarks, checkpoint.

Each test hands the judge a correct outcome with one thing made wrong and
requires exactly that check to fail, naming it; the untouched outcome passes
every check. Wrong checkpoints are built by hand from a correct one: missing,
empty, half-written, of another scenario, with files removed, and with a
changelog edited and its checksum recomputed.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from reference.protocol import layout
from reference.language.catalogue import make
from reference.protocol.changelog import decode_state_file, encode_state_file
from reference.judge.oracles import check_outcome, failures
from reference.protocol.outcome import Outcome
from reference.protocol.run import run_scenario
from reference.protocol.state_store import store_files
from reference.protocol.storage import DurableStorage


@pytest.fixture(scope="module")
def correct() -> tuple[Any, Outcome, DurableStorage]:
    scenario = make("window_aggregate", batches=5, retain=3)
    finished = run_scenario(scenario)
    return scenario, finished.outcome(), finished.storage


def failing(scenario: Any, outcome: Outcome, storage: Any = None) -> list[str]:
    return [v.check for v in failures(check_outcome(scenario, outcome, storage))]


def test_the_correct_outcome_and_checkpoint_pass_every_check(correct):
    scenario, outcome, storage = correct
    verdicts = check_outcome(scenario, outcome, storage)
    assert [v.check for v in verdicts if v.status != "pass"] == []
    assert {"identity", "watermarks", "checkpoint"} <= {v.check for v in verdicts}


# ------------------------------------------------------------------ identity


def test_identity_rejects_an_outcome_of_another_scenario(correct):
    scenario, outcome, storage = correct
    assert failing(scenario, dataclasses.replace(outcome, scenario="something-else"), storage) == ["identity"]


def test_identity_rejects_an_outcome_run_with_another_seed(correct):
    scenario, outcome, storage = correct
    assert failing(scenario, dataclasses.replace(outcome, seed=scenario.seed + 1), storage) == ["identity"]


def test_identity_rejects_state_of_an_operator_the_query_does_not_have(correct):
    scenario, outcome, _storage = correct
    extra = dict(outcome.state, **{"7": {"0": {}}})
    assert failing(scenario, dataclasses.replace(outcome, state=extra)) == ["identity"]


def test_identity_rejects_a_partition_beyond_the_scenario(correct):
    scenario, outcome, _storage = correct
    state = {sid: dict(parts, **{"9": {}}) for sid, parts in outcome.state.items()}
    assert failing(scenario, dataclasses.replace(outcome, state=state)) == ["identity"]


# ---------------------------------------------------------------- watermarks


def test_watermarks_rejects_a_committed_batch_without_its_watermark(correct):
    scenario, outcome, storage = correct
    batches = (dataclasses.replace(outcome.batches[3], watermark_ms=None),)
    wrong = dataclasses.replace(outcome, batches=outcome.batches[:3] + batches + outcome.batches[4:])
    assert failing(scenario, wrong, storage) == ["watermarks"]


def test_watermarks_rejects_a_watermark_other_than_the_failure_free_one(correct):
    scenario, outcome, storage = correct
    # batch 4 runs with max event time of batches 0..3 minus the 10 ms delay; one ms off is wrong
    wrong_batch = dataclasses.replace(outcome.batches[4], watermark_ms=outcome.batches[4].watermark_ms + 1)
    wrong = dataclasses.replace(outcome, batches=outcome.batches[:4] + (wrong_batch,))
    assert outcome.batches[4].watermark_ms > 0, "the scenario's watermark has advanced by batch 4"
    assert failing(scenario, wrong, storage) == ["watermarks"]


# ---------------------------------------------------------------- checkpoint


def test_checkpoint_rejects_an_empty_directory(correct):
    scenario, outcome, _storage = correct
    assert "checkpoint" in failing(scenario, outcome, DurableStorage())


def test_checkpoint_rejects_a_checkpoint_of_another_scenario(correct):
    scenario, outcome, _storage = correct
    other = run_scenario(make("window_aggregate", batches=5, retain=3, seed=99)).storage
    assert "checkpoint" in failing(scenario, outcome, other)


def test_checkpoint_rejects_a_checkpoint_with_a_state_file_removed(correct):
    scenario, outcome, storage = correct
    damaged = storage.copy()
    victim = sorted(store_files(damaged, "0", 1).values())[-1]
    damaged.delete(victim)
    assert "checkpoint" in failing(scenario, outcome, damaged)


def test_checkpoint_rejects_a_checkpoint_with_its_last_commit_removed(correct):
    scenario, outcome, storage = correct
    half = storage.copy()
    half.delete(layout.commit_path(outcome.batches[-1].id))
    assert "checkpoint" in failing(scenario, outcome, half)


def test_checkpoint_and_reconstruction_reject_a_changelog_edited_with_its_checksum_recomputed(correct):
    scenario, outcome, storage = correct
    tampered = storage.copy()
    files = store_files(tampered, "0", 0)
    newest = max(v for (v, _u, k) in files if k == "changelog")
    path = next(p for (v, _u, k), p in files.items() if v == newest and k == "changelog")
    header, records = decode_state_file(tampered.read(path), path)
    edited = tuple((key, 1_000_000) for key, _value in records) + (("edited-key", 1),)
    tampered.write(path, encode_state_file(header, edited), overwrite=True)   # a valid file, wrong content
    assert {"checkpoint", "reconstruction"} <= set(failing(scenario, outcome, tampered))


def test_checkpoint_rules_reject_a_commit_entry_written_out_of_batch_order(correct):
    scenario, outcome, storage = correct
    gap = storage.copy()
    gap.delete(layout.commit_path(outcome.batches[-2].id))   # commits/3 never written while commits/4 is
    listed = dataclasses.replace(outcome, checkpoint_files=tuple(gap.list()))
    verdict = next(v for v in check_outcome(scenario, listed, gap) if v.check == "checkpoint")
    assert verdict.status == "fail" and "commit_order" in verdict.message


def test_reconstruction_and_lineage_fail_when_the_outcome_commits_state_the_checkpoint_does_not_hold(correct):
    scenario, outcome, storage = correct
    no_commits = storage.copy()
    for path in no_commits.list(layout.COMMITS + "/"):
        no_commits.delete(path)
    bad = set(failing(scenario, outcome, no_commits))
    assert {"reconstruction", "lineage"} <= bad
