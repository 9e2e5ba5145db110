"""``lightspeed cluster`` and the Spark session's master checks, without a JVM: the parts that decide.

- a ``spark://`` URL nobody listens on is named by a TCP connect, in seconds;
- a master's web UI page with no alive worker, or no free core, is named with what holds the cores;
- the scenario's executor names bind to the executors that exist, not to Spark ids "0" and "1";
- ``cluster stop`` sends SIGTERM, waits, then SIGKILLs what is left and says so; it removes only what start
  made, and refuses a folder that holds something else; ``cluster status``/``start`` name what is wrong;
- a process's temporary folders go when it ends: normally, after an error, after Ctrl-C.

The same on a real cluster, with the JVMs: ``tests/slow/test_spark_cluster_cli.py``.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from experiments import exit_codes
from experiments.cli import main
from spark_impl.cluster import DAEMON_CLASSES, STATE_FILE, Cluster, Daemon, _start_ticks, stop_cluster
from spark_impl.engine.locality import Placement
from spark_impl.master_probe import MasterUnusable, check_reachable, master_addresses, master_state, memory_mb

ROOT = Path(__file__).resolve().parent.parent


def lightspeed(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err, out + err
    return code, out, err


# ------------------------------------------------------------------ masters


def test_master_urls_and_memory_sizes_are_read_as_spark_writes_them() -> None:
    assert [str(a) for a in master_addresses("spark://h1:7077,h2:7078")] == ["h1:7077", "h2:7078"]
    with pytest.raises(ValueError, match="not HOST:PORT"):
        master_addresses("spark://h1")
    assert [memory_mb(t) for t in ("512m", "1g", "2048", "1G", "3072k")] == [512, 1024, 2048, 1024, 3]
    with pytest.raises(ValueError, match="memory size"):
        memory_mb("lots")


def test_a_url_nobody_listens_on_is_named_by_a_connect_not_by_spark() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # the socket is closed: nothing listens on the port
    with pytest.raises(MasterUnusable) as caught:
        check_reachable(f"spark://127.0.0.1:{port}")
    text = str(caught.value)
    assert f"spark://127.0.0.1:{port}" in text and "connection refused" in text and "\n" not in text


def _page(workers: list[tuple[str, int, int, int]], apps: list[tuple[str, int]]) -> dict:
    """A master's /json/ page as Spark's MasterWebUI writes it: (state, cores, cores used, memory free) each."""
    return {"url": "spark://m:7077", "status": "ALIVE",
            "workers": [{"id": f"worker-{i}", "host": "h", "state": state, "cores": cores,
                         "coresused": used, "coresfree": cores - used, "memory": 1024, "memoryfree": free}
                        for i, (state, cores, used, free) in enumerate(workers)],
            "activeapps": [{"id": f"app-{i}", "name": name, "cores": cores} for i, (name, cores) in enumerate(apps)]}


def test_an_idle_master_is_named_with_what_holds_its_cores() -> None:
    url = "spark://m:7077"
    alone = master_state(url, _page([], [])).problem()
    assert alone is not None and "has no workers" in alone
    dead = master_state(url, _page([("DEAD", 1, 0, 1024)], [])).problem()
    assert dead is not None and "1 registered, none alive" in dead
    taken = master_state(url, _page([("ALIVE", 1, 1, 0), ("ALIVE", 1, 1, 0)], [("lightspeed", 2)])).problem()
    assert taken is not None and "no free core" in taken and "2 cores" in taken and "lightspeed (app-0, 2 cores)" in taken
    small = master_state(url, _page([("ALIVE", 1, 0, 512)], [])).problem(executor_memory_mb=1024)
    assert small is not None and "1024 MB free" in small and "512 MB" in small
    assert master_state(url, _page([("ALIVE", 1, 1, 0), ("ALIVE", 1, 0, 1024)], [("x", 1)])).problem() is None


# ------------------------------------------------------------------ executors


def _placement() -> Placement:
    return Placement(SimpleNamespace(sparkContext=None))


def test_executor_names_bind_to_the_executors_that_exist() -> None:
    placement = _placement()
    # a fresh cluster: the identity
    assert placement.bind({"0", "1"}, {"0": "h", "1": "h"}) == {"0": "0", "1": "1"}
    # executor 1 was lost and its worker started executor 2 (Spark never reuses an id): "1" follows it, "0" stays
    assert placement.bind({"0", "1"}, {"0": "h", "2": "h"}) == {"0": "0", "1": "2"}
    # a name that joins before its executor registers is unbound (no preference), then bound once one is free
    assert placement.bind({"0", "1", "2"}, {"0": "h", "2": "h"}) == {"0": "0", "1": "2"}
    assert placement.bind({"0", "1", "2"}, {"0": "h", "2": "h", "5": "h"}) == {"0": "0", "1": "2", "2": "5"}
    assert placement.bound == {"0": ["0"], "1": ["1", "2"], "2": ["5"]}


def test_a_name_that_left_gives_its_executor_to_one_that_joins() -> None:
    placement = _placement()
    assert placement.bind({"0"}, {"3": "h", "4": "h"}) == {"0": "3"}
    # "0" left the placement; "1" joins on a cluster with one executor free and takes the lowest id, then the
    # other when "0"'s is the only one left alive
    assert placement.bind({"1"}, {"3": "h", "4": "h"}) == {"1": "3"}
    assert placement.bind({"1", "2"}, {"3": "h"}) == {"1": "3"}
    assert placement.bind({"2"}, {"3": "h"}) == {"2": "3"} and "1" not in placement.binding


def test_no_executor_is_waited_for_when_one_is_free() -> None:
    placement = _placement()
    placement.alive_executors = lambda: {"7": "h", "9": "h"}   # type: ignore[method-assign]
    started = time.monotonic()
    assert placement.await_bound({"0", "1"}, timeout_s=30.0) == set()
    assert time.monotonic() - started < 5.0, "returned at once: both names found a free executor"
    assert placement.await_bound({"0", "1", "2"}, timeout_s=0.0) == {"2"}


# ------------------------------------------------------------------ cluster stop / status / start


def _spawn(code: str, main_class: str | None = None) -> Daemon:
    """A stand-in daemon: a Python process whose command line names the daemon's Spark class (as a real daemon's
    does), unless ``main_class`` names another."""
    role = "worker-0" if "IGN" in code else "master"
    named = main_class if main_class is not None else DAEMON_CLASSES["master" if role == "master" else "worker"]
    proc = subprocess.Popen([sys.executable, "-c", code, named], start_new_session=True, stdin=subprocess.DEVNULL)
    ticks = None
    for _ in range(100):
        ticks = _start_ticks(proc.pid)
        if ticks is not None:
            break
    assert ticks is not None
    time.sleep(0.5)   # the signal handler is installed
    return Daemon(role, proc.pid, ticks, "log")


def _cluster_folder(tmp_path: Path, daemons: list[Daemon]) -> Path:
    folder = tmp_path / "cluster"
    (folder / "logs").mkdir(parents=True)
    (folder / "worker-0").mkdir()
    (folder / "logs" / "master.log").write_text("up\n")
    Cluster(folder, "127.0.0.1", 1, 2, 1, "1g", daemons).save()
    return folder


def test_stop_sends_sigterm_then_sigkill_to_what_ignores_it_and_says_so(tmp_path: Path) -> None:
    polite = _spawn("import time; time.sleep(120)")
    stubborn = _spawn("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(120)")
    folder = _cluster_folder(tmp_path, [polite, stubborn])
    try:
        lines = stop_cluster(folder, grace_s=2.0)
    finally:
        for d in (polite, stubborn):
            if d.alive():
                os.killpg(d.pid, signal.SIGKILL)
    assert "master: stopped (SIGTERM)" in lines
    assert "worker-0: still running 2 s after SIGTERM, killed (SIGKILL)" in lines
    assert not polite.group_alive() and not stubborn.group_alive()
    assert lines[-1] == f"removed {folder}" and not folder.exists()


def test_stop_signals_no_process_a_state_file_names_unless_it_runs_spark_s_daemon(tmp_path: Path) -> None:
    """A forged or stale ``cluster.json`` may name any process of this user, with its right start time (both are
    in /proc): only one whose command line runs the daemon's Spark class is signalled."""
    bystander = _spawn("import time; time.sleep(120)", main_class="not.a.spark.Daemon")
    folder = _cluster_folder(tmp_path, [bystander])
    try:
        lines = stop_cluster(folder, grace_s=1.0)
        assert "master: was not running" in lines
        assert _start_ticks(bystander.pid) == bystander.started, "the bystander was signalled"
    finally:
        os.killpg(bystander.pid, signal.SIGKILL)


