"""Hostile input to the command line, tried as a careless or hostile user would (issue 14, item 10).

Every bad input gets a one-line error that names the thing, with exit code 2
(bad input), or is judged and fails (exit 1): nothing is silently accepted,
judged or lost, and nothing prints a traceback. Exit codes: ``experiments/exit_codes.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from experiments import exit_codes
from experiments.checkpoint_dir import LOCK, write_checkpoint
from experiments.cli import main
from reference.changelog import decode_state_file, encode_state_file
from streamtest import check, crash, fault, make, scenario_dict

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A running count with a crash after a state commit: scenario.json, outcome.json and checkpoint/."""
    scenario = make("aggregate", batches=5, faults=[crash("state_commit", 2, partition=0)])
    result = check(scenario, on="reference")
    out = tmp_path_factory.mktemp("written")
    (out / "scenario.json").write_text(scenario.to_json())
    (out / "outcome.json").write_text(result.outcome.to_json())
    assert result.checkpoint is not None
    write_checkpoint(result.checkpoint, out / "checkpoint")
    return out


@pytest.fixture
def work(written: Path, tmp_path: Path) -> Path:
    """A private copy of ``written`` that a test may damage."""
    shutil.copytree(written, tmp_path / "w")
    return tmp_path / "w"


def lightspeed(capsys: pytest.CaptureFixture[str], *argv: Any) -> tuple[int, str, str]:
    """Run the command line; (exit code, stdout, stderr). A traceback anywhere fails the test."""
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err, out + err
    return code, out, err


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


# ------------------------------------------------------------- check --checkpoint


def test_check_passes_the_true_checkpoint(capsys: pytest.CaptureFixture[str], work: Path) -> None:
    code, out, _ = check_cli(capsys, work, checkpoint=work / "checkpoint")
    assert code == exit_codes.OK and "11 of 11 oracles hold" in out


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


def test_check_a_checkpoint_of_another_scenario_fails(capsys: pytest.CaptureFixture[str], work: Path,
                                                      tmp_path: Path) -> None:
    other = check(make("window_aggregate", batches=5), on="reference")
    assert other.checkpoint is not None
    write_checkpoint(other.checkpoint, tmp_path / "foreign")
    code, out, _ = check_cli(capsys, work, checkpoint=tmp_path / "foreign")
    assert code == exit_codes.CHECK_FAILED and "[FAIL] checkpoint: the checkpoint belongs to another query" in out


def test_check_a_checkpoint_of_another_seed_fails(capsys: pytest.CaptureFixture[str], work: Path,
                                                  tmp_path: Path) -> None:
    other = check(make("aggregate", batches=5, seed=8, faults=[crash("state_commit", 2, partition=0)]))
    assert other.checkpoint is not None
    write_checkpoint(other.checkpoint, tmp_path / "seed8")
    code, out, _ = check_cli(capsys, work, checkpoint=tmp_path / "seed8")
    assert code == exit_codes.CHECK_FAILED and "belongs to another query" in out


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
    newest = max((work / "checkpoint" / "commits").iterdir(), key=lambda p: int(p.name))
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


# ---------------------------------------------------------------- run --checkpoint


def run_cli(capsys: pytest.CaptureFixture[str], scenario: Path, *args: Any) -> tuple[int, str, str]:
    return lightspeed(capsys, "run", scenario, "--out", scenario.parent / "run-outcome.json", *args)


