"""Hostile input, round two (issue 36): ``check`` never writes outside a checkpoint, and no command loses a
checkpoint, a scenario or earlier results.

Sections: 1. names read from a checkpoint never become a path outside it; 2. nothing is lost (``--overwrite`` in
every phase, ``--out`` onto an input, atomic writes, results kept, links never written through); 3. tampered
checkpoints fail ``check`` naming the file and the field; 4. reads outside, size refusals, tracebacks, exit
codes and flags. Every case runs in a sandbox folder; where a case could write outside it, a snapshot of the
sandbox's parent before and after shows that nothing there changed. Runs first in ``make test``
(``tests/conftest.py``).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest

from spark_impl.state_store.sst_files import content_hash
from hostile_cli import failed_lines, lightspeed, write_crashed_count


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A running count with a crash after a state commit: scenario.json, outcome.json and checkpoint/."""
    return write_crashed_count(tmp_path_factory.mktemp("written"))


@pytest.fixture
def sandbox(tmp_path: Path) -> Path:
    """An empty folder whose parent (``tmp_path``) holds only it and a ``victim/`` folder with one file."""
    (tmp_path / "victim").mkdir()
    (tmp_path / "victim" / "keep.txt").write_text("the user's file\n")
    (tmp_path / "sandbox").mkdir()
    return tmp_path / "sandbox"


@pytest.fixture
def work(written: Path, sandbox: Path) -> Path:
    """A private copy of ``written`` inside the sandbox, which a test may damage."""
    shutil.copytree(written, sandbox / "w")
    return sandbox / "w"


def tree(folder: Path) -> dict[str, tuple[str, bytes]]:
    """Every entry under ``folder``: its kind and its bytes (a link's target), to show what a command changed."""
    out: dict[str, tuple[str, bytes]] = {}
    for path in sorted(folder.rglob("*")):
        rel = str(path.relative_to(folder))
        if path.is_symlink():
            out[rel] = ("link", os.readlink(path).encode())
        elif path.is_file():
            out[rel] = ("file", path.read_bytes())
        else:
            out[rel] = ("dir", b"")
    return out


def outside(sandbox: Path) -> dict[str, tuple[str, bytes]]:
    """What the sandbox's parent holds outside the sandbox."""
    return {k: v for k, v in tree(sandbox.parent).items() if not (k == sandbox.name or k.startswith(sandbox.name + "/"))}


def check_cli(capsys: pytest.CaptureFixture[str], work: Path, checkpoint: Path | None = None,
              outcome: Path | None = None, scenario: Path | None = None) -> tuple[int, str, str]:
    return lightspeed(capsys, "check", outcome or work / "outcome.json", "--scenario",
                      scenario or work / "scenario.json", "--checkpoint", checkpoint or work / "checkpoint")


# ======================================================== 1. names read from a checkpoint stay inside it


SNAPSHOT = "state/0/0/4_r1b3p0a0.snapshot"   # the newest snapshot of partition 0, on its committed chain


def as_spark_checkpoint(checkpoint: Path) -> None:
    """Make the checkpoint's metadata name the PySpark engine's snapshot format, so ``check`` decodes its
    snapshots with that engine's reader (which restores them into a local RocksDB)."""
    head, body = (checkpoint / "metadata").read_text().split("\n", 1)
    meta = json.loads(body)
    meta["snapshot_format"] = "rocksdb-sst-manifest"
    (checkpoint / "metadata").write_text(head + "\n" + json.dumps(meta, sort_keys=True, separators=(",", ":")))


def plant_manifest(checkpoint: Path, *, other_files: list[dict[str, Any]] | None = None,
                   ssts: list[dict[str, Any]] | None = None, extra: dict[str, Any] | None = None) -> None:
    """Replace ``SNAPSHOT`` by a manifest of the engine's format, its checksum recomputed, as a tamperer can."""
    body = {"format": "lightspeed-rocksdb-snapshot", "format_version": 1, "version": 4, "uid": "r1b3p0a0",
            "parent_uid": "r1b2p0a0", "ssts": ssts or [], "other_files": other_files or [], **(extra or {})}
    raw = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    (checkpoint / SNAPSHOT).write_text(json.dumps({"crc32": zlib.crc32(raw), "manifest": body}))


