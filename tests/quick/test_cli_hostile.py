"""Hostile input to the command line, tried as a careless or hostile user would (issues 14 and 32).

Every case runs in a scratch directory. Every bad input gets a one-line error that names the thing, with exit
code 2 (bad input), checked before the work starts; or is judged and fails (exit 1), naming the file or the
field. Nothing is silently accepted, judged or lost; nothing the tool did not write is deleted; nothing outside a
checkpoint is read or quoted; nothing blocks; nothing prints a traceback. Exit codes: ``experiments/exit_codes.py``.

The sections follow issue 32: 1. the tool deletes only what it wrote; 2. a tampered checkpoint or outcome never
passes ``check``; 3. nothing outside the checkpoint is opened; 4. size guards; 5. every path and input error is
typed and named; 6. a fault that cannot fire is refused, or reported after the run; 7. smaller defects. This
file runs first in ``make test`` (``tests/conftest.py``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any, Callable

import pytest

from experiments import exit_codes
from experiments.checkpoint_dir import LOCK, write_checkpoint
from reference.protocol.changelog import decode_state_file, encode_state_file
from reference.protocol.logs import OffsetEntry
from reference.language.size import MAX_INPUT_FILE_BYTES, MAX_SCENARIO_FILE_BYTES
from hostile_cli import failed_lines, lightspeed, write_crashed_count
from streamtest import check, crash, fault, make, scenario_dict

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A running count with a crash after a state commit: scenario.json, outcome.json and checkpoint/."""
    return write_crashed_count(tmp_path_factory.mktemp("written"))


@pytest.fixture
def work(written: Path, tmp_path: Path) -> Path:
    """A private copy of ``written`` that a test may damage."""
    shutil.copytree(written, tmp_path / "w")
    return tmp_path / "w"


def check_cli(capsys: pytest.CaptureFixture[str], work: Path, outcome: Path | None = None,
              checkpoint: Path | str | None = None) -> tuple[int, str, str]:
    args: list[Any] = ["check", outcome or work / "outcome.json", "--scenario", work / "scenario.json"]
    if checkpoint is not None:
        args += ["--checkpoint", checkpoint]
    return lightspeed(capsys, *args)


def edit_outcome(work: Path, change: Any) -> Path:
    raw = json.loads((work / "outcome.json").read_text())
    change(raw)
    path = work / "edited.json"
    path.write_text(json.dumps(raw))
    return path