def test_stop_removes_only_what_start_made(tmp_path: Path) -> None:
    folder = _cluster_folder(tmp_path, [Daemon("master", 1 << 22, 1, "log")])   # a pid no process has
    (folder / "notes.txt").write_text("mine")
    lines = stop_cluster(folder)
    assert lines[0] == "master: was not running"
    assert "left what it did not make: notes.txt" in lines[-1]
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt"]


def test_cluster_commands_name_a_folder_that_is_not_a_clusters(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "data.csv").write_text("1,2\n")
    code, _, err = lightspeed(capsys, "cluster", "stop", "--dir", str(foreign))
    assert code == exit_codes.BAD_INPUT and "holds no cluster" in err and (foreign / "data.csv").exists()
    code, _, err = lightspeed(capsys, "cluster", "start", "--dir", str(foreign))
    assert code == exit_codes.BAD_INPUT and "not empty and holds no cluster" in err
    (foreign / STATE_FILE).write_text("{not json")
    code, _, err = lightspeed(capsys, "cluster", "stop", "--dir", str(foreign))
    assert code == exit_codes.BAD_INPUT and "is not a state file" in err and (foreign / "data.csv").exists()
    missing = tmp_path / "none"
    code, _, err = lightspeed(capsys, "cluster", "status", "--dir", str(missing))
    assert code == exit_codes.UNAVAILABLE and f"no cluster in {missing}" in err
    code, out, _ = lightspeed(capsys, "cluster", "stop", "--dir", str(missing))
    assert code == exit_codes.OK and "nothing to stop" in out
    for bad in (["--workers", "-1"], ["--cores", "0"], ["--port", "70000"], ["--memory", "lots"]):
        code, _, err = lightspeed(capsys, "cluster", "start", "--dir", str(tmp_path / "new"), *bad)
        assert code == exit_codes.BAD_INPUT and err.startswith("error: --"), (bad, err)
    assert not (tmp_path / "new").exists()


