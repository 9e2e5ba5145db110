"""Claims registered before the data (issue 40): a result may judge a claim only if it was measured after the
claim's rule and target were last changed (experiments/registration.py). A change of tolerance, rule or target
therefore forces a new measurement.

The first test builds a small git repository holding the project's claims files, records a result at one
commit, changes a claim's target in the next and checks that the earlier result may no longer judge that claim
(and still may judge the others). The second holds the paper to it: every finding the paper counts as a verdict
was measured after its claim's registration.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from experiments.registration import NOW, _claim_paths, _needed, registered_at, unregistered

ROOT = Path(__file__).resolve().parents[2]


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


def _commit(repo: Path, message: str) -> str:
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", message)
    return _git(repo, "rev-parse", "HEAD")


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    """A git repository with the project's claims files (and what they import) as they are now."""
    listing = [p.relative_to(ROOT).as_posix() for p in (ROOT / "experiments").rglob("*.py")]
    assert len(_claim_paths(listing)) > 10
    for path in _needed(listing):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / path, tmp_path / path)
    _git(tmp_path, "init", "-q")
    return tmp_path


def test_a_target_changed_after_a_result_makes_that_result_unfit_to_judge_it(repo: Path) -> None:
    measured = _commit(repo, "claims registered; a result measured here")
    assert unregistered("pipe_speedup", [measured], repo) is None
    claims = repo / "experiments" / "pipelining" / "claims.py"
    text = claims.read_text()
    assert '"range",\n        2.0, 3.0,' in text
    claims.write_text(text.replace('"range",\n        2.0, 3.0,', '"range",\n        1.5, 3.0,'))
    # changed and not committed: registered now, after every result
    assert registered_at(repo)["pipe_speedup"] == NOW
    assert "changed in the working tree" in str(unregistered("pipe_speedup", [measured], repo))
    changed = _commit(repo, "pipelining: a wider target")
    reason = unregistered("pipe_speedup", [measured], repo)
    assert reason is not None and "must be measured again" in reason
    assert registered_at(repo)["pipe_speedup"] == changed
    # the other claims are as registered; a result measured after the change may judge it
    assert unregistered("om_cut_purge", [measured], repo) is None
    assert unregistered("pipe_speedup", [changed], repo) is None


def test_a_result_with_no_commit_or_an_unknown_one_judges_nothing(repo: Path) -> None:
    _commit(repo, "claims registered")
    assert "no commit" in str(unregistered("pipe_speedup", [], repo))
    assert "not in this repository" in str(unregistered("pipe_speedup", ["0" * 40], repo))
    # a commit read from a results file is never handed to git as an option: "--all" would make it answer for HEAD
    for tampered in ("--all", "HEAD", "-h", "abc def"):
        assert "not in this repository" in str(unregistered("pipe_speedup", [tampered], repo)), tampered


def test_every_finding_the_paper_counts_was_measured_after_its_claims_registration() -> None:
    """The committed results: a run whose units are fresh (the ledger) may count its findings, and only if each
    was measured after its claim was registered."""
    from experiments.section_content import Results
    results = Results(ROOT / "paper" / "results")
    runs = 0
    for path in sorted((ROOT / "paper" / "results").glob("*/*/results.json")):
        experiment, folder = path.parent.parent.name, path.parent.name
        backend, _, mode = folder.rpartition("-")
        run = results.run(experiment, backend, mode)
        assert run is not None, path
        runs += 1
        if not results.standing(run).counted:
            continue
        for finding in (run.doc.get("summary") or {}).get("findings") or []:
            assert unregistered(finding["claim"], list(results.standing(run).commits)) is None, (path, finding)
    assert runs > 10, "the committed results were not read"
