"""A cluster a user can run: ``lightspeed cluster start``, work sent to it, ``lightspeed cluster stop``, nothing left.

As a user would, through the command line only: start a two-worker cluster
on localhost with the documented command; name a bad master URL (a closed
port, the master's web UI port, a worker's port) and a master with no workers
in one sentence each, before anything waits on them; explore a scenario and
run one on the engine there (judged by ``check``); interrupt a run with
Ctrl-C; run the engine's quick fault matrix there (``make soak``; ``make test``
runs the cells that used to stall); stop the cluster. Every
command runs with its own temporary directory (``TMPDIR``), so at the end the
test can see that no temporary folder (``lightspeed-*``, Spark's own) and no
process that any of them started is left.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from experiments import exit_codes
from reference.language.catalogue import spark_allows
from tests.soak import soak_or_short

pytestmark = [pytest.mark.spark, pytest.mark.slow]

LIGHTSPEED = [str(Path(sys.executable).parent / "lightspeed")]
LEFT_POLL_S = 30.0   # how long a process or a folder may take to go once its command has returned


def _cli(env: dict[str, str], *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*LIGHTSPEED, *args], env=env, capture_output=True, text=True, timeout=timeout)


def _marked_processes(tmp: Path) -> list[str]:
    """The processes whose environment carries this module's TMPDIR: what its commands started, and their
    children (daemons, executors, Python workers)."""
    marker = f"TMPDIR={tmp}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if marker in (entry / "environ").read_bytes().split(b"\0"):
                found.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:200])
        except OSError:
            continue
    return found


def _until(check: Any, timeout_s: float = LEFT_POLL_S) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if not value or time.monotonic() > deadline:
            return value
        time.sleep(0.5)


@pytest.fixture(scope="module")
def tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("tmpdir")


@pytest.fixture(scope="module")
def env(tmp: Path) -> dict[str, str]:
    return dict(os.environ, TMPDIR=str(tmp))


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from reference.language.catalogue import make
    folder = tmp_path_factory.mktemp("work")
    (folder / "explored.json").write_text(make("aggregate", "async_state", batches=3).to_json())
    (folder / "run.json").write_text(make("window_aggregate", "sync", batches=4).to_json())
    return folder


@pytest.fixture(scope="module")
def cluster(env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Any:
    folder = tmp_path_factory.mktemp("state") / "cluster"
    started = _cli(env, "cluster", "start", "--workers", "2", "--dir", str(folder))
    assert started.returncode == exit_codes.OK, started.stderr
    yield {"url": started.stdout.strip(), "dir": folder, "stderr": started.stderr}
    if folder.exists():   # a test failed before the stop test: do not leave the daemons running
        _cli(env, "cluster", "stop", "--dir", str(folder))


def test_start_prints_the_url_the_logs_and_how_to_stop(cluster: Any, env: dict[str, str]) -> None:
    assert cluster["url"].startswith("spark://127.0.0.1:")
    err = cluster["stderr"]
    assert f"logs: {cluster['dir'] / 'logs'}" in err and f"lightspeed cluster stop --dir {cluster['dir']}" in err
    status = _cli(env, "cluster", "status", "--dir", str(cluster["dir"]))
    assert status.returncode == exit_codes.OK, status.stdout + status.stderr
    lines = status.stdout.splitlines()
    assert lines[0] == f"cluster in {cluster['dir']}: running"
    assert f"master   {cluster['url']}  up" in status.stdout
    assert sum("ALIVE: 1 cores" in line for line in lines) == 2, status.stdout
    assert "worker-0 up" in status.stdout and "worker-1 up" in status.stdout


def _one_sentence(result: subprocess.CompletedProcess[str]) -> str:
    """The error line of a command that failed on its master: exit 3, one error line after what the command
    announced (``run``: the scenario; ``explore``: its plan), and no Java on the screen."""
    assert result.returncode == exit_codes.UNAVAILABLE, result.stdout + result.stderr
    shown = result.stdout + result.stderr
    assert "Traceback" not in shown and "\tat " not in shown and "Exception" not in shown, shown
    lines = result.stderr.strip().splitlines()
    assert lines[-1].startswith("error: ") and len(lines) <= 3, result.stderr
    assert not any(line.startswith("error: ") for line in lines[:-1]), result.stderr
    return lines[-1]


def _kept_log(line: str, tmp: Path) -> Path:
    """The driver log an error line names (kept in the temporary directory); removed once read."""
    name = line.rsplit("Spark's log: ", 1)[1].rstrip(")")
    log = Path(name)
    assert log.parent == tmp and log.name.startswith("lightspeed-driver-"), line
    return log


def test_a_bad_master_url_is_named_in_one_sentence(cluster: Any, env: dict[str, str], work: Path,
                                                   tmp: Path) -> None:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    page = json.loads(_cli_json(cluster["dir"]))
    worker_port = page["workers"][0]["port"]
    ui_port = json.loads((cluster["dir"] / "cluster.json").read_text())["ui_port"]
    scenario = str(work / "run.json")

    line = _one_sentence(_cli(env, "run", scenario, "--backend", "spark", "--master", f"spark://127.0.0.1:{closed}"))
    assert f"no Spark master answers at spark://127.0.0.1:{closed}" in line and "connection refused" in line

    line = _one_sentence(_cli(env, "run", scenario, "--backend", "spark", "--master", f"spark://127.0.0.1:{ui_port}"))
    assert f"127.0.0.1:{ui_port} does not speak Spark's RPC protocol" in line
    log = _kept_log(line, tmp)
    assert "Exception" in log.read_text(), "the Java exception went to the log, not the screen"
    log.unlink()

    line = _one_sentence(_cli(env, "explore", scenario, "--master", f"spark://127.0.0.1:{worker_port}"))
    assert f"127.0.0.1:{worker_port} runs Spark's RPC without a master" in line
    _kept_log(line, tmp).unlink()


def _cli_json(folder: Path) -> str:
    import urllib.request
    ui_port = json.loads((folder / "cluster.json").read_text())["ui_port"]
    with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=5) as resp:
        return resp.read().decode()


def test_a_master_without_workers_is_named_and_workers_from_elsewhere_join_it(env: dict[str, str], work: Path,
                                                                             tmp_path: Path) -> None:
    """A master alone: ``explore`` names it at once; then a worker started as the README's "Several machines"
    says (``cluster start --join``, here from another folder of this machine) registers with it."""
    folder, joined = tmp_path / "idle", tmp_path / "joined"
    started = _cli(env, "cluster", "start", "--workers", "0", "--dir", str(folder))
    assert started.returncode == exit_codes.OK, started.stderr
    try:
        url = started.stdout.strip()
        line = _one_sentence(_cli(env, "explore", str(work / "explored.json"), "--master", url, "--quiet"))
        assert f"the master at {url} has no workers" in line, line
        join = _cli(env, "cluster", "start", "--join", url, "--workers", "1", "--dir", str(joined))
        assert join.returncode == exit_codes.OK and join.stdout.strip() == url, join.stderr
        status = _cli(env, "cluster", "status", "--dir", str(folder))
        assert status.returncode == exit_codes.OK and "ALIVE: 1 cores" in status.stdout, status.stdout
        status = _cli(env, "cluster", "status", "--dir", str(joined))
        assert status.returncode == exit_codes.OK and f"master   {url}  elsewhere" in status.stdout, status.stdout
    finally:
        stopped = [_cli(env, "cluster", "stop", "--dir", str(f)) for f in (joined, folder)]
    assert [s.stdout.splitlines()[0] for s in stopped] == ["worker-0: stopped (SIGTERM)", "master: stopped (SIGTERM)"]
    assert not folder.exists() and not joined.exists()


def test_explore_on_the_cluster_reports_what_a_local_run_does(cluster: Any, env: dict[str, str],
                                                              work: Path) -> None:
    from reference.judge.explorer import explore
    from reference.language.scenario import load_scenario
    report = work / "report.json"
    result = _cli(env, "explore", str(work / "explored.json"), "--master", cluster["url"], "--out", str(report),
                  "--quiet")
    assert result.returncode == exit_codes.OK, result.stdout + result.stderr
    sharded = json.loads(report.read_text())
    local = explore(load_scenario(str(work / "explored.json")), workers=1)
    assert (sharded["schedules"], sharded["checkpoint_fingerprint"], sharded["violations"]) == \
        (local.schedules, local.checkpoint_fingerprint, [])


def test_a_spark_run_on_the_cluster_passes_check(cluster: Any, env: dict[str, str], work: Path) -> None:
    scenario, outcome, checkpoint = str(work / "run.json"), work / "outcome.json", work / "checkpoint"
    ran = _cli(env, "run", scenario, "--backend", "spark", "--master", cluster["url"], "--out", str(outcome),
               "--checkpoint", str(checkpoint))
    assert ran.returncode == exit_codes.OK, ran.stderr
    assert json.loads(outcome.read_text())["details"]["spark"]["master"] == cluster["url"]
    checked = _cli(env, "check", str(outcome), "--scenario", scenario, "--checkpoint", str(checkpoint))
    assert checked.returncode == exit_codes.OK, checked.stdout


def test_ctrl_c_during_a_run_leaves_no_temporary_folder(cluster: Any, env: dict[str, str], work: Path,
                                                        tmp: Path) -> None:
    proc = subprocess.Popen([*LIGHTSPEED, "run", str(work / "run.json"), "--backend", "spark", "--master",
                             cluster["url"]], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert not _until(lambda: not list(tmp.glob("lightspeed-spark-*")), 600), "the run made its folder"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == exit_codes.INTERRUPTED, err
    assert _until(lambda: list(tmp.iterdir())) == [], "every temporary folder of the run is gone"


# The matrix's cells on the cluster, run as ``lightspeed experiment fault-matrix --quick --backend spark --master``
# runs them (``experiments.execution.execute``: one after another in one driver, on its SparkContext). Executor-loss
# cells kill executor JVMs first, so the rebalancing cells after them find executors with new Spark ids.
DRIVER = """
import json, sys
from experiments.execution import execute
from experiments.experiment import RunContext
from experiments.registry import get_experiment
master, out, wanted = sys.argv[1], sys.argv[2], set(json.loads(sys.argv[3]))
ctx = RunContext(backend="spark", quick=True, master=master, backend_master=master, quiet=True,
                 point_timeout_s=get_experiment("fault-matrix").point_timeout_s)
