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
import errno
import functools
import json
import os
import re
import signal
import shutil
import subprocess
import sys
import time
import zlib
from pathlib import Path
from typing import Any

import pytest

from spark_impl.state_store.sst_files import content_hash
from experiments.checkpoint_dir import LOCK
from experiments.cli import main
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
    from reference.protocol.storage import LocalStorage
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


# ======================================================== 2. nothing is lost


INTERRUPT = """
import functools, os, signal, sys
from experiments import checkpoint_dir, cli
phase, number = sys.argv[1], int(sys.argv[2])

def hook(now):
    if now == phase:
        os.kill(os.getpid(), number)

cli.claimed = functools.partial(checkpoint_dir.claimed, hook=hook)
sys.exit(cli.main(sys.argv[3:]))
"""
NEW_BATCHES = 3   # the new run's scenario: the count of ``written`` without its crash, over fewer batches


@pytest.fixture(scope="module")
def replacement(written: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """Another scenario of the same query shape, and the checkpoint a clean run of it writes (as a tree)."""
    folder = tmp_path_factory.mktemp("replacement")
    raw = json.loads((written / "scenario.json").read_text())
    raw["faults"], raw["source"]["batches"] = [], NEW_BATCHES
    (folder / "new.json").write_text(json.dumps(raw))
    assert main(["run", str(folder / "new.json"), "--out", str(folder / "o.json"), "--checkpoint",
                 str(folder / "cp")]) == 0
    return folder / "new.json", tree(folder / "cp")


def leftovers(work: Path) -> list[str]:
    """What a run left beside the checkpoint directory (a sibling it was building the new checkpoint in)."""
    return sorted(p.name for p in work.iterdir() if p.name.startswith(".checkpoint"))


@pytest.mark.parametrize("signame", ["SIGINT", "SIGTERM", "SIGKILL"])
@pytest.mark.parametrize("phase", ["planning", "compute", "write", "swap", "cleanup"])
def test_an_interrupted_overwrite_leaves_the_old_checkpoint_or_the_new_one_whole(
        capsys: pytest.CaptureFixture[str], work: Path, replacement: tuple[Path, dict[str, Any]],
        monkeypatch: pytest.MonkeyPatch, phase: str, signame: str) -> None:
    """Issue 36: a Ctrl-C or SIGTERM just after "outcome written" took a 4,525-file checkpoint to 0 files. A signal
    delivered in each phase (by a hook, not a sleep) now leaves the old checkpoint whole (before the swap) or the
    new one (from the swap on); a SIGTERM or Ctrl-C also removes the half-built new one. SIGINT and SIGTERM are
    delivered to this process (the command line turns both into an interrupt, exit 130); SIGKILL to a child."""
    new_scenario, new_tree = replacement
    old_tree = tree(work / "checkpoint")
    number = int(getattr(signal, signame))
    argv = ["run", str(new_scenario), "--out", str(work / "new-outcome.json"), "--checkpoint",
            str(work / "checkpoint"), "--overwrite"]
    if signame == "SIGKILL":
        done = subprocess.run([sys.executable, "-c", INTERRUPT, phase, str(number), *argv], capture_output=True,
                              text=True, timeout=120)
        code, err = done.returncode, done.stderr
    else:
        from experiments import checkpoint_dir, cli

        def hook(now: str) -> None:
            if now == phase:
                os.kill(os.getpid(), number)
        monkeypatch.setattr(cli, "claimed", functools.partial(checkpoint_dir.claimed, hook=hook))
        code, _out, err = lightspeed(capsys, *argv)
    assert "Traceback" not in err, err
    after = tree(work / "checkpoint")
    after.pop(LOCK, None)   # a killed run leaves its lock file; the kernel dropped the lock itself
    assert after == (new_tree if phase == "cleanup" else old_tree), (phase, signame, sorted(after))
    if signame == "SIGKILL":
        assert code == -signal.SIGKILL
        assert len(leftovers(work)) <= 1   # the sibling it was building in (or the old one, swapped out)
    else:
        assert code == 130, err
        assert leftovers(work) == []


@pytest.mark.parametrize("phase", ["write", "swap"])
@pytest.mark.parametrize("errno_name", ["ENOSPC", "EACCES"])
def test_a_failed_write_of_the_new_checkpoint_keeps_the_old_one_and_is_bad_input(
        capsys: pytest.CaptureFixture[str], work: Path, replacement: tuple[Path, dict[str, Any]],
        monkeypatch: pytest.MonkeyPatch, phase: str, errno_name: str) -> None:
    """A full disk, or a folder the user may not write, while the new checkpoint is written or swapped in: the old
    checkpoint stays whole, and the error names the directory (exit 2, no traceback)."""
    from experiments import checkpoint_dir, cli

    def hook(now: str) -> None:
        if now == phase:
            code = getattr(errno, errno_name)
            raise OSError(code, os.strerror(code))
    monkeypatch.setattr(cli, "claimed", functools.partial(checkpoint_dir.claimed, hook=hook))
    old_tree = tree(work / "checkpoint")
    code, _out, err = lightspeed(capsys, "run", replacement[0], "--out", work / "o.json", "--checkpoint",
                                 work / "checkpoint", "--overwrite")
    assert code == 2 and str(work / "checkpoint") in err and os.strerror(getattr(errno, errno_name)) in err, err
    assert tree(work / "checkpoint") == old_tree and leftovers(work) == []


def test_an_overwrite_the_swap_could_not_finish_is_refused_before_the_run(
        capsys: pytest.CaptureFixture[str], work: Path, replacement: tuple[Path, dict[str, Any]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A folder of the old checkpoint that the user cannot write (it could not be removed once swapped out) is
    refused up front, naming it; nothing runs, nothing changes. (Root may write anywhere, so the permission is
    denied through ``os.access``, which the check asks.)"""
    import experiments.checkpoint_swap as swap
    denied = str(work / "checkpoint" / "state" / "0")
    real = os.access
    monkeypatch.setattr(swap.os, "access", lambda path, mode: False if str(path) == denied else real(path, mode))
    old_tree = tree(work / "checkpoint")
    code, _out, err = lightspeed(capsys, "run", replacement[0], "--out", work / "o.json", "--checkpoint",
                                 work / "checkpoint", "--overwrite")
    assert code == 2 and denied in err and "not writable" in err and "running" not in err, err
    assert tree(work / "checkpoint") == old_tree and not (work / "o.json").exists()


def test_a_link_planted_in_the_new_checkpoint_while_it_is_written_is_never_followed(
        capsys: pytest.CaptureFixture[str], work: Path, sandbox: Path, replacement: tuple[Path, dict[str, Any]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 36: replacing ``cp/sink`` by a link while a run wrote put 1,500 folders into the link's target. The
    new checkpoint is written through descriptors that never follow a link: the write fails, naming it, and
    nothing outside changes."""
    from experiments import checkpoint_dir, cli

    def plant(now: str) -> None:
        if now == "write":
            for folder in work.glob(".checkpoint.lightspeed-new-*"):
                shutil.rmtree(folder / "sink", ignore_errors=True)
                (folder / "sink").symlink_to(sandbox.parent / "victim")
            (work / "checkpoint" / "sink").rename(work / "sink-moved")   # and the old one's, swapped out later
            (work / "checkpoint" / "sink").symlink_to(sandbox.parent / "victim")
    monkeypatch.setattr(cli, "claimed", functools.partial(checkpoint_dir.claimed, hook=plant))
    before = outside(sandbox)
    code, _out, err = lightspeed(capsys, "run", replacement[0], "--out", work / "o.json", "--checkpoint",
                                 work / "checkpoint", "--overwrite")
    assert outside(sandbox) == before
    assert code == 2 and "checkpoint" in err, err
    assert (work / "checkpoint" / "sink").is_symlink()   # the planted link is left, never followed, never removed


def test_a_spark_workdir_holding_the_checkpoint_is_refused_and_a_resumed_one_is_said(
        capsys: pytest.CaptureFixture[str], work: Path) -> None:
    """Issue 36: ``--workdir W --checkpoint W/checkpoint --overwrite`` resumed the old checkpoint, then deleted it
    file by file, and exited 0. Both are refused before Spark starts; a workdir whose checkpoint the run would
    resume says so on screen."""
    workdir = work / "wd"
    shutil.copytree(work / "checkpoint", workdir / "checkpoint")
    before = tree(workdir)
    for checkpoint in (workdir / "checkpoint", workdir, workdir / "checkpoint" / "inner"):
        code, _out, err = lightspeed(capsys, "run", work / "scenario.json", "--backend", "spark", "--workdir",
                                     workdir, "--checkpoint", checkpoint, "--overwrite", "--out", work / "o.json")
        assert code == 2 and "--workdir" in err and "overlap" in err and "running" not in err, err
    assert tree(workdir) == before
    code, _out, err = lightspeed(capsys, "run", work / "scenario.json", "--backend", "reference", "--workdir",
                                 workdir)
    assert "RESUMES" in err and code == 2, err   # the reference takes no --workdir, but the note came first


@pytest.mark.parametrize("target", ["scenario", "checkpoint entry", "checkpoint folder", "link to scenario"])
def test_out_naming_an_input_or_a_path_inside_the_checkpoint_is_refused_before_the_run(
        capsys: pytest.CaptureFixture[str], work: Path, target: str) -> None:
    """Issue 36: ``--out`` naming the scenario silently replaced it; ``--out cp/offsets/3`` said "outcome written"
    while the file held the checkpoint's entry."""
    out = {"scenario": work / "scenario.json", "checkpoint entry": work / "checkpoint" / "offsets" / "3",
           "checkpoint folder": work / "checkpoint" / "new.json", "link to scenario": work / "link.json"}[target]
    if target == "link to scenario":
        out.symlink_to(work / "scenario.json")
    before = tree(work)
    code, _out, err = lightspeed(capsys, "run", work / "scenario.json", "--out", out, "--checkpoint",
                                 work / "checkpoint", "--overwrite")
    assert code == 2 and "running" not in err, err
    assert tree(work) == before
    code, _out, err = lightspeed(capsys, "explore", work / "scenario.json", "--out", out, "--quiet")
    assert code == 2 and tree(work) == before, err


def test_an_outcome_write_that_fails_leaves_the_earlier_file_whole(
        capsys: pytest.CaptureFixture[str], work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 36: on a full disk an existing valid ``--out`` was truncated to invalid JSON. The outcome is written
    to a temporary file in the same folder, flushed, then renamed over it."""
    import experiments.output_paths as paths
    out = work / "kept.json"
    out.write_text('{"an": "earlier outcome"}')

    def full(_fd: int, _data: Any) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(paths.os, "write", full)
    code, _out, err = lightspeed(capsys, "run", work / "scenario.json", "--out", out)
    assert code == 2 and os.strerror(errno.ENOSPC) in err and str(out) in err, err
    assert out.read_text() == '{"an": "earlier outcome"}'
    assert sorted(p.name for p in work.iterdir() if p.name.startswith(".kept")) == []


@pytest.mark.parametrize("how", ["symlink", "hard link"])
def test_an_outcome_is_never_written_through_a_link(capsys: pytest.CaptureFixture[str], work: Path, sandbox: Path,
                                                    how: str) -> None:
    victim = sandbox.parent / "victim" / "keep.txt"
    out = work / "out.json"
    if how == "symlink":
        out.symlink_to(victim)
    else:
        os.link(victim, out)
    before = outside(sandbox)
    code, _out, err = lightspeed(capsys, "run", work / "scenario.json", "--out", out)
    assert code == 2 and "link" in err and "running" not in err, err
    assert outside(sandbox) == before


EXPERIMENT = ["experiment", "offset-management", "--quick", "--no-spark", "--no-figures", "--quiet"]


def test_an_experiments_earlier_results_are_kept_unless_overwrite_is_given(capsys: pytest.CaptureFixture[str],
                                                                            sandbox: Path) -> None:
    """Issue 36: ``experiment NAME --out DIR`` replaced an existing ``results.json`` without asking. It is refused,
    before any point runs, unless ``--overwrite`` is given, as ``diff`` does."""
    (sandbox / "results.json").write_text('{"earlier": "results"}')
    code, out, err = lightspeed(capsys, *EXPERIMENT, "--out", sandbox)
    assert code == 2 and "--overwrite" in err and "==" not in out, out + err
    assert (sandbox / "results.json").read_text() == '{"earlier": "results"}'


@pytest.mark.parametrize("how", ["symlink", "hard link"])
def test_results_are_never_written_through_a_link(capsys: pytest.CaptureFixture[str], sandbox: Path,
                                                  how: str) -> None:
    victim = sandbox.parent / "victim" / "keep.txt"
    if how == "symlink":
        (sandbox / "results.json").symlink_to(victim)
    else:
        os.link(victim, sandbox / "results.json")
    before = outside(sandbox)
    code, out, err = lightspeed(capsys, *EXPERIMENT, "--out", sandbox, "--overwrite")
    assert code == 2 and "link" in err and "==" not in out, out + err
    assert outside(sandbox) == before


@pytest.mark.parametrize("where", ["an existing file", "a read-only place"])
def test_experiment_out_that_cannot_take_results_is_refused_before_any_point_runs(
        capsys: pytest.CaptureFixture[str], sandbox: Path, where: str) -> None:
    """Issue 36: it ran 7-28 s, then gave a traceback. (``/proc/sys`` stands for a read-only filesystem: even root
    cannot create a file there.)"""
    out = sandbox / "a-file" if where == "an existing file" else Path("/proc/sys/lightspeed-results")
    if where == "an existing file":
        out.write_text("the user's\n")
    started = time.perf_counter()
    code, _out, err = lightspeed(capsys, *EXPERIMENT, "--out", out)
    assert code == 2 and str(out) in err, err
    assert time.perf_counter() - started < 2


# ======================================================== 3. a tampered checkpoint fails check, naming file and field


@pytest.fixture(scope="module")
def windowed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A window aggregate (its watermark moves) with a crash after a state commit."""
    return write_crashed_count(tmp_path_factory.mktemp("windowed"), "window_aggregate", batches=6)


def edit_entry(path: Path, change: Any) -> None:
    """Change the JSON of a log entry or metadata (``v1`` then one JSON document), as a tamperer can."""
    head, body = path.read_text().split("\n", 1)
    document = json.loads(body)
    change(document)
    path.write_text(head + "\n" + json.dumps(document, sort_keys=True, separators=(",", ":")))


def nudge_max_event(entry: dict[str, Any]) -> None:
    for side in entry["next_trackers"][0]["max_event_ms"]:
        entry["next_trackers"][0]["max_event_ms"][side] += 100_000


TAMPERS = {   # (file, edit, what the failure line must name besides the file)
    "next_trackers max_event_ms": ("commits/4", nudge_max_event, "next_trackers[0].max_event_ms"),
    "next_trackers watermark": ("commits/3", lambda e: e["next_trackers"][0].update(
        watermark_ms=e["next_trackers"][0]["watermark_ms"] + 1000), "next_trackers[0].watermark_ms"),
    "commit watermark": ("commits/4", lambda e: e.update(watermark_ms=e["watermark_ms"] + 1000), "watermark"),
    "metadata id": ("metadata", lambda e: e.update(id="query-404"), "id"),
    "metadata scenario": ("metadata", lambda e: e.update(scenario="../../etc/passwd"), "scenario"),
    "offset extra field": ("offsets/3", lambda e: e.update(path="../../etc/passwd"), '"path"'),
    "commit extra field": ("commits/2", lambda e: e.update(note="x"), '"note"'),
    "tracker extra field": ("commits/2", lambda e: e["next_trackers"][0].update(extra=1),
                            "next_trackers[0].extra"),
    "metadata extra field": ("metadata", lambda e: e.update(path="/etc/passwd"), '"path"'),
}


@pytest.mark.parametrize("how", list(TAMPERS))
def test_a_tampered_log_entry_or_metadata_fails_check_naming_the_file_and_the_field(
        capsys: pytest.CaptureFixture[str], windowed: Path, tmp_path: Path, how: str) -> None:
    """Issue 36: each of these passed ``check`` (12 of 12 held). The commit entry's trackers are what recovery
    resumes the watermark from: the check recomputes them from the input and the offset log."""
    work = tmp_path / "w"
    shutil.copytree(windowed, work)
    file, change, field = TAMPERS[how]
    edit_entry(work / "checkpoint" / file, change)
    code, out, _err = check_cli(capsys, work)
    assert code == 1, out
    assert any(file in line and field in line for line in out.splitlines()), out


def test_a_sink_manifest_with_an_extra_field_fails_check_naming_it(capsys: pytest.CaptureFixture[str],
                                                                   work: Path) -> None:
    manifest = work / "checkpoint" / "sink" / "_manifest" / "2"
    body = json.loads(manifest.read_text())
    body["path"] = "../../etc/passwd"
    manifest.write_text(json.dumps(body))
    code, out, _err = check_cli(capsys, work)
    assert code == 1 and any("sink/_manifest/2" in line and '"path"' in line for line in out.splitlines()), out


def test_oracles_with_nothing_to_read_fail_naming_what_is_missing(capsys: pytest.CaptureFixture[str],
                                                                  work: Path) -> None:
    """Issue 36: with the state files deleted (as after a SIGKILL), ``reconstruction`` and ``retention`` passed:
    a check that read nothing is no evidence that it holds."""
    for path in (work / "checkpoint" / "state").rglob("*"):
        if path.is_file():
            path.unlink()
    code, out, _err = check_cli(capsys, work)
    assert code == 1
    failed = {found[1]: line for line in failed_lines(out) if (found := re.search(r"\[FAIL\] (\w+)", line))}
    assert {"reconstruction", "retention", "lineage"} <= set(failed), out
    assert "state/0/0/5_r1b4p0a0.changelog" in failed["reconstruction"]
    assert "version 3" in failed["retention"] and "missing" in failed["retention"]


def test_check_names_every_layout_problem_not_only_the_first(capsys: pytest.CaptureFixture[str], work: Path) -> None:
    """Issue 36: ``check`` reported the first layout problem only, while the README says it names every one."""
    checkpoint = work / "checkpoint"
    (checkpoint / "stray-file").write_text("x")
    (checkpoint / "offsets" / "07").write_text("x")
    (checkpoint / "stray-folder" / "deep").mkdir(parents=True)
    (checkpoint / "stray-folder" / "deep" / "f").write_text("x")
    (checkpoint / "state" / "0" / "9").mkdir()
    code, out, _err = check_cli(capsys, work)
    assert code == 1
    for name in ("stray-file", "offsets/07", "stray-folder", "state/0/9"):
        assert f"layout: {name}" in out, out
    assert "stray-folder/deep" not in out   # inside a stray folder: named once, with its folder


# ======================================================== 4. reads outside, size refusals, tracebacks, flags


def test_a_profile_name_never_reads_a_file_outside_the_shipped_profiles(
        capsys: pytest.CaptureFixture[str], work: Path, sandbox: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 36: ``--profile ../../x`` read a JSON file outside ``sim/profiles/``. A name is looked up only when it
    is a shipped profile's; a path is read only where it names a file as given."""
    from sim.cost_model import PROFILE_DIR
    evil = sandbox / "evil.json"
    evil.write_text((Path(PROFILE_DIR) / "local_spark.json").read_text())
    name = os.path.relpath(sandbox / "evil", PROFILE_DIR)
    (sandbox / "a" / "b").mkdir(parents=True)
    monkeypatch.chdir(sandbox / "a" / "b")   # where the name, as a path, names nothing
    assert not os.path.exists(name)
    code, _out, err = lightspeed(capsys, "run", work / "scenario.json", "--backend", "sim", "--profile", name,
                                 "--out", sandbox / "o.json")
    assert code == 2 and "no such" in err and not (sandbox / "o.json").exists(), err


def test_terminal_escapes_in_checkpoint_names_are_escaped_on_display(capsys: pytest.CaptureFixture[str],
                                                                     work: Path) -> None:
    """Issue 36: a file named with terminal escapes reached the terminal raw, so a checkpoint could forge what
    ``check`` prints."""
    forged = "\x1b[2K\r  [PASS] checkpoint: all good\x1b[8m"
    (work / "checkpoint" / forged).write_text("x")
    code, out, err = check_cli(capsys, work)
    assert code == 1 and "\x1b" not in out + err and "\r" not in out + err
    assert "\\x1b[2K\\x0d" in out, out
    code, out, err = lightspeed(capsys, "check", work / "outcome.json", "--scenario", work / "scenario.json",
                                "--checkpoint", work / forged)
    assert code == 2 and "\x1b" not in out + err, err


def rate_scenario(partitions: int) -> dict[str, Any]:
    return {"name": "rate", "seed": 1, "source": {"kind": "rate", "partitions": partitions, "rows_per_second": 1,
                                                 "duration_s": 1},
            "query": {"operator": {"kind": "map"}, "state_partitions": 1}}


def quick_refusal(capsys: pytest.CaptureFixture[str], *argv: Any) -> str:
    """Run a command that must be refused at once: exit 2 in under 2 s; its stderr."""
    started = time.perf_counter()
    code, _out, err = lightspeed(capsys, *argv)
    assert code == 2, err
    assert time.perf_counter() - started < 2, f"refused after {time.perf_counter() - started:.1f} s"
    return err


def test_a_rate_source_of_a_billion_partitions_is_refused_at_once_even_in_volume_mode(
        capsys: pytest.CaptureFixture[str], sandbox: Path) -> None:
    """Issue 36: ``validate`` said valid and a volume-mode run reached 5.2 GB in 20 s."""
    path = sandbox / "rate.json"
    path.write_text(json.dumps(rate_scenario(10**9)))
    err = quick_refusal(capsys, "run", path, "--backend", "sim", "--sim-mode", "volume", "--out", sandbox / "o.json")
    assert "source partitions" in err and "4,096" in err
    code, out, _err = lightspeed(capsys, "validate", path)
    assert "too large" in out and "source partitions" in out


def test_explore_of_a_scenario_too_large_to_enumerate_is_refused_with_the_limit(
        capsys: pytest.CaptureFixture[str], work: Path) -> None:
    """Issue 36: ``explore`` on a 1,500-batch scenario took 5-6 GB in 20 s; the space is estimated first."""
    raw = json.loads((work / "scenario.json").read_text())
    raw["source"]["batches"] = 1_500
    (work / "long.json").write_text(json.dumps(raw))
    err = quick_refusal(capsys, "explore", work / "long.json", "--quiet")
    assert "400" in err and "steps" in err


def test_experiment_seeds_and_workers_beyond_their_limits_are_refused_at_once(
        capsys: pytest.CaptureFixture[str], sandbox: Path) -> None:
    """Issue 36: ``experiment --seeds 100000000`` reached 10 GB in 60 s."""
    assert "--seeds" in quick_refusal(capsys, *EXPERIMENT, "--seeds", 100_000_000, "--out", sandbox / "r")
    assert "--workers" in quick_refusal(capsys, *EXPERIMENT, "--workers", 10**12, "--out", sandbox / "r")


def test_a_million_faults_or_a_huge_name_are_refused_at_once_without_echoing_them(
        capsys: pytest.CaptureFixture[str], work: Path) -> None:
    """Issue 36: a million repeated faults took 13 s and 0.9 GB before the refusal; a 100 MB name was echoed whole
    to the terminal."""
    raw = json.loads((work / "scenario.json").read_text())
    fault = json.dumps(raw["faults"][0])
    for count in (1_000_000, 20_000):
        (work / "faults.json").write_text(json.dumps({**raw, "faults": "@@"}).replace('"@@"', "[" + ",".join(
            [fault] * count) + "]"))
        err = quick_refusal(capsys, "validate", work / "faults.json")
        assert ("bytes" in err if count == 1_000_000 else "10,000" in err), err
    for size in (100 * 2**20, 10_000):
        (work / "name.json").write_text(json.dumps({**raw, "name": "@@"}).replace("@@", "n" * size))
        err = quick_refusal(capsys, "validate", work / "name.json")
        assert len(err) < 2_000, len(err)


@pytest.mark.parametrize("field", ["seed", "source.batches", "source.event_time.step_ms", "query.state_partitions"])
@pytest.mark.parametrize("number", ["1" + "0" * 309, "1e308", "1" + "0" * 5_000])
def test_numbers_that_overflow_are_bad_input_naming_the_field(capsys: pytest.CaptureFixture[str], work: Path,
                                                              field: str, number: str) -> None:
    """Issue 36: integers of 10^309 and more, and floats of 1e308, gave an ``OverflowError`` (``validate`` accepted
    most of them); integers over 4,300 digits a ``ValueError`` traceback."""
    raw = json.loads((work / "scenario.json").read_text())
    where = raw
    *folders, last = field.split(".")
    for name in folders:
        where = where[name]
    where[last] = "@@"
    (work / "big.json").write_text(json.dumps(raw).replace('"@@"', number))
    for command in ("validate", "run"):
        err = quick_refusal(capsys, command, work / "big.json", *(["--out", work / "o.json"] if command == "run" else []))
        assert (field in err if len(number) < 4_000 else "4,300 digits" in err), err
        assert len(err) < 2_000


def test_over_long_integers_in_an_outcome_or_an_offset_entry_never_give_a_traceback(
        capsys: pytest.CaptureFixture[str], work: Path) -> None:
    outcome = (work / "outcome.json").read_text()
    (work / "long.json").write_text(outcome.replace('"seed": 1', '"seed": 1' + "0" * 5_000, 1))
    code, _out, err = lightspeed(capsys, "check", work / "long.json", "--scenario", work / "scenario.json")
    assert code == 2 and "4,300 digits" in err and "long.json" in err, err
    entry = work / "checkpoint" / "offsets" / "3"
    head, body = entry.read_text().split("\n", 1)
    entry.write_text(head + "\n" + body.replace('"batch":3', '"batch":3' + "0" * 5_000))
    code, out, _err = check_cli(capsys, work)
    assert code == 1 and any("offsets/3" in line and "4,300 digits" in line for line in failed_lines(out)), out


@pytest.mark.parametrize("option", ["--out", "--checkpoint", "scenario", "check --checkpoint"])
def test_paths_too_long_for_the_system_are_bad_input(capsys: pytest.CaptureFixture[str], work: Path,
                                                     option: str) -> None:
    """Issue 36: paths over 4,096 bytes or with a component over 255 gave ``ENAMETOOLONG`` tracebacks."""
    for long in (work / ("x" * 256), work / "/".join(["y" * 200] * 25)):
        if option == "scenario":
            argv: list[Any] = ["run", long, "--out", work / "o.json"]
        elif option == "check --checkpoint":
            argv = ["check", work / "outcome.json", "--scenario", work / "scenario.json", "--checkpoint", long]
        else:
            argv = ["run", work / "scenario.json", option, long] + (["--out", work / "o.json"]
                                                                    if option == "--checkpoint" else [])
        err = quick_refusal(capsys, *argv)
        assert "long" in err or "File name too long" in err, err


def test_a_full_disk_while_taking_the_lock_is_bad_input_and_leaves_nothing(
        capsys: pytest.CaptureFixture[str], work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import experiments.checkpoint_dir as claim

    def full(_fd: int, _data: Any) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(claim.os, "write", full)
    code, _out, err = lightspeed(capsys, "run", work / "scenario.json", "--out", work / "o.json", "--checkpoint",
                                 work / "new-cp")
    assert code == 2 and os.strerror(errno.ENOSPC) in err and "lock" in err, err
    assert not (work / "new-cp").exists()


def test_a_checkpoint_folder_that_cannot_be_read_is_bad_input_naming_it(
        capsys: pytest.CaptureFixture[str], work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 36: ``EACCES`` on ``check --checkpoint`` gave a traceback. (Root may read anything, so the refusal is
    made by the listing, as the kernel makes it for another user.)"""
    import experiments.checkpoint_dir as claim
    denied = str(work / "checkpoint" / "state" / "0")
    real = os.scandir

    def scandir(path: Any) -> Any:
        if str(path) == denied:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), denied)
        return real(path)
    monkeypatch.setattr(claim.os, "scandir", scandir)
    code, _out, err = check_cli(capsys, work)
    assert code == 2 and denied in err and os.strerror(errno.EACCES) in err, err


@pytest.mark.parametrize("master", ["local[0]", "local[99999999999999999999]", "local[2,0]", "spark://host:0",
                                    "spark://host:99999"])
def test_a_master_that_cannot_be_is_refused_at_once(capsys: pytest.CaptureFixture[str], work: Path,
                                                    master: str) -> None:
    """Issue 36: ``local[0]`` and ``local[99999999999999999999]`` gave exit 3 after 7 s of Spark start-up."""
    for argv in (["run", work / "scenario.json", "--backend", "spark", "--out", work / "o.json"],
                 ["explore", work / "scenario.json", "--quiet"], EXPERIMENT):
        assert "--master" in quick_refusal(capsys, *argv, "--master", master)


@pytest.mark.parametrize("argv, names", [
    (["run", "{scenario}", "--overwrite", "--out", "{o}"], "--overwrite"),
    (["run", "{scenario}", "--backend", "sim", "--backend", "reference"], "--backend"),
    (["run", "{scenario}", "--out", "{o}", "--out", "{o}2"], "--out"),
    ([*EXPERIMENT, "--master", "local[2]"], "--master"),
    ([*EXPERIMENT[:-3], "--executor", "inline", "--no-spark"], "--executor"),
    (["zoo", "--no-paper", "--paper-out", "{o}"], "--paper-out"),
])
def test_conflicting_or_repeated_flags_are_refused(capsys: pytest.CaptureFixture[str], work: Path,
                                                   argv: list[str], names: str) -> None:
    """Issue 36: ``run --overwrite`` without ``--checkpoint``, ``--backend`` given twice and ``experiment --master X
    --no-spark`` were accepted silently."""
    argv = [a.format(scenario=work / "scenario.json", o=work / "o.json") for a in argv]
    err = quick_refusal(capsys, *argv)
    assert names in err, err
    assert not (work / "o.json").exists()


# ======================================================== 5. the property: nothing outside the sandbox changes


from hypothesis import given, settings, strategies as st  # noqa: E402

PIECES = ["..", ".", "", "/", "~", "victim", "keep.txt", "CURRENT", "x" * 300, "\x00", "\x1b[31m", "\n", "é", "%s"]


def hostile_names(victim: Path) -> st.SearchStrategy[Any]:
    """Names a tamperer could put in a checkpoint file: paths built of hostile pieces, the victim's own path, or
    no name at all."""
    built = st.lists(st.sampled_from(PIECES), min_size=1, max_size=6).map("/".join)
    return st.one_of(built, st.just(str(victim / "keep.txt")), st.just(f"../../../{victim.name}/keep.txt"),
                     st.integers(), st.none(), st.lists(st.text(max_size=3), max_size=2))


@settings(max_examples=20)
@given(data=st.data())
def test_property_no_tampered_manifest_or_metadata_makes_check_or_run_write_outside(
        written: Path, tmp_path_factory: pytest.TempPathFactory, data: st.DataObject) -> None:
    """Issue 36: hostile names in a snapshot manifest (its files and SSTs), in ``metadata`` and in a sink manifest;
    ``check`` and ``run --checkpoint --overwrite`` on that checkpoint must leave everything outside the sandbox as
    it was, and never print a traceback."""
    top = tmp_path_factory.mktemp("property")
    (top / "victim").mkdir()
    (top / "victim" / "keep.txt").write_text("the user's file\n")
    sandbox = top / "sandbox"
    shutil.copytree(written, sandbox / "w")
    work = sandbox / "w"
    checkpoint = work / "checkpoint"
    names = hostile_names(top / "victim")
    as_spark_checkpoint(checkpoint)
    plant_manifest(checkpoint,
                   other_files=[inline(data.draw(names, "inline name")) if data.draw(st.booleans(), "valid shape")
                                else {"name": data.draw(names), "size_bytes": data.draw(st.integers()),
                                      "data_b64": data.draw(st.text(max_size=8))}],
                   ssts=[{**sst(checkpoint, "000001.sst"), "local_name": data.draw(names, "sst name")}],
                   extra=data.draw(st.dictionaries(st.sampled_from(["path", "version", "uid"]), names, max_size=2)))
    edit_entry(checkpoint / "metadata", lambda meta: meta.update(data.draw(st.dictionaries(
        st.sampled_from(["scenario", "id", "snapshot_format", "path"]), names, max_size=3), "metadata")))
    manifest = checkpoint / "sink" / "_manifest" / "1"
    body = json.loads(manifest.read_text())
    body["files"] = data.draw(st.lists(names, max_size=3), "sink files") + body["files"]
    manifest.write_text(json.dumps(body))
    before = outside(sandbox)
    for argv in (["check", work / "outcome.json", "--scenario", work / "scenario.json", "--checkpoint", checkpoint],
                 ["run", work / "scenario.json", "--out", work / "again.json", "--checkpoint", checkpoint,
                  "--overwrite"]):
        code = main([str(a) for a in argv])
        assert code in (0, 1, 2), argv
        assert outside(sandbox) == before, argv
    shutil.rmtree(top)
