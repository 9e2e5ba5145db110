"""The repository holds no half-resolved merge: a conflict marker once reached the README unnoticed."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SKIP = {".venv", ".git", "results", ".mutation", ".hypothesis", ".pytest_cache", ".mypy_cache", "node_modules"}
TEXT = {".py", ".md", ".typ", ".toml", ".cff", ".json", ".mk", ".bib", ".txt", ".cfg", ".yml", ".yaml"}


def _files() -> list[Path]:
    out = []
    for folder, dirs, names in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in SKIP and not d.endswith(".egg-info")]
        out += [Path(folder) / n for n in names if Path(n).suffix in TEXT or n == "Makefile"]
    return out


def test_no_file_holds_a_merge_conflict_marker() -> None:
    files = _files()
    assert any(f.name == "README.md" for f in files), "the walk must see the project's own files"
    marked = [f"{f.relative_to(ROOT)}:{n}" for f in files
              for n, line in enumerate(f.read_text(errors="replace").splitlines(), 1)
              if line.startswith(("<<<<<<< ", ">>>>>>> "))]
    assert not marked, f"unresolved merge conflict at {marked}"