points = [p for p in get_experiment("fault-matrix").points(ctx) if p.backend == "spark" and p.id in wanted]
with open(out, "w") as f:
    json.dump(execute(points, ctx), f)
"""


def _cells(columns: tuple[str, ...], modes: tuple[str, ...], faults: tuple[str, ...]) -> list[str]:
    return [f"cell/spark/fault={fault},mode={mode},operator={column}/seed=1" if
            spark_allows(column.partition("@")[0], mode) else
            f"unsupported/spark/fault={fault},mode={mode},operator={column}/seed=1"
            for column in columns for mode in modes for fault in faults]


def test_the_quick_fault_matrix_finishes_on_the_cluster(cluster: Any, env: dict[str, str], work: Path) -> None:
    """Under ``make soak`` every cell of the quick matrix; else the executor-loss cells of two columns and the
    rebalancing column's cells that come after them. Every cell runs and none fails, and no rebalancing cell
    waits out the engine's join timeout, as each did while the scenario's executor names were Spark's ids."""
    from experiments.fault_matrix.definition import FAULT_KINDS, QUICK_MODES, REBALANCING, columns
    from spark_impl.engine.incarnation import JOIN_TIMEOUT_S
    whole = _cells(columns(True), QUICK_MODES, FAULT_KINDS)
    short = _cells(("map", "aggregate"), QUICK_MODES, ("executor_loss",)) + \
        _cells((REBALANCING,), ("sync", "pipelining"), ("driver_crash", "task_failure", "executor_loss"))
    cells = soak_or_short(whole, short)
    out = work / "cells.json"
    ran = subprocess.run([sys.executable, "-c", DRIVER, cluster["url"], str(out), json.dumps(cells)], env=env,
                         capture_output=True, text=True, timeout=7200)
    assert ran.returncode == 0 and out.exists(), ran.stderr[-3000:]
    records = json.loads(out.read_text())
    assert sorted(r["id"] for r in records) == sorted(cells)
    assert all(r["error"] is None for r in records), [(r["id"], r["error"]) for r in records if r["error"]][:3]
    statuses = {r["id"]: r["metrics"]["status"] for r in records}
    assert "fail" not in statuses.values(), {k: v for k, v in statuses.items() if v == "fail"}
    rebalancing = [r for r in records if REBALANCING in r["id"] and r["metrics"]["status"] != "unsupported"]
    assert rebalancing and all(r["wall_s"] < JOIN_TIMEOUT_S for r in rebalancing), \
        [(r["id"], r["wall_s"]) for r in rebalancing]


def test_stop_leaves_no_process_and_no_temporary_folder(cluster: Any, env: dict[str, str], tmp: Path) -> None:
    stopped = _cli(env, "cluster", "stop", "--dir", str(cluster["dir"]))
    assert stopped.returncode == exit_codes.OK, stopped.stderr
    assert stopped.stdout.splitlines() == ["worker-0: stopped (SIGTERM)", "worker-1: stopped (SIGTERM)",
                                           "master: stopped (SIGTERM)", f"removed {cluster['dir']}"]
    assert not cluster["dir"].exists()
    assert _until(lambda: _marked_processes(tmp)) == [], "no process any command started is left"
    assert _until(lambda: list(tmp.iterdir())) == [], "no temporary folder is left"