def inline(name: str, data: bytes = b"pwned\n") -> dict[str, Any]:
    return {"name": name, "size_bytes": len(data), "data_b64": base64.b64encode(data).decode()}


def sst(checkpoint: Path, local_name: str, data: bytes = b"sst bytes") -> dict[str, Any]:
    """An SST entry whose checkpoint file is there, with the right size and hash."""
    digest = content_hash(data)
    dfs = f"000008-{digest}-v4.sst"
    (checkpoint / "state/0/0/SSTs").mkdir(parents=True, exist_ok=True)
    (checkpoint / "state/0/0/SSTs" / dfs).write_bytes(data)
    return {"local_name": local_name, "dfs_name": dfs, "size_bytes": len(data), "content_hash": digest}


HOSTILE_NAMES = {
    "absolute": lambda victim: str(victim / "keep.txt"),
    "dot-dot": lambda victim: "../../../../../../../../../../../../" + str(victim / "keep.txt").lstrip("/"),
    "nested": lambda victim: "db/../../x",
    "a bare dot-dot": lambda victim: "..",
    "NUL": lambda victim: "CURRENT\x00x",
    "a terminal escape": lambda victim: "\x1b]0;owned\x07CURRENT",
    "over 255 bytes": lambda victim: "x" * 256,
}


@pytest.mark.parametrize("field", ["other_files", "ssts"])
@pytest.mark.parametrize("how", list(HOSTILE_NAMES))
def test_a_manifest_naming_a_file_outside_fails_check_naming_the_field_and_writes_nothing_there(
        capsys: pytest.CaptureFixture[str], work: Path, sandbox: Path, how: str, field: str) -> None:
    checkpoint = work / "checkpoint"
    as_spark_checkpoint(checkpoint)
    name = HOSTILE_NAMES[how](sandbox.parent / "victim")
    if field == "other_files":
        plant_manifest(checkpoint, other_files=[inline(name), inline("CURRENT")])
    else:
        plant_manifest(checkpoint, ssts=[sst(checkpoint, name)], other_files=[inline("CURRENT")])
    before = outside(sandbox)
    code, out, _err = check_cli(capsys, work)
    assert code == 1, out
    assert outside(sandbox) == before
    key = "name" if field == "other_files" else "local_name"
    assert any(SNAPSHOT in line and f"{field}[0].{key}" in line for line in failed_lines(out)), out
    assert "\x1b" not in out and "\x00" not in out


def test_restores_go_to_a_private_temporary_folder_removed_afterwards(work: Path, sandbox: Path) -> None:
    """The old fixed restore folder (``$TMPDIR/lightspeed-rocksdb``) could be made in advance by anyone (as a link
    to where they like); each restore now goes to a folder of its own made by ``mkdtemp`` (mode 0700), which is
    removed afterwards, so nothing is left in the temporary folder."""
    temp = sandbox / "tmp"
    temp.mkdir()
    checkpoint = work / "checkpoint"
    as_spark_checkpoint(checkpoint)
    plant_manifest(checkpoint, other_files=[inline("CURRENT"), inline("MANIFEST-000001")])
    before = outside(sandbox)
    done = subprocess.run([sys.executable, "-m", "experiments.cli", "check", str(work / "outcome.json"),
                           "--scenario", str(work / "scenario.json"), "--checkpoint", str(checkpoint)],
                          capture_output=True, text=True, env={**os.environ, "TMPDIR": str(temp)}, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr   # RocksDB cannot open that snapshot: it is damaged
    assert "Traceback" not in done.stderr
    assert outside(sandbox) == before
    assert list(temp.iterdir()) == []


def test_a_store_works_in_a_private_folder_of_its_own(sandbox: Path) -> None:
    from reference.storage import LocalStorage
    from spark_impl.state_store import RocksDBStateStore
    stores = [RocksDBStateStore(LocalStorage(sandbox / "cp"), "0", 0, local_root=sandbox / "local") for _ in range(2)]
    try:
        folders = [store.local_dir for store in stores]
        assert folders[0] != folders[1] and all(f.parent == sandbox / "local" for f in folders)
        assert all(f.stat().st_mode & 0o777 == 0o700 for f in folders)
    finally:
        for store in stores:
            store.close()
    assert list((sandbox / "local").iterdir()) == []