def test_status_says_what_does_not_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = _cluster_folder(tmp_path, [Daemon("master", 1 << 22, 1, "log"), Daemon("worker-0", 1 << 22, 1, "w")])
    code, out, _ = lightspeed(capsys, "cluster", "status", "--dir", str(folder))
    assert code == exit_codes.UNAVAILABLE
    assert "NOT all running" in out and "spark://127.0.0.1:1  NOT RUNNING" in out and "worker-0 NOT RUNNING" in out
    assert json.loads((folder / STATE_FILE).read_text())["made_by"] == "lightspeed cluster start"


# ------------------------------------------------------------------ temporary folders

SCRATCH_USER = textwrap.dedent("""
    import sys, time
    from spark_impl.scratch import scratch_dir
    for prefix in ("lightspeed-spark-", "lightspeed-points-"):
        (scratch_dir(prefix) / "checkpoint").mkdir()
    print("made", flush=True)
    if sys.argv[1] == "error":
        raise RuntimeError("a run that fails")
    if sys.argv[1] == "interrupt":
        time.sleep(60)
""")


@pytest.mark.parametrize("ending", ["normal", "error", "interrupt"])
def test_temporary_folders_go_however_the_process_ends(tmp_path: Path, ending: str) -> None:
    env = dict(os.environ, TMPDIR=str(tmp_path), PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-c", SCRATCH_USER, ending], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "made\n"
    assert sorted(p.name[:17] for p in tmp_path.iterdir()) == ["lightspeed-points", "lightspeed-spark-"]
    if ending == "interrupt":
        proc.send_signal(signal.SIGINT)   # Ctrl-C
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == {"normal": 0, "error": 1, "interrupt": -signal.SIGINT}[ending], err
    assert ("KeyboardInterrupt" in err) == (ending == "interrupt")
    assert list(tmp_path.iterdir()) == []
