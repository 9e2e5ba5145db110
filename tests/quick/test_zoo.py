"""The bug zoo: every planted Spark bug is caught by the check named here, and the real store passes.

The zoo runs once for the module (about ten seconds, no JVM); each bug is then
one test, so a plant that slips through, or is caught only by some other
check, names itself.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiments import exit_codes, planted_stores
from experiments.cli import main
from experiments.store_bug_sequences import SEQUENCES
from experiments.zoo import JIRAS, ZooError, ZooRow, resolve, run_zoo
from spark_impl.state_store import RocksDBStateStore

ROOT = Path(__file__).resolve().parents[2]

# The check that must catch each planted bug (others may catch it too).
CAUGHT_BY = {
    "SPARK-43404": "state_equivalence",    # the retry's version has no file of its own
    "SPARK-45419": "reconstruction",       # a snapshot after the rollback holds an SST of a rolled-back version
    "SPARK-46711": "state_equivalence",    # the committed version's changelog is gone
    "SPARK-47568": "reconstruction",       # a snapshot named for a version it does not hold
    "SPARK-48105": "maintenance",          # the upload refuses a checkpoint whose files vanish under it, loudly
    "SPARK-49363/SPARK-49770": "reconstruction",  # the reloaded version's snapshot now holds a later state
    "SPARK-51717": "reconstruction",       # the next snapshot reuses the first one's SST by name
    "SPARK-55892": "reconstruction",       # the delayed snapshot references a purged SST
    "SPARK-55510": "state_equivalence",    # replayed state keeps the range-deleted keys
    "SPARK-19677": "lineage",              # the first run's delta file was rewritten
    "SPARK-21696": "state_equivalence",    # the newest version does not load past a corrupt snapshot
}
SPEC_SECTION_6 = ("SPARK-43404", "SPARK-45419", "SPARK-46711", "SPARK-47568", "SPARK-48105",
                  "SPARK-49363/SPARK-49770", "SPARK-51717", "SPARK-55892", "SPARK-55510", "SPARK-19677",
                  "SPARK-21696")


@pytest.fixture(scope="module")
def zoo() -> dict[str, ZooRow]:
    rows = run_zoo(list(JIRAS))  # in a scratch directory in memory where the machine has one
    return {row.jira: row for row in rows}


def test_the_zoo_holds_every_bug_of_spec_section_6_with_a_sequence_and_a_plant():
    assert set(JIRAS) == set(SPEC_SECTION_6) == set(CAUGHT_BY) == set(SEQUENCES) == set(planted_stores.PLANTED)
    for jira, (what, cls) in planted_stores.PLANTED.items():
        assert issubclass(cls, RocksDBStateStore) and cls is not RocksDBStateStore, jira
        assert what and jira.split("/")[0] in (cls.__doc__ or ""), f"{cls.__name__} names its bug"


@pytest.mark.parametrize("jira", SPEC_SECTION_6)
def test_a_planted_bug_is_caught_by_its_check_and_the_real_store_passes(zoo, jira):
    row = zoo[jira]
    assert row.caught, f"{jira} planted ({row.planted}) but no check caught it"
    assert CAUGHT_BY[jira] in row.checks_failed, f"{jira}: caught by {row.caught_by}, not {CAUGHT_BY[jira]}"
    assert row.detail and row.seconds > 0
    assert row.caught_at_step and 1 <= row.caught_at_step_number <= row.steps
    assert row.unplanted_passes, f"the real store fails {jira}'s sequence: {row.unplanted_failures}"
    assert row.unplanted_failures == ()


@pytest.mark.parametrize("jira, step", [
    ("SPARK-45419", "commit w2 after the rollback"),             # its snapshot reuses u2's SST by name
    ("SPARK-47568", "case 2: maintenance holds version 4's checkpoint when the task reloads version 3"),
    ("SPARK-49363/SPARK-49770", "round 0: commit version 4"),   # its maintenance re-snapshots version 2
])
def test_a_plant_is_caught_right_after_the_step_that_does_the_damage(zoo, jira, step):
    """Judged as each step ends, the zoo names the step after which the mistake first shows."""
    row = zoo[jira]
    assert row.caught_at_step == step, row
    assert row.caught_at_step_number < row.steps, "caught before the sequence's end"


@pytest.mark.parametrize("jira", ["SPARK-43404", "SPARK-46711", "SPARK-19677"])
def test_the_checkpoint_rules_catch_a_committed_version_without_its_file(zoo, jira):
    """Written out as a commit log, the sequence's committed line breaks ``lineage_reachable``
    (reference/judge/checkpoint_rules.py): a version the commit log names has no file on the lineage chain."""
    assert any(f.startswith("checkpoint: lineage_reachable: ") for f in zoo[jira].failures), zoo[jira].failures


def test_only_takes_ids_with_or_without_the_prefix_and_refuses_unknown_ones():
    assert resolve(["55510", "spark-43404"]) == ["SPARK-43404", "SPARK-55510"]
    assert resolve(["49770"]) == resolve(["SPARK-49363"]) == ["SPARK-49363/SPARK-49770"]
    assert resolve(None) == list(JIRAS)
    with pytest.raises(ZooError, match=r"--only 'SPARK-12345': not a bug of the zoo; expected one of SPARK-43404"):
        resolve(["SPARK-12345"])


def test_the_command_prints_the_table_and_writes_the_rows_the_paper_reads(tmp_path, capsys):
    out = tmp_path / "zoo.json"
    paper = tmp_path / "paper-zoo.json"
    code = main(["zoo", "--only", "55510", "--out", str(out), "--paper-out", str(paper), "--quiet"])
    printed = capsys.readouterr().out
    assert code == exit_codes.OK, printed
    assert "SPARK-55510" in printed and "1 of 1 planted bugs caught" in printed
    rows = json.loads(out.read_text())
    assert [r["jira"] for r in rows] == ["SPARK-55510"]
    assert {"jira", "planted", "caught_by", "seconds", "unplanted_passes"} <= set(rows[0])
    assert not paper.exists(), "a partial zoo never replaces the paper's file"


def test_a_plant_that_slips_through_fails_the_command(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(planted_stores.PLANTED, "SPARK-55510", ("nothing planted", RocksDBStateStore))
    code = main(["zoo", "--only", "SPARK-55510", "--out", str(tmp_path / "z.json"), "--quiet"])
    printed = capsys.readouterr().out
    assert code == exit_codes.CHECK_FAILED
    assert "NOT CAUGHT" in printed and "0 of 1 planted bugs caught" in printed


def test_an_unknown_id_is_bad_input_naming_it(tmp_path, capsys):
    code = main(["zoo", "--only", "SPARK-1", "--out", str(tmp_path / "z.json")])
    assert code == exit_codes.BAD_INPUT
    assert "--only 'SPARK-1': not a bug of the zoo" in capsys.readouterr().err


def test_the_papers_zoo_file_is_a_whole_run_with_every_bug_caught():
    rows = json.loads((ROOT / "paper" / "results" / "zoo.json").read_text())
    assert [r["jira"] for r in rows] == list(JIRAS)
    for r in rows:
        assert CAUGHT_BY[r["jira"]] in r["caught_by"].split(", "), r["jira"]
        assert r["unplanted_passes"] is True and isinstance(r["seconds"], (int, float))
