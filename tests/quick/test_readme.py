"""README.md is a short manual: at most 400 lines, no dated measurement (the results files and the paper hold
the numbers), every file and folder it names exists, every ``make`` target it names is one, and it points
nowhere outside the repository."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
MAX_LINES = 400
# what a dated measurement looks like: a date, the machine's state when it was taken, a superseded figure, a
# measured duration or rate in a table cell
DATED = {
    r"\b20\d\d-\d\d-\d\d\b": "a date",
    r"(?i)load average": "the load of the machine a number was measured on",
    r"(?i)quiet machine|busy machine|shared machine|loaded machine": "the state of the machine it was measured on",
    r"(?i)\bsuperseded\b": "a superseded measurement",
    r"\|\s*[\d.,]+ ?(ms|s|x|%|rows/s|records/s)\s*\|": "a measured number in a table",
}
BUILT = ("paper/lightspeed-ref.pdf",)   # made by `make paper`, not kept in the repository
REPOSITORY_PATH = re.compile(r"`((?:docs|reference|sim|spark_impl|experiments|tests|paper|\.ci)/[\w./-]*)`")


def test_the_readme_is_at_most_400_lines():
    assert len(README.splitlines()) <= MAX_LINES, f"README.md has {len(README.splitlines())} lines"


@pytest.mark.parametrize("pattern", sorted(DATED))
def test_the_readme_holds_no_dated_measurement(pattern: str):
    found = [line for line in README.splitlines() if re.search(pattern, line)]
    assert not found, f"README.md holds {DATED[pattern]}: {found[0]!r}"


def test_a_dated_measurement_would_be_found():
    lines = ["| engine, every feature on | 202 ms | 302 ms |", "measured on 2026-11-25, load average 11-13"]
    assert {name for pattern, name in DATED.items() for line in lines if re.search(pattern, line)} == {
        "a date", "the load of the machine a number was measured on", "a measured number in a table"}


def test_every_file_and_folder_the_readme_names_exists():
    named = {path.rstrip("/.") for path in REPOSITORY_PATH.findall(README)}
    assert len(named) > 20, "the pattern must find the README's paths"
    missing = sorted(p for p in named if p not in BUILT and not (ROOT / p).exists())
    assert not missing, f"README.md names what does not exist: {missing}"


def test_every_make_target_the_readme_names_is_one():
    makefiles = [ROOT / "Makefile"] + [ROOT / m for m in re.findall(r"^include (\S+)", (ROOT / "Makefile").read_text(),
                                                                   re.M)]
    targets = {t for mk in makefiles for t in re.findall(r"^([\w-]+):", mk.read_text(), re.M)}
    named = set(re.findall(r"`make ([\w-]+)", README))
    assert {"demo", "test", "test-quick", "test-spark", "test-slow"} <= named
    assert named <= targets, f"not make targets: {sorted(named - targets)}"


def test_the_readme_points_nowhere_outside_the_repository():
    assert "../" not in README and "SPEC.md" not in README
