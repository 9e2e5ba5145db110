"""Driver crashes as real process deaths: a supervisor restarts a killed driver process.

``run_spark_processes`` starts the driver as a child process (``python -m
spark_impl.engine.supervisor --child ...``). A ``driver_crash`` fault kills
that process with SIGKILL at its step (from the driver itself, or from the
executor running the task step); the supervisor then starts a new driver
process, which restarts the query from the checkpoint directory alone, as a
restarted Spark application would.

What an outside observer saw (batch history, recoveries, progress, deliveries,
record visibility) is journaled after every driver step to ``journal.json`` in
the work directory, outside the checkpoint, so the outcome survives the kill.
Each fault fires once across processes (``coord/faults/<index>`` markers).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from reference.engine import Observer
from reference.runner import MAX_RESTARTS
from reference.scenario import Scenario, load_scenario
from reference.storage import LocalStorage

JOURNAL = "journal.json"
_journal_lock = threading.Lock()
OUTCOME = "outcome.json"


def run_spark_processes(scenario: Scenario, workdir: str | os.PathLike[str], *, master: str | None = None,
                        pace: bool = True, progress: Any = None, group: int = 1) -> tuple[dict[str, Any], LocalStorage]:
    """Run ``scenario`` with one driver process per incarnation; returns (outcome, checkpoint storage)."""
    base = Path(workdir)
    base.mkdir(parents=True, exist_ok=True)
    scenario_path = base / "scenario.json"
    scenario_path.write_text(scenario.to_json())
    (base / OUTCOME).unlink(missing_ok=True)
    for life in range(MAX_RESTARTS + 1):
        cmd = [sys.executable, "-m", "spark_impl.engine.supervisor", "--child", str(scenario_path),
               "--workdir", str(base), "--life", str(life)]
        if master:
            cmd += ["--master", master]
        if not pace:
            cmd.append("--no-pace")
        if group != 1:
            cmd += ["--group", str(group)]
        child = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if child.returncode == -signal.SIGKILL:
            if progress:
                progress(f"driver process of life {life} was killed (SIGKILL); restarting from the checkpoint")
            continue
        if child.returncode != 0 or not (base / OUTCOME).exists():
            tail = "\n".join(child.stderr.strip().splitlines()[-15:])
            raise RuntimeError(f"driver process of life {life} failed with exit code {child.returncode}:\n{tail}")
        outcome = json.loads((base / OUTCOME).read_text())
        return outcome, LocalStorage(base / "checkpoint")
    raise RuntimeError(f"gave up after {MAX_RESTARTS} driver restarts")


def _load_journal(base: Path) -> dict[str, Any] | None:
    path = base / JOURNAL
    if not path.exists():
        return None
    return json.loads(path.read_text())


def _write_journal(base: Path, observer: Observer, engine: Any) -> None:
    body = {"t0": engine.t0, "observer": {"batches": {str(k): v for k, v in observer.batches.items()},
                                          "recoveries": observer.recoveries, "progress": observer.progress,
                                          "events": observer.events,
                                          "attempts": {str(k): v for k, v in observer.attempts.items()},
                                          "deliveries": {str(k): v for k, v in observer.deliveries.items()}},
            "visible": [[sp, off, t] for (sp, off), t in engine.visible.items()],
            "task_log": engine.task_log}
    with _journal_lock:  # driver steps finish on several threads (async log writer, purger)
        tmp = base / (JOURNAL + ".tmp")
        tmp.write_text(json.dumps(body))
        os.replace(tmp, base / JOURNAL)


def _restore(observer: Observer, engine: Any, journal: dict[str, Any]) -> None:
    obs = journal["observer"]
    observer.batches.update({int(k): v for k, v in obs["batches"].items()})
    observer.recoveries.extend(obs["recoveries"])
    observer.progress.extend(obs["progress"])
    observer.events.extend(obs["events"])
    observer.attempts.update({int(k): v for k, v in obs["attempts"].items()})
    observer.deliveries.update({int(k): v for k, v in obs["deliveries"].items()})
    engine.t0 = journal["t0"]
    engine.visible.update({(sp, off): t for sp, off, t in journal["visible"]})
    engine.task_log.extend(journal["task_log"])


def child_main(args: argparse.Namespace) -> int:
    from reference.runner import _record_recovery
    from spark_impl.session import session
    from spark_impl.snapshot_reader import install

    from . import EngineContext, SparkRun, spark_outcome
    install()
    scenario = load_scenario(args.scenario)
    base = Path(args.workdir)
    spark = session(args.master)
    engine = EngineContext(spark, str(base / "checkpoint"), str(base / "coord"), str(base / "local"),
                           kill_driver=True, pace=not args.no_pace, group=args.group)
    journal = _load_journal(base)
    run = SparkRun(scenario, engine, LocalStorage(base / "checkpoint"), first_life=args.life)
    if journal is not None:
        restarted = bool(run.observer.recoveries)
        run.observer = Observer()
        _restore(run.observer, engine, journal)
        if restarted and run.restart is not None:
            _record_recovery(run.observer, run.restart, args.life)
    engine.on_step = lambda _step: _write_journal(base, run.observer, engine)
    started = time.time()
    result = run.finish()
    outcome = spark_outcome(result, engine, time.time() - started)
    (base / OUTCOME).write_text(json.dumps(outcome))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="A driver process of the Spark engine (used by the supervisor).")
    parser.add_argument("--child", dest="scenario", required=True, help="scenario JSON")
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--life", type=int, default=0)
    parser.add_argument("--master")
    parser.add_argument("--no-pace", action="store_true")
    parser.add_argument("--group", type=int, default=1, help="batches per Spark job (group scheduling)")
    return child_main(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