def one_line(err: str) -> str:
    """The one error line of stderr (other lines say what is being run)."""
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, err
    return lines[0]


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (links as their target's name), to show a refused command changed nothing."""
    out = {}
    for path in sorted(folder.rglob("*")):
        if path.is_symlink():
            out[str(path.relative_to(folder))] = os.readlink(path).encode()
        elif path.is_file():
            out[str(path.relative_to(folder))] = path.read_bytes()
    return out


def run_cli(capsys: pytest.CaptureFixture[str], scenario: Path, *args: Any) -> tuple[int, str, str]:
    return lightspeed(capsys, "run", scenario, "--out", scenario.parent / "run-outcome.json", *args)


def scenario_file(tmp_path: Path, raw: dict[str, Any], text: str | None = None, name: str = "scenario.json"
                  ) -> Path:
    path = tmp_path / name
    path.write_text(text if text is not None else json.dumps(raw))
    return path


def latest(folder: Path) -> Path:
    return max((p for p in folder.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))


# ======================================================== 1. the tool deletes only what it wrote


def huge(work: Path) -> Path:
    """The checkpoint's own scenario with 10^9 batches: valid, but no backend that holds records runs it."""
    raw = json.loads((work / "scenario.json").read_text())
    raw["source"]["batches"] = 10**9
    raw["faults"] = []
    return scenario_file(work, raw, name="huge.json")


@pytest.mark.parametrize("refused", ["option", "size"])
def test_overwrite_of_a_run_the_backend_refuses_leaves_the_checkpoint_as_it_was(
        capsys: pytest.CaptureFixture[str], work: Path, refused: str) -> None:
    """--overwrite removes the old checkpoint only once the run has produced the new one: a scenario or option the
    backend refuses (exit 2) leaves every file in place."""
    target = work / "checkpoint"
    before = snapshot(target)
    args: list[Any] = ["--profile", "local_spark"] if refused == "option" else []
    scenario = work / "scenario.json" if refused == "option" else huge(work)
    code, _, err = run_cli(capsys, scenario, "--checkpoint", target, "--overwrite", *args)
    assert code == exit_codes.BAD_INPUT and "backend reference" in one_line(err)
    assert snapshot(target) == before


def test_a_directory_holding_the_users_files_is_refused_by_name_even_with_overwrite(
        capsys: pytest.CaptureFixture[str], work: Path) -> None:
    mine = work / "mine"
    (mine / "state").mkdir(parents=True)
    (mine / "notes.txt").write_text("mine")
    (mine / "state" / "draft.txt").write_text("also mine")
    before = snapshot(mine)
    for extra in ([], ["--overwrite"]):
        code, _, err = run_cli(capsys, work / "scenario.json", "--checkpoint", mine, *extra)
        assert code == exit_codes.BAD_INPUT and "notes.txt" in one_line(err) and "not" in err
        assert snapshot(mine) == before
    (mine / "notes.txt").unlink()    # the nested one is named too
    code, _, err = run_cli(capsys, work / "scenario.json", "--checkpoint", mine, "--overwrite")
    assert code == exit_codes.BAD_INPUT and "state/draft.txt" in one_line(err)
    assert (mine / "state" / "draft.txt").read_text() == "also mine"


def test_a_user_file_inside_a_checkpoint_stops_overwrite_and_is_kept(capsys: pytest.CaptureFixture[str],
                                                                    work: Path) -> None:
    target = work / "checkpoint"
    (target / "offsets" / "my-notes").write_text("mine")
    before = snapshot(target)
    code, _, err = run_cli(capsys, work / "scenario.json", "--checkpoint", target, "--overwrite")
    assert code == exit_codes.BAD_INPUT and "offsets/my-notes" in one_line(err)
    assert snapshot(target) == before


def test_overwrite_removes_only_the_checkpoints_own_files_and_writes_a_whole_new_one(
        capsys: pytest.CaptureFixture[str], work: Path, tmp_path: Path) -> None:
    other = scenario_file(tmp_path, json.loads(make("window_aggregate", batches=3).to_json()), name="other.json")
    target = work / "checkpoint"
    (target / "offsets" / ".7.123.456.0123abcd.tmp").write_bytes(b"half")   # a dead writer's litter
    code, _, err = run_cli(capsys, other, "--checkpoint", target)
    assert code == exit_codes.BAD_INPUT and "holds a checkpoint of another query (scenario 'aggregate-sync'" in err
    code, _, _ = run_cli(capsys, other, "--checkpoint", target, "--overwrite")
    assert code == exit_codes.OK
    assert not list(target.rglob("*_r1b*")) and not list(target.rglob("*.tmp")), "the old run's files stayed"
    code, out, _ = lightspeed(capsys, "check", other.parent / "run-outcome.json", "--scenario", other,
                              "--checkpoint", target)
    assert code == exit_codes.OK, out


def test_a_run_into_its_own_or_another_seeds_checkpoint_is_refused(capsys: pytest.CaptureFixture[str],
                                                                    work: Path) -> None:
    code, _, err = run_cli(capsys, work / "scenario.json", "--checkpoint", work / "checkpoint")
    assert code == exit_codes.BAD_INPUT and "already holds a checkpoint of scenario 'aggregate-sync'" in err
    raw = json.loads((work / "scenario.json").read_text())
    raw["seed"] = 8
    code, _, err = run_cli(capsys, scenario_file(work, raw, name="seed8.json"), "--checkpoint", work / "checkpoint")
    assert code == exit_codes.BAD_INPUT and "another query" in err


def test_layout_files_without_the_tools_marker_are_not_its_own(capsys: pytest.CaptureFixture[str],
                                                               work: Path) -> None:
    target = work / "checkpoint"
    (target / "metadata").unlink()
    before = snapshot(target)
    code, _, err = run_cli(capsys, work / "scenario.json", "--checkpoint", target, "--overwrite")
    assert code == exit_codes.BAD_INPUT and "no metadata" in one_line(err)
    assert snapshot(target) == before


def test_a_linked_directory_is_never_followed_to_delete(capsys: pytest.CaptureFixture[str], work: Path) -> None:
    link = work / "link"
    link.symlink_to(work / "checkpoint", target_is_directory=True)
    before = snapshot(work / "checkpoint")
    code, _, err = run_cli(capsys, work / "scenario.json", "--checkpoint", link, "--overwrite")
    assert code == exit_codes.BAD_INPUT and "symbolic link" in one_line(err)
    assert snapshot(work / "checkpoint") == before


def test_a_link_inside_the_directory_is_refused_and_never_followed(capsys: pytest.CaptureFixture[str],
                                                                   work: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious").write_text("keep me")
    target = work / "checkpoint"
    shutil.rmtree(target / "sink")
    (target / "sink").symlink_to(outside, target_is_directory=True)
    code, _, err = run_cli(capsys, work / "scenario.json", "--checkpoint", target, "--overwrite")
    assert code == exit_codes.BAD_INPUT and "sink (a symlink" in one_line(err)
    assert (outside / "precious").read_text() == "keep me"


def _no_walk(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Make any directory walk or lock file creation fail the test; returns the paths os.open was asked for."""
    def walked(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"walked {args}")
    monkeypatch.setattr(os, "scandir", walked)
    monkeypatch.setattr(os, "walk", walked)
    monkeypatch.setattr(Path, "rglob", walked)
    opened: list[str] = []
    real_open = os.open

    def spy(path: Any, *args: Any, **kwargs: Any) -> int:
        opened.append(str(path))
        return real_open(path, *args, **kwargs)
    monkeypatch.setattr(os, "open", spy)
    return opened


@pytest.mark.parametrize("place", ["/", "~", ".", "..", "ancestor"])
def test_the_root_the_home_and_the_working_directory_are_refused_up_front(
        capsys: pytest.CaptureFixture[str], work: Path, monkeypatch: pytest.MonkeyPatch, place: str) -> None:
    """Refused by name before anything looks inside: no walk (a walk of / took 17 s), no lock file there; the
    same for an ancestor of the working directory, whose removal would remove it."""
    home = work / "home"
    (home / "cwd").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(home / "cwd")
    place = str(work) if place == "ancestor" else place
    scenario = work / "scenario.json"
    opened = _no_walk(monkeypatch)
    for extra in ([], ["--overwrite"]):
        code, _, err = lightspeed(capsys, "run", scenario, "--out", work / "o.json", "--checkpoint",
                                  os.path.expanduser(place), *extra)
        assert code == exit_codes.BAD_INPUT, err
        assert any(what in one_line(err) for what in ("root of the filesystem", "home directory",
                                                      "working directory")), err
    assert not [p for p in opened if p.endswith(LOCK)], "a lock file was created in a refused directory"
    assert "running" not in err, "refused before the run"


def test_diff_out_follows_the_rule_of_run_checkpoint(capsys: pytest.CaptureFixture[str], work: Path) -> None:
    """diff --out D keeps D/checkpoint-<backend>/: a second diff into D is refused before anything runs unless
    --overwrite, which replaces only the checkpoints' own files; a user's file there stops even --overwrite."""
    out = work / "diffout"
    args = ["diff", work / "scenario.json", "--backends", "reference,sim", "--out", out]
    code, _, _ = lightspeed(capsys, *args)
    assert code == exit_codes.OK and (out / "checkpoint-sim" / "metadata").exists()
    before = snapshot(out)
    code, _, err = lightspeed(capsys, *args)
    assert code == exit_codes.BAD_INPUT and "checkpoint-reference" in one_line(err) and "running on" not in err
    assert snapshot(out) == before
    code, _, err = lightspeed(capsys, *args, "--overwrite")
    assert code == exit_codes.OK, err
    (out / "checkpoint-sim" / "results.csv").write_text("mine")
    code, _, err = lightspeed(capsys, *args, "--overwrite")
    assert code == exit_codes.BAD_INPUT and "checkpoint-sim" in one_line(err) and "results.csv" in err
    assert (out / "checkpoint-sim" / "results.csv").read_text() == "mine"


def test_a_run_into_a_checkpoint_another_live_run_is_writing_is_refused(capsys: pytest.CaptureFixture[str],
                                                                        work: Path) -> None:
    """Two runs on one directory: the second is refused, naming the first's pid, while the first lives; a lock
    file the first left behind when it died does not hold the directory."""
    target = work / "busy"
    target.mkdir()
    holds = ("import fcntl, os, sys, time\n"
             "fd = os.open(sys.argv[1], os.O_CREAT | os.O_RDWR)\n"
             "fcntl.flock(fd, fcntl.LOCK_EX)\n"
             "os.write(fd, str(os.getpid()).encode())\n"
             "print('locked', flush=True)\n"
             "time.sleep(60)\n")
    holder = subprocess.Popen([sys.executable, "-c", holds, str(target / LOCK)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        code, _, err = run_cli(capsys, work / "scenario.json", "--checkpoint", target)
        assert code == exit_codes.BAD_INPUT and f"pid {holder.pid}" in err
        assert not (target / "metadata").exists()
    finally:
        holder.kill()
        holder.wait()
    assert (target / LOCK).exists()          # left behind by the killed holder
    code, _, _ = run_cli(capsys, work / "scenario.json", "--checkpoint", target)
    assert code == exit_codes.OK and (target / "metadata").exists() and not (target / LOCK).exists()


def test_a_refused_run_leaves_no_checkpoint_directory_it_created(capsys: pytest.CaptureFixture[str],
                                                                 work: Path) -> None:
    target = work / "new-dir"
    code, _, _ = run_cli(capsys, work / "scenario.json", "--checkpoint", target, "--profile", "local_spark")
    assert code == exit_codes.BAD_INPUT and not target.exists()


# ============================================== 2. a tampered checkpoint or outcome never passes check


def copy_of_previous(ck: Path) -> str:
    newest = latest(ck / "offsets")
    shutil.copy(newest.parent / str(int(newest.name) - 1), newest)
    return f"offsets/{newest.name}"


def another_file(ck: Path) -> str:
    newest = latest(ck / "offsets")
    shutil.copy(ck / "metadata", newest)
    return f"offsets/{newest.name}"


def truncated(ck: Path) -> str:
    newest = latest(ck / "offsets")
    newest.write_bytes(newest.read_bytes()[:len(newest.read_bytes()) // 2])
    return f"offsets/{newest.name}"


def emptied(ck: Path) -> str:
    newest = latest(ck / "offsets")
    newest.write_bytes(b"")
    return f"offsets/{newest.name}"


def fifo(ck: Path) -> str:
    newest = latest(ck / "offsets")
    newest.unlink()
    os.mkfifo(newest)
    return f"offsets/{newest.name}"


def other_offsets(ck: Path) -> str:
    """A well-formed entry of its own batch, with other offsets than the batch ran."""
    newest = latest(ck / "offsets")
    body = json.loads(newest.read_text().split("\n", 1)[1])
    body["end_offsets"] = [x - 1 for x in body["end_offsets"]]
    newest.write_text("v1\n" + json.dumps(body))
    return f"offsets/{newest.name}"


def entry_past_the_end(ck: Path) -> str:
    """A well-formed offsets/N+1 with no commit entry, after a run that finished at batch N."""
    newest = latest(ck / "offsets")
    body = json.loads(newest.read_text().split("\n", 1)[1])
    n = int(newest.name) + 1
    (ck / "offsets" / str(n)).write_bytes(OffsetEntry(n, tuple(body["end_offsets"]), tuple(body["end_offsets"]))
                                          .encode())
    return f"offsets/{n}"


def offsets_without_commit_in_the_middle(ck: Path) -> str:
    middle = int(latest(ck / "commits").name) - 1
    (ck / "commits" / str(middle)).unlink()
    return f"commits/{middle}"


def changed_sink_value(ck: Path) -> str:
    part = next(p for p in sorted((ck / "sink").rglob("part-*.json")) if json.loads(p.read_text()))
    rows = json.loads(part.read_text())
    rows[0][1] += 1
    part.write_text(json.dumps(rows))
    return f"sink/_manifest/{part.parent.name}"


def truncated_manifest(ck: Path) -> str:
    manifest = latest(ck / "sink" / "_manifest")
    manifest.write_bytes(manifest.read_bytes()[:20])
    return f"sink/_manifest/{manifest.name}"


def manifest_delivered_twice(ck: Path) -> str:
    manifest = latest(ck / "sink" / "_manifest")
    body = json.loads(manifest.read_text())
    manifest.write_text(json.dumps(dict(body, delivery=2)))
    return f"sink/_manifest/{manifest.name}"


def stray_in_offsets(ck: Path) -> str:
    (ck / "offsets" / "notes.txt").write_text("hello")
    return "offsets/notes.txt"


def stray_in_state(ck: Path) -> str:
    (ck / "state" / "0" / "1" / "backup.bin").write_bytes(b"\0" * 10)
    return "state/0/1/backup.bin"


def hidden_stray(ck: Path) -> str:
    (ck / "offsets" / ".3").write_text("v1\n{}")
    return "offsets/.3"


def store_of_another_query(ck: Path) -> str:
    shutil.copytree(ck / "state" / "0", ck / "state" / "7")
    return "state/7"


def state_file_copied_over_another(ck: Path) -> str:
    files = sorted((ck / "state" / "0" / "0").glob("*.changelog"), key=lambda p: int(p.name.split("_")[0]))
    shutil.copy(files[0], files[1])
    return f"state/0/0/{files[1].name}"


@pytest.mark.parametrize("tamper", [copy_of_previous, another_file, truncated, emptied, fifo, other_offsets,
                                    entry_past_the_end, offsets_without_commit_in_the_middle, changed_sink_value,
                                    truncated_manifest, manifest_delivered_twice, stray_in_offsets, stray_in_state,
                                    hidden_stray, store_of_another_query, state_file_copied_over_another],
                         ids=lambda f: f.__name__)
def test_a_tampered_checkpoint_fails_check_naming_the_file(capsys: pytest.CaptureFixture[str], work: Path,
                                                           tamper: Callable[[Path], str]) -> None:
    named = tamper(work / "checkpoint")
    code, out, err = check_cli(capsys, work, checkpoint=work / "checkpoint")
    assert code == exit_codes.CHECK_FAILED, out
    assert any(named in line for line in failed_lines(out)), out


def erased_crash(raw: dict[str, Any]) -> None:
    raw["recoveries"] = []
    for batch in raw["batches"]:
        batch["attempts"] = 1


def erased_and_unfired(raw: dict[str, Any]) -> None:
    erased_crash(raw)
    raw["faults_not_fired"] = [0]


def delivered_twice_without_a_re_run(raw: dict[str, Any]) -> None:
    entry = raw["sink"][1]
    entry["deliveries"], entry["delivery_digests"] = 2, entry["delivery_digests"] * 2


def invented_restart(raw: dict[str, Any]) -> None:
    raw["recoveries"].append({"restart": 2, "resumed_at": 4, "rerun_batches": [4]})
    raw["batches"][4]["attempts"] += 1


def planned_twice_without_a_restart(raw: dict[str, Any]) -> None:
    raw["batches"][0]["attempts"] = 2


@pytest.mark.parametrize("tamper, named", [
    (erased_crash, "faults[0] (driver_crash after state_commit of batch 2)"),
    (erased_and_unfired, "faults[0] (driver_crash after state_commit of batch 2) is listed as never fired"),
    (delivered_twice_without_a_re_run, "batch 1 was delivered 2 times"),
    (invented_restart, "2 restart(s), but only 1 fault(s)"),
    (planned_twice_without_a_restart, "batch 0 was planned 2 times"),
], ids=lambda x: getattr(x, "__name__", ""))
def test_an_outcome_whose_restarts_the_faults_do_not_explain_fails_check(
        capsys: pytest.CaptureFixture[str], work: Path, tamper: Callable[[dict[str, Any]], None], named: str) -> None:
    """The scenario's driver crash fires after batch 2's state commit: an outcome with the crash erased (no
    restart, one attempt), a second delivery of a batch no restart re-ran, a restart no fault brings."""
    assert json.loads((work / "outcome.json").read_text())["recoveries"], "the crash fired in the real run"
    code, out, _ = check_cli(capsys, work, outcome=edit_outcome(work, tamper))
    assert code == exit_codes.CHECK_FAILED and any("[FAIL] recoveries" in line and named in line
                                                   for line in out.splitlines()), out


def test_check_passes_the_true_checkpoint(capsys: pytest.CaptureFixture[str], work: Path) -> None:
    code, out, _ = check_cli(capsys, work, checkpoint=work / "checkpoint")
    assert code == exit_codes.OK and "12 of 12 oracles hold" in out


def test_check_a_missing_checkpoint_directory_is_bad_input_naming_it(capsys: pytest.CaptureFixture[str],
                                                                      work: Path) -> None:
    code, _, err = check_cli(capsys, work, checkpoint=work / "no-such-dir")
    assert code == exit_codes.BAD_INPUT and "no-such-dir: no such checkpoint directory" in one_line(err)


def test_check_a_file_given_as_checkpoint_is_bad_input_naming_it(capsys: pytest.CaptureFixture[str],
                                                                 work: Path) -> None:
    code, _, err = check_cli(capsys, work, checkpoint=work / "outcome.json")
    assert code == exit_codes.BAD_INPUT and "outcome.json: not a directory" in one_line(err)


def test_check_an_empty_checkpoint_fails(capsys: pytest.CaptureFixture[str], work: Path) -> None:
    (work / "empty").mkdir()
    code, out, _ = check_cli(capsys, work, checkpoint=work / "empty")
    assert code == exit_codes.CHECK_FAILED
    assert "[FAIL] checkpoint: no metadata file" in out and "[FAIL] reconstruction" in out


def test_check_a_half_written_checkpoint_fails(capsys: pytest.CaptureFixture[str], work: Path) -> None:
    """The checkpoint as it stood part-way through the run: the later log entries and state files are not there."""
    root = work / "checkpoint"
    for path in sorted(root.rglob("*")):
        name = path.name
        if path.is_file() and (path.parent.name in ("offsets", "commits") and int(name) >= 3
                               or name[0].isdigit() and "_" in name and int(name.split("_")[0]) >= 4):
            path.unlink()
    code, out, _ = check_cli(capsys, work, checkpoint=root)
    assert code == exit_codes.CHECK_FAILED and "[FAIL] checkpoint" in out


def test_check_a_checkpoint_of_another_scenario_or_seed_fails(capsys: pytest.CaptureFixture[str], work: Path,
                                                              tmp_path: Path) -> None:
    for name, scenario in (("foreign", make("window_aggregate", batches=5)),
                           ("seed8", make("aggregate", batches=5, seed=8, faults=[crash("state_commit", 2,
                                                                                         partition=0)]))):
        other = check(scenario, on="reference")
        assert other.checkpoint is not None
        write_checkpoint(other.checkpoint, tmp_path / name)
        code, out, _ = check_cli(capsys, work, checkpoint=tmp_path / name)
        assert code == exit_codes.CHECK_FAILED and "[FAIL] checkpoint: the checkpoint belongs to another query" in out


@pytest.mark.parametrize("folder", ["state", "commits"])
def test_check_a_checkpoint_with_its_state_or_commit_files_removed_fails(
        capsys: pytest.CaptureFixture[str], work: Path, folder: str) -> None:
    shutil.rmtree(work / "checkpoint" / folder)
    code, out, _ = check_cli(capsys, work, checkpoint=work / "checkpoint")
    assert code == exit_codes.CHECK_FAILED and "[FAIL] checkpoint" in out


def test_check_a_changelog_edited_with_its_checksum_recomputed_fails(capsys: pytest.CaptureFixture[str],
                                                                     work: Path) -> None:
    """A well-formed changelog whose value was changed: it decodes, but the state read back is not the outcome's."""
    def puts(path: Path) -> list[Any]:
        return [k for k, v in decode_state_file(path.read_bytes(), str(path))[1] if v is not None]
    changelogs = sorted((work / "checkpoint" / "state").rglob("*.changelog"), key=lambda p: int(p.name.split("_")[0]))
    target = next(p for p in reversed(changelogs) if puts(p))
    header, changes = decode_state_file(target.read_bytes(), str(target))
    key = puts(target)[0]
    edited = [(k, v + 1000 if k == key else v) for k, v in changes]
    target.write_bytes(encode_state_file(header, edited))
    assert decode_state_file(target.read_bytes(), str(target))[1] != changes   # a valid file, other content
    code, out, _ = check_cli(capsys, work, checkpoint=work / "checkpoint")
    assert code == exit_codes.CHECK_FAILED and "[FAIL]" in out


def test_check_a_checkpoint_with_an_unreadable_commit_entry_fails_naming_it(capsys: pytest.CaptureFixture[str],
                                                                           work: Path) -> None:
    newest = latest(work / "checkpoint" / "commits")
    newest.write_text("{")
    code, out, err = check_cli(capsys, work, checkpoint=work / "checkpoint")
    assert code == exit_codes.CHECK_FAILED and f"commits/{newest.name}" in out + err


# ------------------------------------------------------------------ check OUTCOME


def test_check_an_exactly_once_sink_listing_a_batch_twice_is_bad_input(capsys: pytest.CaptureFixture[str],
                                                                       work: Path) -> None:
    edited = edit_outcome(work, lambda raw: raw["sink"].append(dict(raw["sink"][1])))
    code, _, err = check_cli(capsys, work, outcome=edited)
    assert code == exit_codes.BAD_INPUT
    assert "edited.json" in one_line(err) and "sink: batch 1 has more than one sink entry" in err


def test_check_a_batch_listed_twice_is_bad_input(capsys: pytest.CaptureFixture[str], work: Path) -> None:
    edited = edit_outcome(work, lambda raw: raw["batches"].append(dict(raw["batches"][0])))
    code, _, err = check_cli(capsys, work, outcome=edited)
    assert code == exit_codes.BAD_INPUT and "batches: batch 0 is listed more than once" in one_line(err)


@pytest.mark.parametrize("field,value,named", [
    ("recoveries", [1], "recoveries[0]"),
    ("progress", 5, "progress"),
    ("sink.delivery_digests", None, "sink[0].delivery_digests"),
    ("seed", "seven", "seed"),
    ("batches", {"0": 1}, "batches"),
])
def test_check_a_malformed_field_is_bad_input_naming_the_field(capsys: pytest.CaptureFixture[str], work: Path,
                                                               field: str, value: Any, named: str) -> None:
    def change(raw: dict[str, Any]) -> None:
        if field == "sink.delivery_digests":
            raw["sink"][0]["delivery_digests"] = value
        else:
            raw[field] = value
    code, _, err = check_cli(capsys, work, outcome=edit_outcome(work, change))
    assert code == exit_codes.BAD_INPUT and f"not an outcome: {named}:" in one_line(err)


@pytest.mark.parametrize("change,what", [
    (lambda raw: raw.update(scenario="another-name"), "name"),
    (lambda raw: raw.update(seed=8), "seed"),
    (lambda raw: raw["state"].update({"1": raw["state"]["0"]}), "operators"),
    (lambda raw: raw["state"]["0"].update({"9": raw["state"]["0"]["0"]}), "partitions"),
])
def test_check_an_outcome_of_another_scenario_fails_identity(capsys: pytest.CaptureFixture[str], work: Path,
                                                             change: Any, what: str) -> None:
    code, out, _ = check_cli(capsys, work, outcome=edit_outcome(work, change))
    assert code == exit_codes.CHECK_FAILED and "[FAIL] identity" in out, (what, out)


def test_check_an_outcome_file_that_is_missing_a_directory_or_not_utf8_is_bad_input(
        capsys: pytest.CaptureFixture[str], work: Path) -> None:
    (work / "latin1.json").write_bytes(b'{"scenario": "caf\xe9"}')
    for path, says in ((work / "nope.json", "no such file, expected an outcome JSON file"),
                       (work / "checkpoint", "is a directory"),
                       (work / "latin1.json", "not UTF-8")):
        code, _, err = check_cli(capsys, work, outcome=path)
        assert code == exit_codes.BAD_INPUT and str(path) in one_line(err) and says in err


# ============================================================ 3. nothing outside the checkpoint is opened


SECRET = "SECRET-first-line-of-a-file-outside-the-checkpoint"


@pytest.mark.parametrize("where", ["metadata", "commits"])
def test_a_link_out_of_the_checkpoint_is_refused_and_its_target_never_quoted(
        capsys: pytest.CaptureFixture[str], work: Path, tmp_path: Path, where: str) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text(SECRET + "x" * 2_000_000 + "\n")
    path = work / "checkpoint" / "metadata" if where == "metadata" else latest(work / "checkpoint" / "commits")
    path.unlink()
    path.symlink_to(outside)
    code, out, err = check_cli(capsys, work, checkpoint=work / "checkpoint")
    assert code == exit_codes.CHECK_FAILED and SECRET not in out + err
    named = path.relative_to(work / "checkpoint").as_posix()
    assert any(named in line and ("symbolic link" in line or "symlink" in line) for line in failed_lines(out)), out


def test_quoted_file_content_is_a_short_escaped_excerpt(capsys: pytest.CaptureFixture[str], work: Path) -> None:
    """A commit entry whose first line is 2 MB, with control characters: the message quotes 40 escaped
    characters of it and says how many more there were."""
    newest = latest(work / "checkpoint" / "commits")
    newest.write_text("\x1b[31m" + "A" * 2_000_000 + "\n{}")
    code, out, err = check_cli(capsys, work, checkpoint=work / "checkpoint")
    assert code == exit_codes.CHECK_FAILED and "\x1b" not in out + err
    assert len(out + err) < 20_000 and "more characters" in out and "\\u001b[31m" in out


def test_a_fifo_at_a_commit_entry_fails_check_without_blocking(work: Path) -> None:
    """In a process of its own, so a check that blocked on the FIFO would fail the test by its timeout."""
    newest = latest(work / "checkpoint" / "commits")
    newest.unlink()
    os.mkfifo(newest)
    proc = subprocess.run([sys.executable, "-m", "experiments.cli", "check", str(work / "outcome.json"), "--scenario",
                           str(work / "scenario.json"), "--checkpoint", str(work / "checkpoint")], cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True, timeout=120)
    assert proc.returncode == exit_codes.CHECK_FAILED and "Traceback" not in proc.stdout + proc.stderr
    assert f"commits/{newest.name}: is a fifo" in proc.stdout, proc.stdout


@pytest.mark.parametrize("target", ["loop", "/dev/zero"])
def test_a_state_file_that_is_a_link_loop_or_a_device_is_named_not_followed(
        capsys: pytest.CaptureFixture[str], work: Path, target: str) -> None:
    store = work / "checkpoint" / "state" / "0" / "0"
    newest = max(store.glob("*.changelog"), key=lambda p: int(p.name.split("_")[0]))
    newest.unlink()
    if target == "loop":
        (store / "loop").symlink_to(newest.name)
        newest.symlink_to("loop")
    else:
        newest.symlink_to(target)
    code, out, _ = check_cli(capsys, work, checkpoint=work / "checkpoint")
    assert code == exit_codes.CHECK_FAILED and any(newest.name in line for line in failed_lines(out)), out


# ======================================================================= 4. size guards


def enormous(tmp_path: Path, what: str) -> Path:
    raw = scenario_dict("aggregate")
    if what == "batches":
        raw["source"]["batches"] = 10**9
    elif what == "partitions":
        raw["query"]["state_partitions"] = 10**6
    else:
        raw["source"] = {"kind": "rate", "rows_per_second": 10**12, "duration_s": 2, "partitions": 2}
    return scenario_file(tmp_path, raw, name=f"{what}.json")


SIZES = [("batches", "records 6,000,000,000 exceed the 5,000,000"),
         ("partitions", "state partitions 1,000,000 exceed the 4,096"),
         ("rate", "records 2,000,000,000,000 exceed the 5,000,000")]


def refused_before_spending_memory(capsys: pytest.CaptureFixture[str], tmp_path: Path, backend: str, what: str,
                                   limit: str) -> None:
    """10^9 batches, 10^6 partitions, 10^12 rows/s: refused with the size and the limit, before anything runs
    (the simulator grew past 3 GB before); only the rate is the simulator's volume mode's to run, and the
    refusal says so."""
    path = enormous(tmp_path, what)
    code, _, _ = lightspeed(capsys, "validate", path)
    assert code == exit_codes.OK
    tracemalloc.start()
    try:
        code, _, err = lightspeed(capsys, "run", path, "--backend", backend)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert code == exit_codes.BAD_INPUT and f"backend {backend} refuses" in one_line(err)
    assert limit in err and peak < 50 * 2**20
    assert ("--sim-mode volume" in err) == (what == "rate")


@pytest.mark.parametrize("backend", ["reference", "sim"])
@pytest.mark.parametrize("what, limit", SIZES)
def test_every_backend_refuses_a_scenario_it_cannot_hold_before_spending_memory(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, backend: str, what: str, limit: str) -> None:
    """(The Spark backends' cases are tests/spark/test_cli_hostile_spark.py: a backend that Java is missing
    for says so, exit 3, before it looks at the scenario.)"""
    refused_before_spending_memory(capsys, tmp_path, backend, what, limit)


def test_the_volume_mode_runs_from_the_command_line_what_no_backend_can_hold(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = enormous(tmp_path, "rate")
    code, _, err = lightspeed(capsys, "run", path, "--backend", "sim", "--sim-mode", "volume",
                              "--out", tmp_path / "volume.json")
    assert code == exit_codes.OK, err
    assert json.loads((tmp_path / "volume.json").read_text())["timing"]["latency_ms"]["count"] > 0
    code, _, err = lightspeed(capsys, "run", path, "--backend", "reference", "--sim-mode", "volume")
    assert code == exit_codes.BAD_INPUT and "does not take --sim-mode" in one_line(err)
    code, _, err = lightspeed(capsys, "run", enormous(tmp_path, "batches"), "--backend", "sim", "--sim-mode",
                              "volume")
    assert code == exit_codes.BAD_INPUT and "the simulator's volume mode can run here" in one_line(err)


# ================================================== 5. every path and input error is typed, named, exit 2


def nested(tmp_path: Path) -> Path:
    return scenario_file(tmp_path, {}, text="[" * 10_000 + "]" * 10_000, name="nested.json")


def test_json_nested_ten_thousand_deep_is_bad_input_as_a_scenario_and_as_an_outcome(
        capsys: pytest.CaptureFixture[str], work: Path, tmp_path: Path) -> None:
    path = nested(tmp_path)
    for args in (["validate", path], ["run", path], ["check", path, "--scenario", work / "scenario.json"],
                 ["check", work / "outcome.json", "--scenario", path]):
        code, _, err = lightspeed(capsys, *args)
        assert code == exit_codes.BAD_INPUT and "nested.json" in one_line(err) and "nested" in err, args
    shallow = scenario_file(tmp_path, {}, text="[" * 70 + "]" * 70, name="seventy.json")
    code, _, err = lightspeed(capsys, "validate", shallow)
    assert code == exit_codes.BAD_INPUT and "nested 70 levels deep, deeper than the 64" in one_line(err)


@pytest.mark.parametrize("special", ["/dev/zero", "fifo", "huge"])
def test_a_device_a_fifo_or_a_huge_file_as_input_is_refused_without_reading_it(
        capsys: pytest.CaptureFixture[str], work: Path, tmp_path: Path, special: str) -> None:
    path = Path(special)
    if special == "fifo":
        path = tmp_path / "scenario.fifo"
        os.mkfifo(path)       # opening it to read would block forever
    elif special == "huge":
        path = tmp_path / "huge.json"
        with open(path, "wb") as handle:
            handle.truncate(300 * 2**20)   # sparse: 300 MB that take no disk
    for args, limit in ((["validate", path], MAX_SCENARIO_FILE_BYTES),
                        (["check", path, "--scenario", work / "scenario.json"], MAX_INPUT_FILE_BYTES)):
        code, _, err = lightspeed(capsys, *args)
        assert code == exit_codes.BAD_INPUT and str(path) in one_line(err), err
        assert (f"more than the {limit:,} bytes" in err) if special == "huge" else ("not a regular file" in err)


def test_duplicate_keys_are_refused_in_a_scenario_and_an_outcome(capsys: pytest.CaptureFixture[str],
                                                                 work: Path) -> None:
    text = (work / "scenario.json").read_text().replace('"seed": 1,', '"seed": 1, "seed": 2,', 1)
    assert text.count('"seed"') == 2
    code, _, err = lightspeed(capsys, "validate", scenario_file(work, {}, text=text, name="dup.json"))
    assert code == exit_codes.BAD_INPUT and 'key "seed" is given twice' in one_line(err)
    text = (work / "outcome.json").read_text().replace('"seed": 1', '"seed": 1, "seed": 2', 1)
    code, _, err = check_cli(capsys, work, outcome=scenario_file(work, {}, text=text, name="dup-outcome.json"))
    assert code == exit_codes.BAD_INPUT and 'key "seed" is given twice' in one_line(err)


def test_nan_in_an_outcomes_timing_is_bad_input(capsys: pytest.CaptureFixture[str], work: Path) -> None:
    text = (work / "outcome.json").read_text().replace('"triggerExecution": 0', '"triggerExecution": NaN', 1)
    assert "NaN" in text
    code, _, err = check_cli(capsys, work, outcome=scenario_file(work, {}, text=text, name="nan.json"))
    assert code == exit_codes.BAD_INPUT and "progress[0].durationMs.triggerExecution: NaN is not a number" in \
        one_line(err)


def unwritable(tmp_path: Path) -> Path:
    """A folder this process cannot write in: read-only by its mode, or, for root (whom a mode does not stop),
    a folder of /proc, where no one can create a file."""
    if os.geteuid() == 0:
        return Path("/proc/1")
    folder = tmp_path / "read-only"
    folder.mkdir()
    folder.chmod(0o500)
    return folder


@pytest.mark.parametrize("where", ["directory", "under a file", "unwritable"])
def test_run_out_and_checkpoint_that_cannot_be_written_are_refused_before_the_run(
        capsys: pytest.CaptureFixture[str], work: Path, tmp_path: Path, where: str) -> None:
    places = {"directory": work, "under a file": work / "outcome.json" / "x",
              "unwritable": unwritable(tmp_path) / "x"}
    for option in ("--out", "--checkpoint"):
        place = places[where]
        if option == "--checkpoint" and where == "directory":
            place = work / "scenario.json"          # a file where a directory is expected
        code, _, err = lightspeed(capsys, "run", work / "scenario.json", option, place)
        assert code == exit_codes.BAD_INPUT and str(place) in one_line(err) and "finished" not in err, (option, err)


def test_explore_out_into_a_missing_directory_is_made_and_one_under_a_file_is_refused_first(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = scenario_file(tmp_path, scenario_dict("aggregate", batches=2))
    code, _, err = lightspeed(capsys, "explore", path, "--workers", "1", "--quiet", "--out",
                              tmp_path / "new" / "dir" / "report.json")
    assert code == exit_codes.OK, err
    assert json.loads((tmp_path / "new" / "dir" / "report.json").read_text())["violations"] == []
    code, _, err = lightspeed(capsys, "explore", path, "--out", path / "report.json")
    assert code == exit_codes.BAD_INPUT and "not a directory" in one_line(err) and "plan:" not in err


def test_diff_out_at_a_file_and_zoo_out_under_a_file_are_refused_before_they_run(
        capsys: pytest.CaptureFixture[str], work: Path) -> None:
    code, _, err = lightspeed(capsys, "diff", work / "scenario.json", "--out", work / "outcome.json")
    assert code == exit_codes.BAD_INPUT and "outcome.json: is not a directory" in one_line(err)
    assert "running on" not in err
    code, _, err = lightspeed(capsys, "zoo", "--out", work / "outcome.json" / "zoo.json")
    assert code == exit_codes.BAD_INPUT and "outcome.json is not a directory" in one_line(err)
    assert "planting" not in err


def test_a_workdir_at_a_file_is_refused_before_spark_starts(capsys: pytest.CaptureFixture[str],
                                                           work: Path) -> None:
    code, _, err = lightspeed(capsys, "run", work / "scenario.json", "--backend", "spark", "--workdir",
                              work / "outcome.json")
    assert code == exit_codes.BAD_INPUT and "--workdir" in one_line(err) and "running" not in err


def test_an_empty_checkpoint_path_is_refused(capsys: pytest.CaptureFixture[str], work: Path) -> None:
    code, _, err = run_cli(capsys, work / "scenario.json", "--checkpoint", "")
    assert code == exit_codes.BAD_INPUT and "empty path" in one_line(err)
    code, _, err = check_cli(capsys, work, checkpoint="")
    assert code == exit_codes.BAD_INPUT and "empty path" in one_line(err)


@pytest.mark.parametrize("args, says", [
    (["run", "SCENARIO", "--backend", "spark", "--master", "garbage://x"], "--master 'garbage://x'"),
    (["diff", "SCENARIO", "--backends", "reference,spark", "--master", "local[two]"], "--master 'local[two]'"),
    (["explore", "SCENARIO", "--workers", "10000"], "--workers 10000"),
    (["explore", "SCENARIO", "--workers", "0"], "--workers 0"),
    (["diff", "SCENARIO", "--backends", "reference,reference"], "'reference' is named twice"),
])
def test_bad_options_are_bad_input_naming_the_option(capsys: pytest.CaptureFixture[str], work: Path,
                                                    args: list[str], says: str) -> None:
    argv = [str(work / "scenario.json") if a == "SCENARIO" else a for a in args]
    code, _, err = lightspeed(capsys, *argv)
    assert code == exit_codes.BAD_INPUT and says in one_line(err) and "running" not in err and "plan:" not in err


def test_profile_given_to_a_backend_that_takes_none_is_refused(capsys: pytest.CaptureFixture[str],
                                                               work: Path) -> None:
    code, _, err = run_cli(capsys, work / "scenario.json", "--profile", "local_spark")
    assert code == exit_codes.BAD_INPUT and "backend reference does not take --profile" in one_line(err)


@pytest.mark.parametrize("profile,says", [
    ("no-such-profile", "no such profile file"),
    ("{not json", "not valid JSON"),
    ('{"executors": -1}', "storage"),
    ("DIR", "is a directory"),
    ("FIFO", "not a regular file"),
])
def test_profile_errors_are_one_line(capsys: pytest.CaptureFixture[str], work: Path, profile: str,
                                     says: str) -> None:
    path: Any = profile
    if profile == "DIR":
        path = work
    elif profile == "FIFO":
        path = work / "profile.fifo"
        os.mkfifo(path)
    elif profile.startswith("{"):
        path = work / "profile.json"
        path.write_text(profile)
    code, _, err = run_cli(capsys, work / "scenario.json", "--backend", "sim", "--profile", path)
    assert code == exit_codes.BAD_INPUT and says in one_line(err)


def test_a_scenario_path_that_is_a_directory_or_not_utf8_is_one_line(capsys: pytest.CaptureFixture[str],
                                                                      work: Path) -> None:
    (work / "latin1.json").write_bytes(b'{"name": "caf\xe9"}')
    for command in ("validate", "run", "explore", "diff"):
        for path, says in ((work, "is a directory"), (work / "latin1.json", "not UTF-8")):
            code, _, err = lightspeed(capsys, command, path)
            assert code == exit_codes.BAD_INPUT and str(path) in one_line(err) and says in err, command


@pytest.mark.parametrize("edit,field", [
    (lambda d: d.update(source={"kind": "rate", "rows_per_second": "NaN", "duration_s": 1, "partitions": 1}),
     "source.rows_per_second: NaN"),
    (lambda d: d.update(source={"kind": "rate", "rows_per_second": "Infinity", "duration_s": 1, "partitions": 1}),
     "source.rows_per_second: Infinity"),
    (lambda d: d.update(source={"kind": "explicit", "partitions": 1, "records": [[0, "k", 1, 0, 10**15]]}),
     "source.records[0]"),
    (lambda d: d.update(source={"kind": "explicit", "partitions": 1, "records": [[0, "LONE", 1, 0, 0]]}),
     "source.records[0]"),
])
def test_scenarios_that_would_fail_at_run_time_are_refused_naming_the_field(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, edit: Any, field: str) -> None:
    raw = scenario_dict("aggregate")
    edit(raw)
    text = json.dumps(raw).replace('"NaN"', "NaN").replace('"Infinity"', "Infinity").replace("LONE", "\\ud800")
    code, _, err = lightspeed(capsys, "run", scenario_file(tmp_path, raw, text))
    assert code == exit_codes.BAD_INPUT and field in one_line(err)


# ====================================== 6. a fault that cannot fire is refused, or reported after the run


@pytest.mark.parametrize("raw, field", [
    (scenario_dict("map", faults=[fault("task_failure", "changelog_write", 1, partition=0)]), "faults[0].at.step"),
    (scenario_dict("map", faults=[crash("state_commit", 1)]), "faults[0].at.step"),
    (scenario_dict("aggregate", "snapshot_provider", faults=[fault("storage_write_error", "snapshot_upload", 1)]),
     "faults[0].at.step"),
    (dict(scenario_dict("aggregate", faults=[crash("offset_log_write", 40)]),
          source={"kind": "rate", "rows_per_second": 10, "duration_s": 2, "partitions": 1},
          engine={"batch_cuts": "fixed"}), "faults[0].at.batch"),
    (dict(scenario_dict("aggregate", faults=[crash("offset_log_write", 21)]),
          source={"kind": "rate", "rows_per_second": 10, "duration_s": 2, "partitions": 1}), "faults[0].at.batch"),
    (scenario_dict("aggregate", faults=[{"at": {"time_ms": 10**13}, "kind": "driver_crash"}]),
     "faults[0].at.time_ms"),
    (scenario_dict("aggregate", faults=[fault("storage_latency", "commit_log_write", 1, ms=10**12)]),
     "faults[0].ms"),
    (scenario_dict("aggregate", faults=[crash("offset_log_write", 40)]), "faults[0].at.batch"),
    (scenario_dict("aggregate", faults=[crash("offset_log_write", 1, restart=3)]), "faults[0].at.restart"),
    (scenario_dict("aggregate", faults=[crash("offset_log_write", 1, partition=1)]), "faults[0].at.partition"),
    (scenario_dict("aggregate", faults=[fault("corrupt_file", "plan", 2, path="../../etc/passwd")]),
     "faults[0].path"),
    (scenario_dict("aggregate", faults=[crash("offset_log_write", 1), crash("offset_log_write", 1)]), "faults[1]"),
], ids=["changelog_write-stateless", "state_commit-stateless", "snapshot_upload-snapshot-provider",
        "past-a-rate-source-fixed", "past-a-rate-source-trigger", "time-never-comes", "latency-of-31-years",
        "past-a-generated-source", "restart-never-comes", "partition-at-a-driver-step", "path-outside",
        "repeated"])
def test_a_fault_that_could_never_fire_is_refused_by_validate_naming_it(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, raw: dict[str, Any], field: str) -> None:
    """A rate source of 20 records cuts 3 batches at fixed cuts, at most 20 by the trigger (each batch takes a
    new record)."""
    path = scenario_file(tmp_path, raw)
    for command in ("validate", "run"):
        code, _, err = lightspeed(capsys, command, path)
        assert code == exit_codes.BAD_INPUT and field in one_line(err), (command, err)


def test_a_rate_source_fault_within_reach_is_accepted(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    raw = dict(scenario_dict("aggregate", faults=[crash("offset_log_write", 19)]),
               source={"kind": "rate", "rows_per_second": 10, "duration_s": 2, "partitions": 1})
    code, _, err = lightspeed(capsys, "validate", scenario_file(tmp_path, raw))
    assert code == exit_codes.OK, err


def test_a_fault_only_the_run_shows_never_fired_is_reported_on_screen(capsys: pytest.CaptureFixture[str],
                                                                      tmp_path: Path) -> None:
    """A time past the end of the run (the reference plans its 4 batches by 300 ms): the run says so on
    screen, and so does check."""
    raw = scenario_dict("aggregate", faults=[{"at": {"time_ms": 10**9}, "kind": "driver_crash"}])
    path = scenario_file(tmp_path, raw)
    code, _, err = lightspeed(capsys, "run", path, "--out", tmp_path / "o.json")
    assert code == exit_codes.OK and "faults[0] (driver_crash at 1000000000 ms) never fired" in err
    code, _, err = lightspeed(capsys, "check", tmp_path / "o.json", "--scenario", path)
    assert code == exit_codes.OK and "faults[0] (driver_crash at 1000000000 ms) never fired" in err


# ======================================================================== 7. smaller defects


def test_an_empty_changelog_is_reported_against_its_own_version(capsys: pytest.CaptureFixture[str],
                                                                 work: Path) -> None:
    """The newest changelog of partition 0 without a snapshot beside it, emptied: the check names that file and
    its version, not the version below it that the broken chain hides."""
    store = work / "checkpoint" / "state" / "0" / "0"
    alone = [p for p in store.glob("*.changelog") if not p.with_suffix(".snapshot").exists()]
    newest = max(alone, key=lambda p: int(p.name.split("_")[0]))   # no snapshot of its version to fall back on
    version = int(newest.name.split("_")[0])
    newest.write_bytes(b"")
    code, out, _ = check_cli(capsys, work, checkpoint=work / "checkpoint")
    lines = failed_lines(out)
    assert code == exit_codes.CHECK_FAILED and lines and all(newest.name in line for line in lines), out
    assert all(f"version {version - 1} " not in line.split(newest.name)[0] for line in lines), out


# ======================================================================= explore


def test_explore_prints_its_plan_and_says_when_it_stopped_incomplete(capsys: pytest.CaptureFixture[str],
                                                                     tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import reference.judge.explorer
    monkeypatch.setattr(reference.judge.explorer, "MAX_CUTS", 5)   # the cap, reached at once
    path = scenario_file(tmp_path, scenario_dict("aggregate", batches=2))
    code, out, err = lightspeed(capsys, "explore", path, "--workers", "1")
    assert code == exit_codes.CHECK_FAILED
    assert "plan: " in err and "crash cuts" in err and "single-fault schedules" in err
    assert "INCOMPLETE" in out


def test_explore_interrupted_stops_every_worker_and_says_where_it_got_to(tmp_path: Path) -> None:
    """SIGINT to the exploring process: exit 130, a line saying how far it got, and no worker left behind.
    The exploration is minutes of work (about 12,700 schedules), so a process that waited for its workers to
    finish their shares instead of stopping them would not end within the 30 s the test gives it."""
    import signal
    import time
    path = scenario_file(tmp_path, scenario_dict("aggregate", batches=20, partitions=4))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "experiments.cli", "explore", str(path), "--workers", "2"],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 60
        while time.time() < deadline and not _children(proc.pid):
            time.sleep(0.2)
        workers = _children(proc.pid)
        assert workers, "the exploration never started its workers"
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == exit_codes.INTERRUPTED, err
    said, _, after = err.partition("interrupted after")
    assert after and "INCOMPLETE" in after and "Traceback" not in said, err
    assert "Traceback" not in after or _python_311_pool_exit_noise(after), err
    time.sleep(1.0)
    assert not [pid for pid in workers if _alive(pid)], "workers outlived the interrupted exploration"


def _python_311_pool_exit_noise(text: str) -> bool:
    """The one traceback Python 3.11 may print at exit after a process pool was shut down without waiting:
    ``concurrent.futures.process._python_exit`` wakes a manager thread through a pipe already closed
    (``OSError: [Errno 9] Bad file descriptor``, fixed in 3.12). It comes after the CLI has said everything."""
    tail = text[text.index("Traceback"):]
    return "concurrent/futures/process.py" in tail and tail.rstrip().endswith("Bad file descriptor")


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


# ======================================================================= output


def test_output_read_by_a_reader_that_stops_early_ends_quietly(work: Path) -> None:
    """``lightspeed check ... | head -1``: the reader closes the pipe; no traceback, the interrupt's code."""
    proc = subprocess.Popen([sys.executable, "-m", "experiments.cli", "check", str(work / "outcome.json"),
                             "--scenario", str(work / "scenario.json"), "--checkpoint", str(work / "checkpoint")],
                            cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()        # the reader is gone before the first line
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == exit_codes.INTERRUPTED and "Traceback" not in err and "Error" not in err, err


def test_an_error_quoting_a_huge_value_is_cut_short(capsys: pytest.CaptureFixture[str], work: Path) -> None:
    """A malformed field 2 MB long in an outcome: the one error line names the field and stops at 1,000
    characters."""
    edited = edit_outcome(work, lambda raw: raw.update(seed=["x" * 2_000_000]))
    code, _, err = check_cli(capsys, work, outcome=edited)
    line = one_line(err)
    assert code == exit_codes.BAD_INPUT and "not an outcome: seed:" in line and len(line) < 1_100
    assert "characters in all)" in line
