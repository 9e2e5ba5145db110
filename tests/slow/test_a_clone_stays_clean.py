"""A copy of the repository with nothing beside it: the documented commands write under the working directory's
``results/`` (or where they are told), never into the source tree, and the quote check says why it is skipped.

The copy is a git repository of this working tree's files (tracked and new, committed once), in a scratch folder
with no archived posts beside it; each command runs there on the copy's own code, as a user who cloned the
repository would run it. ``git status`` must be clean afterwards: ``results/`` is ignored, and any other file
a command wrote or changed is named.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = "experiments/scenarios/running-count-crash-after-wal.json"

# The commands of README.md's command line that need neither Spark nor hours, with their default outputs.
COMMANDS = [
    ["validate", SCENARIO],
    ["run", SCENARIO, "--backend", "reference", "--out", "results/outcome.json", "--checkpoint",
     "results/checkpoint"],
    ["check", "results/outcome.json", "--scenario", SCENARIO, "--checkpoint", "results/checkpoint"],
    ["run", SCENARIO, "--backend", "sim", "--out", "results/sim-outcome.json"],
    ["diff", SCENARIO, "--backends", "reference,sim", "--out", "results/diff"],
    ["explore", "experiments/scenarios/stateless-async-progress.json", "--workers", "1", "--out",
     "results/explore.json"],
    ["zoo", "--quiet"],
    ["experiment", "list"],
    ["experiment", "checkpoint-interval", "--quick", "--no-spark", "--no-figures", "--quiet"],
]


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The working tree's files as a fresh repository, alone in a scratch folder."""
    repo = tmp_path_factory.mktemp("alone") / "lightspeed-ref"
    files = _git(ROOT, "ls-files", "--cached", "--others", "--exclude-standard", "-z").split("\0")
    for name in filter(None, files):
        if (ROOT / name).is_file():
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, repo / name)
    _git(repo.parent, "init", "-q", str(repo))
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "the tree under test")
    assert not (repo.parent / "shared").exists() and not (repo.parent.parent / "shared").exists()
    return repo


def _env(repo: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LIGHTSPEED_")}
    env["PYTHONPATH"] = str(repo)   # the copy's own code, not this working tree's
    return env


def test_the_documented_commands_write_nothing_into_the_source_tree(clone: Path) -> None:
    for argv in COMMANDS:
        done = subprocess.run([sys.executable, "-m", "experiments.cli", *argv], cwd=clone, env=_env(clone),
                              capture_output=True, text=True, timeout=900)
        assert done.returncode in (0, 1), f"lightspeed {' '.join(argv)}: exit {done.returncode}\n{done.stderr}"
        assert _git(clone, "status", "--porcelain", "--untracked-files=all") == "", (
            f"lightspeed {' '.join(argv)} wrote into the source tree")
    assert (clone / "results" / "zoo" / "zoo.json").is_file()
    assert (clone / "results" / "outcome.json").is_file() and (clone / "results" / "explore.json").is_file()


def test_the_quote_check_is_skipped_saying_why_when_no_posts_are_beside_the_clone(clone: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "tests/quick/test_claims.py"],
                          cwd=clone, env=_env(clone), capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "SKIPPED [20] tests/quick/test_claims.py" in done.stdout, done.stdout[-3000:]
    assert "the archived posts are not here ($LIGHTSPEED_SOURCES is not set)" in done.stdout
    strict = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "tests/quick/test_claims.py"],
                            cwd=clone, env=dict(_env(clone), LIGHTSPEED_STRICT_SOURCES="1"), capture_output=True,
                            text=True, timeout=900)
    assert strict.returncode == 1 and "20 failed" in strict.stdout, strict.stdout[-3000:]