def test_run_into_another_scenarios_checkpoint_is_refused_unless_overwritten(
        capsys: pytest.CaptureFixture[str], work: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.json"
    other.write_text(make("window_aggregate", batches=3).to_json())
    target = work / "checkpoint"
    before = sorted(p.name for p in target.rglob("*"))
    code, _, err = run_cli(capsys, other, "--checkpoint", target)
    assert code == exit_codes.BAD_INPUT
    assert str(target) in err and "holds a checkpoint of another query (scenario 'aggregate-sync'" in err
    assert sorted(p.name for p in target.rglob("*")) == before, "a refused run must not touch the directory"
    code, _, _ = run_cli(capsys, other, "--checkpoint", target, "--overwrite")
    assert code == exit_codes.OK
    code, out, _ = lightspeed(capsys, "check", other.parent / "run-outcome.json", "--scenario", other,
                              "--checkpoint", target)
    assert code == exit_codes.OK, out
    assert not list(target.rglob("*_r1b*")), "files of the overwritten run stayed behind"


def test_run_with_another_seed_into_a_checkpoint_is_refused(capsys: pytest.CaptureFixture[str], work: Path) -> None:
    raw = json.loads((work / "scenario.json").read_text())
    raw["seed"] = 8
    (work / "seed8.json").write_text(json.dumps(raw))
    code, _, err = run_cli(capsys, work / "seed8.json", "--checkpoint", work / "checkpoint")
    assert code == exit_codes.BAD_INPUT and "another query" in err


def test_run_again_into_its_own_checkpoint_is_refused(capsys: pytest.CaptureFixture[str], work: Path) -> None:
    code, _, err = run_cli(capsys, work / "scenario.json", "--checkpoint", work / "checkpoint")
    assert code == exit_codes.BAD_INPUT and "already holds a checkpoint of scenario 'aggregate-sync'" in err


def test_run_into_a_directory_with_stray_files_is_refused_unless_overwritten(
        capsys: pytest.CaptureFixture[str], work: Path) -> None:
    target = work / "stray"
    target.mkdir()
    (target / "notes.txt").write_text("mine")
    code, _, err = run_cli(capsys, work / "scenario.json", "--checkpoint", target)
    assert code == exit_codes.BAD_INPUT and "notes.txt" in err and (target / "notes.txt").exists()
    code, _, _ = run_cli(capsys, work / "scenario.json", "--checkpoint", target, "--overwrite")
    assert code == exit_codes.OK and not (target / "notes.txt").exists() and (target / "metadata").exists()


def test_run_into_a_checkpoint_another_live_run_is_writing_is_refused(capsys: pytest.CaptureFixture[str],
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


# ------------------------------------------------------------ scenarios and options


def test_profile_given_to_a_backend_that_takes_none_is_refused(capsys: pytest.CaptureFixture[str],
                                                               work: Path) -> None:
    code, _, err = run_cli(capsys, work / "scenario.json", "--profile", "local_spark")
    assert code == exit_codes.BAD_INPUT and "backend reference does not take --profile" in one_line(err)


@pytest.mark.parametrize("profile,says", [
    ("no-such-profile", "no such profile file"),
    ("{not json", "not valid JSON"),
    ('{"executors": -1}', "storage"),
    ("DIR", "cannot be read"),
])
def test_profile_errors_are_one_line(capsys: pytest.CaptureFixture[str], work: Path, profile: str,
                                     says: str) -> None:
    path: Any = profile
    if profile == "DIR":
        path = work
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


def scenario_file(tmp_path: Path, raw: dict[str, Any], text: str | None = None) -> Path:
    path = tmp_path / "scenario.json"
    path.write_text(text if text is not None else json.dumps(raw))
    return path


@pytest.mark.parametrize("edit,field", [
    (lambda d: d.update(source={"kind": "rate", "rows_per_second": "NaN", "duration_s": 1, "partitions": 1}),
     "source.rows_per_second"),
    (lambda d: d.update(source={"kind": "rate", "rows_per_second": "Infinity", "duration_s": 1, "partitions": 1}),
     "source.rows_per_second"),
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


@pytest.mark.parametrize("faults,field", [
    ([crash("offset_log_write", 40)], "faults[0].at.batch"),
    ([crash("offset_log_write", 1, restart=3)], "faults[0].at.restart"),
    ([crash("offset_log_write", 1, partition=1)], "faults[0].at.partition"),
    ([fault("corrupt_file", "plan", 2, path="../../etc/passwd")], "faults[0].path"),
    ([crash("offset_log_write", 1), crash("offset_log_write", 1)], "faults[1]"),
])
def test_faults_that_could_never_fire_are_refused_naming_the_fault(capsys: pytest.CaptureFixture[str],
                                                                    tmp_path: Path, faults: list[Any],
                                                                    field: str) -> None:
    path = scenario_file(tmp_path, scenario_dict("aggregate", faults=faults))
    for command in ("validate", "run"):
        code, _, err = lightspeed(capsys, command, path)
        assert code == exit_codes.BAD_INPUT and field in one_line(err), command


@pytest.mark.parametrize("edit,says", [
    (lambda d: d.update(source={"kind": "rate", "rows_per_second": 10**6, "duration_s": 10**6,
                                "partitions": 1}), "records"),
    (lambda d: d["source"].update(batches=10**9), "batches"),
    (lambda d: d["query"].update(state_partitions=10**6), "state partitions"),
])
def test_a_scenario_too_large_to_hold_is_refused_with_the_numbers(capsys: pytest.CaptureFixture[str],
                                                                  tmp_path: Path, edit: Any, says: str) -> None:
    raw = scenario_dict("aggregate")
    edit(raw)
    code, _, err = lightspeed(capsys, "run", scenario_file(tmp_path, raw))
    assert code == exit_codes.BAD_INPUT and "backend reference refuses" in one_line(err) and says in err
    assert any(ch.isdigit() for ch in err)


# -------------------------------------------------------------------- explore


def test_explore_prints_its_plan_and_says_when_it_stopped_incomplete(capsys: pytest.CaptureFixture[str],
                                                                     tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import reference.explorer
    monkeypatch.setattr(reference.explorer, "MAX_CUTS", 5)   # the cap, reached at once
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


def test_a_refused_run_leaves_no_checkpoint_directory_it_created(capsys: pytest.CaptureFixture[str],
                                                                 work: Path) -> None:
    target = work / "new-dir"
    code, _, _ = run_cli(capsys, work / "scenario.json", "--checkpoint", target, "--profile", "local_spark")
    assert code == exit_codes.BAD_INPUT and not target.exists()
