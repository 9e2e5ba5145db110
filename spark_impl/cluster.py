"""A Spark standalone cluster on this machine: a master and N workers, kept up or started for one block of code.

``lightspeed cluster start`` starts one that stays up after the command
returns (``start_cluster``): it prints the master's ``spark://`` URL, where
the logs are and how to stop it; ``lightspeed cluster status`` says what runs
(``Cluster.describe``); ``lightspeed cluster stop`` ends the daemons with
SIGTERM, waits ``STOP_GRACE_S``, then SIGKILLs what is left (and says so),
and removes the folder. Everything lives in one folder (``default_dir``, or
``--dir``):

    cluster.json          what start made: the URL, the web UI port, each daemon's pid, start time and log
    logs/master.log       each daemon's output (logs/worker-N.log for the workers)
    worker-N/             a worker's work directory: its executors run there and keep their stdout and stderr
    local/                the daemons' and executors' scratch (SPARK_LOCAL_DIRS), so a killed executor's
                          files stay in the folder

``LocalCluster`` is the same cluster for one block of code (the tests, and
``python -m spark_impl.cluster``, which runs scenarios on a fresh cluster):

    with LocalCluster(workers=2) as cluster:
        run_spark(scenario, master=cluster.url)

The daemons are started with ``bin/spark-class`` (what Spark's
``sbin/start-master.sh`` and ``sbin/start-worker.sh`` run; the pip-installed
pyspark ships neither), each in its own session so it outlives the command and
a stop reaches the executors it launched. A daemon is known by its pid and its
start time, so a stop never signals a process that merely reuses a pid.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping

MEMBERSHIP_TIMEOUT_S = 300.0   # how long the cluster waits for the batch before an executor event
START_TIMEOUT_S = 120.0        # the master up, then every worker registered (a JVM each: 10-30 s when loaded)
STOP_GRACE_S = 15.0            # SIGTERM, then this long for the daemons and their executors to exit, then SIGKILL
POLL_S = 0.25
STATE_FILE = "cluster.json"
MADE_BY = "lightspeed cluster start"
MADE = (STATE_FILE, "logs", "local")   # what start makes in the folder, besides worker-N/
LOG_TAIL_LINES = 5
REGISTERED = "Successfully registered with master"   # what a worker logs once its master has it (Worker.scala)


class ClusterError(RuntimeError):
    """A cluster folder or request that cannot be served: named, with what to do."""


class ClusterDown(ClusterError):
    """No cluster runs where one was asked for, or a daemon did not start."""


def spark_home() -> Path:
    import pyspark
    return Path(pyspark.__file__).parent


def default_dir(environ: Mapping[str, str]) -> Path:
    """Where ``lightspeed cluster`` keeps its folder without ``--dir``: ``$XDG_STATE_HOME/lightspeed/cluster``,
    else ``~/.local/state/lightspeed/cluster`` (outside any checkout, and the same from every directory)."""
    state = environ.get("XDG_STATE_HOME") or os.path.join(environ.get("HOME") or os.path.expanduser("~"),
                                                          ".local", "state")
    return Path(state) / "lightspeed" / "cluster"


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _stat(pid: int | str) -> tuple[str, int, int] | None:
    """A process's state letter, process group and start time (clock ticks since boot) from ``/proc``; None when
    there is no such process."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return fields[0], int(fields[2]), int(fields[19])
    except (OSError, ValueError, IndexError):
        return None


def _start_ticks(pid: int) -> int | None:
    """The start time of a process that runs (not a zombie), or None."""
    stat = _stat(pid)
    return stat[2] if stat is not None and stat[0] != "Z" else None


# the main class each daemon runs, on its command line from its start (``spark-class`` execs the JVM with it)
DAEMON_CLASSES = {"master": "org.apache.spark.deploy.master.Master", "worker": "org.apache.spark.deploy.worker.Worker"}


def _runs_class(pid: int, main_class: str) -> bool:
    """Whether process ``pid``'s command line names ``main_class`` (a pid read from a state file is only
    signalled when it is the Spark daemon the file says it is)."""
    try:
        return main_class.encode() in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False


@dataclass
class Daemon:
    """A master or worker JVM: its role, pid, start time and log."""

    role: str          # "master" or "worker-N"
    pid: int
    started: int       # /proc start time: the pid is this daemon only while it matches
    log: str

    def alive(self) -> bool:
        """Whether the process the pid names is this daemon: the same start time, and Spark's daemon class."""
        return _start_ticks(self.pid) == self.started and _runs_class(self.pid, self.main_class)

    @property
    def main_class(self) -> str:
        return DAEMON_CLASSES["master" if self.role == "master" else "worker"]

    def describe(self) -> str:
        return f"{self.role:<8} " + (f"up (pid {self.pid})" if self.alive() else "NOT RUNNING") + f"  log {self.log}"

    def group_alive(self) -> bool:
        """Whether a process of the daemon's process group (itself and the executors it launched) still runs."""
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                stat = _stat(entry.name)
                if stat is not None and stat[1] == self.pid and stat[0] != "Z":
                    return True
        return False


@dataclass
class Cluster:
    """The cluster a folder describes (``cluster.json``): enough for another process to show and stop it."""

    dir: Path
    host: str
    port: int
    ui_port: int
    cores: int
    memory: str
    daemons: list[Daemon] = field(default_factory=list)
    joined: str = ""   # workers only, joined to this master elsewhere (``start --join``); else the master is here

    @property
    def url(self) -> str:
        return self.joined or f"spark://{self.host}:{self.port}"

    @property
    def ui_url(self) -> str:
        return f"http://{self.host}:{self.ui_port}"

    def save(self) -> None:
        record = {"made_by": MADE_BY, "host": self.host, "port": self.port, "ui_port": self.ui_port,
                  "cores": self.cores, "memory": self.memory, "daemons": [asdict(d) for d in self.daemons],
                  "joined": self.joined}
        tmp = self.dir / (STATE_FILE + ".tmp")
        tmp.write_text(json.dumps(record, indent=1))
        tmp.replace(self.dir / STATE_FILE)

    @classmethod
    def load(cls, folder: Path) -> "Cluster":
        """The cluster ``folder`` holds; ``ClusterDown`` when it holds none, ``ClusterError`` when its state file
        is not one start wrote."""
        path = folder / STATE_FILE
        if not path.is_file():
            raise ClusterDown(f"no cluster in {folder} (no {STATE_FILE}); start one with `lightspeed cluster start`"
                              + ("" if folder.exists() else " (the folder does not exist)"))
        try:
            record = json.loads(path.read_text())
            if record.get("made_by") != MADE_BY:
                raise ValueError(f"made_by is {record.get('made_by')!r}")
            return cls(folder, str(record["host"]), int(record["port"]), int(record["ui_port"]), int(record["cores"]),
                       str(record["memory"]), [Daemon(**d) for d in record["daemons"]], str(record.get("joined", "")))
        except (ValueError, KeyError, TypeError, AttributeError):
            raise ClusterError(f"{path} is not a state file `lightspeed cluster start` wrote; nothing done") from None

    def master_json(self) -> dict[str, Any]:
        """The master's state as its web UI serves it (``/json/``): workers, their cores, the applications."""
        with urllib.request.urlopen(f"{self.ui_url}/json/", timeout=2) as resp:
            return dict(json.loads(resp.read()))

    def describe(self) -> tuple[bool, list[str]]:
        """Whether the master and every worker run, and lines saying what runs."""
        master = next((d for d in self.daemons if d.role == "master"), None)
        lines = []
        if self.joined:   # the master runs elsewhere: this folder's workers are all there is to say
            lines.append(f"master   {self.url}  elsewhere (these workers joined it; its own `cluster status` "
                         "lists every worker)")
            lines += [d.describe() for d in self.daemons]
            return all(d.alive() for d in self.daemons), lines
        up = master is not None and master.alive()
        state: dict[str, Any] = {}
        if up:
            try:
                state = self.master_json()
            except (OSError, ValueError) as exc:
                lines.append(f"the master process runs but its web UI does not answer: {exc}")
        lines.insert(0, f"master   {self.url}  " + (f"up (pid {master.pid}, web UI {self.ui_url})" if up and master
                                                    else "NOT RUNNING") + f"  log {self.dir / 'logs' / 'master.log'}")
        workers = [d for d in self.daemons if d.role != "master"]
        lines += [d.describe() for d in workers]
        all_up = up and all(d.alive() for d in workers)
        for w in state.get("workers", []):
            lines.append(f"  registered worker {w.get('host')}:{w.get('port')} {w.get('state')}: "
                         f"{w.get('cores')} cores ({w.get('coresused')} used), {w.get('memory')} MB "
                         f"({w.get('memoryused')} used)")
        apps = state.get("activeapps", [])
        if apps:
            lines.append("applications: " + ", ".join(f"{a.get('name')} ({a.get('id')}, {a.get('cores')} cores)"
                                                     for a in apps))
        elif state:
            lines.append("applications: none")
        return all_up, lines

    def stop(self, grace_s: float = STOP_GRACE_S) -> list[str]:
        """End every daemon: workers first (each with its executors), then the master. SIGTERM to each process
        group, up to ``grace_s`` for it to exit, then SIGKILL. Lines saying what happened."""
        return [terminate(d, grace_s) for d in sorted(self.daemons, key=lambda d: d.role == "master")]

    def remove(self) -> list[str]:
        """Remove what start made in the folder, and the folder if nothing else is left in it."""
        for name in MADE:
            path = self.dir / name
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
        for path in self.dir.glob("worker-*"):
            if path.is_dir() and path.name[len("worker-"):].isdigit():   # every worker's, started or added
                shutil.rmtree(path, ignore_errors=True)
        left = sorted(p.name for p in self.dir.iterdir()) if self.dir.exists() else []
        if not left:
            if self.dir.exists():
                self.dir.rmdir()
            return [f"removed {self.dir}"]
        return [f"removed what start made in {self.dir}; left what it did not make: {', '.join(left[:10])}"]


def terminate(daemon: Daemon, grace_s: float) -> str:
    """SIGTERM ``daemon``'s process group, wait up to ``grace_s`` for it to go, then SIGKILL it; what happened."""
    if not daemon.alive():
        return f"{daemon.role}: was not running"
    os.killpg(daemon.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if not daemon.group_alive():
            return f"{daemon.role}: stopped (SIGTERM)"
        time.sleep(POLL_S)
    try:
        os.killpg(daemon.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return f"{daemon.role}: still running {grace_s:.0f} s after SIGTERM, killed (SIGKILL)"


class LocalCluster:
    """Start a standalone master and ``workers`` workers on ``host``; stop them on exit.

    ``workdir`` is the cluster's folder; without one, a temporary folder that ``stop`` removes.
    """

    def __init__(self, workers: int = 2, cores_per_worker: int = 1, memory: str = "1g",
                 workdir: str | os.PathLike[str] | None = None, host: str = "127.0.0.1", port: int = 0,
                 ui_port: int = 0, environ: Mapping[str, str] | None = None, join: str = ""):
        from spark_impl.session import check_java
        check_java()
        if workers < 0 or cores_per_worker < 1:
            raise ClusterError(f"{workers} workers of {cores_per_worker} cores: expected at least 0 workers of at "
                               "least 1 core")
        self.workers = workers
        self.owned = workdir is None
        folder = Path(tempfile.mkdtemp(prefix="lightspeed-cluster-")) if workdir is None else Path(workdir)
        self.environ = dict(os.environ if environ is None else environ)
        self.state = Cluster(folder, host, 0 if join else port or _free_port(host),
                             0 if join else ui_port or _free_port(host), cores_per_worker, memory, joined=join)
        self.procs: dict[int, subprocess.Popen[bytes]] = {}   # pid -> the daemons this object started

    @property
    def dir(self) -> Path:
        return self.state.dir

    @property
    def url(self) -> str:
        return self.state.url

    @property
    def ui_port(self) -> int:
        return self.state.ui_port

    def _spawn(self, role: str, *args: str) -> Daemon:
        home = spark_home()
        logs = self.dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        (self.dir / "local").mkdir(exist_ok=True)
        env = dict(self.environ, SPARK_HOME=str(home), SPARK_LOCAL_IP=self.state.host,
                   SPARK_LOCAL_DIRS=str(self.dir / "local"), SPARK_LOG_DIR=str(logs))
        log = logs / f"{role}.log"
        with open(log, "ab") as out:
            proc = subprocess.Popen([str(home / "bin" / "spark-class"), *args], env=env, stdin=subprocess.DEVNULL,
                                    stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        self.procs[proc.pid] = proc
        started = _start_ticks(proc.pid)
        assert started is not None, f"{role} (pid {proc.pid}) is gone right after its start"
        daemon = Daemon(role, proc.pid, started, str(log))
        self.state.daemons.append(daemon)
        self.state.save()
        return daemon

    def start(self) -> "LocalCluster":
        self.dir.mkdir(parents=True, exist_ok=True)
        if self.state.joined:
            return self._start_joined()
        try:
            s = self.state
            master = self._spawn("master", DAEMON_CLASSES["master"], "--host", s.host, "--port",
                                 str(s.port), "--webui-port", str(s.ui_port))
            self._wait(lambda st: st.get("status") == "ALIVE", "the master to start", master)
            for i in range(self.workers):
                self._spawn_worker(i)
            self._wait(lambda st: sum(w.get("state") == "ALIVE" for w in st.get("workers", [])) >= self.workers,
                       f"{self.workers} workers to register", None)
        except BaseException:
            self.stop()
            raise
        return self

    def _start_joined(self) -> "LocalCluster":
        """Workers only, registered with the master elsewhere (each says so in its log)."""
        try:
            workers = [self._spawn_worker(i) for i in range(self.workers)]
            deadline = time.monotonic() + START_TIMEOUT_S
            while not all(REGISTERED in Path(w.log).read_text(errors="replace") for w in workers):
                dead = [w for w in workers if not w.alive()]
                if dead:
                    raise ClusterDown(f"{dead[0].role} exited before it registered with {self.url}: "
                                      f"{_tail(Path(dead[0].log))}")
                if time.monotonic() > deadline:
                    raise ClusterDown(f"timed out after {START_TIMEOUT_S:.0f} s waiting for the workers to register "
                                      f"with {self.url}; see {self.dir / 'logs'}")
                time.sleep(POLL_S * 2)
        except BaseException:
            self.stop()
            raise
        return self

    def _spawn_worker(self, i: int) -> Daemon:
        work = self.dir / f"worker-{i}"
        work.mkdir(exist_ok=True)
        s = self.state
        return self._spawn(f"worker-{i}", DAEMON_CLASSES["worker"], s.url, "--host", s.host,
                           "--cores", str(s.cores), "--memory", s.memory, "--work-dir", str(work),
                           "--webui-port", str(_free_port(s.host)))

    def add_worker(self) -> int:
        """Start one more worker (it registers, and a running application gets an executor on it); its index."""
        index = 1 + max((int(d.role.split("-")[1]) for d in self.state.daemons if d.role.startswith("worker-")),
                        default=-1)
        self._spawn_worker(index)
        return index

    def stop_worker(self, index: int) -> None:
        """Stop worker ``index`` and the executors it launched (a worker leaving the cluster)."""
        daemon = next(d for d in self.state.daemons if d.role == f"worker-{index}")
        terminate(daemon, STOP_GRACE_S)
        self._collect(daemon.pid)
        self.state.daemons.remove(daemon)
        self.state.save()

    def status(self) -> dict[str, Any]:
        return self.state.master_json()

    def _wait(self, ready: Any, what: str, daemon: Daemon | None, timeout_s: float = START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        last: Exception | None = None
        while time.monotonic() < deadline:
            dead = [d for d in self.state.daemons if not d.alive()]
            if dead:
                raise ClusterDown(f"{dead[0].role} exited while waiting for {what}: {_tail(Path(dead[0].log))}")
            try:
                if ready(self.status()):
                    return
            except (OSError, ValueError) as exc:   # not up yet, or a page served half-started
                last = exc
            time.sleep(POLL_S * 2)
        log = daemon.log if daemon is not None else self.dir / "logs"
        raise ClusterDown(f"timed out after {timeout_s:.0f} s waiting for {what} ({last or 'not yet'}); see {log}")

    def _collect(self, pid: int) -> None:
        """Collect a daemon this object started, once it has exited (so it stays no zombie)."""
        proc = self.procs.pop(pid, None)
        if proc is not None:
            proc.wait()

    def executor_pids(self) -> list[int]:
        """Process ids of the executor JVMs the workers launched."""
        out = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
            except OSError:
                continue
            if b"CoarseGrainedExecutorBackend" not in cmd:
                continue
            try:
                cwd = os.readlink(entry / "cwd")  # a worker starts its executors in its work directory
            except OSError:
                continue
            if cwd.startswith(str(self.dir)):
                out.append(int(entry.name))
        return sorted(out)

    def stop(self) -> list[str]:
        """Stop every daemon (``Cluster.stop``); a temporary folder this object made goes with them."""
        lines = self.state.stop()
        for pid in list(self.procs):
            self._collect(pid)
        if self.owned:
            shutil.rmtree(self.dir, ignore_errors=True)
        return lines

    def __enter__(self) -> "LocalCluster":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _tail(log: Path) -> str:
    try:
        lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return f"(no log at {log})"
    return f"the last lines of {log}: " + " | ".join(lines[-LOG_TAIL_LINES:])


def start_cluster(folder: Path, workers: int, cores: int, memory: str, host: str = "127.0.0.1", port: int = 0,
                  ui_port: int = 0, environ: Mapping[str, str] | None = None, join: str = "") -> Cluster:
    """Start a cluster that stays up after this process ends, its state in ``folder``; refused when ``folder`` holds
    anything (a running cluster, a stopped one's files, or files of something else). ``join``: start only workers,
    for the master at that URL (on another machine, say)."""
    from spark_impl.master_probe import MasterUnusable, check_reachable, master_addresses, memory_mb
    try:
        memory_mb(memory)
    except ValueError as exc:
        raise ClusterError(f"--memory {exc}") from None
    if join:
        try:
            master_addresses(join)
        except ValueError as exc:
            raise ClusterError(f"--join {exc}") from None
        try:
            check_reachable(join)
        except MasterUnusable as exc:
            raise ClusterDown(str(exc)) from None
    if folder.exists() and not folder.is_dir():
        raise ClusterError(f"{folder} is not a folder; give --dir a folder for the cluster's state")
    if folder.is_dir() and any(folder.iterdir()):
        try:
            running = Cluster.load(folder)
        except ClusterError:
            raise ClusterError(f"{folder} is not empty and holds no cluster; give --dir an empty or new folder") \
                from None
        if any(d.alive() for d in running.daemons):
            raise ClusterError(f"a cluster already runs in {folder} ({running.url}); `lightspeed cluster stop` "
                               "ends it")
        raise ClusterError(f"{folder} holds a stopped cluster's files; `lightspeed cluster stop` removes them")
    cluster = LocalCluster(workers, cores, memory, workdir=folder, host=host, port=port, ui_port=ui_port,
                           environ=environ, join=join)
    try:
        cluster.start()
    except ClusterDown as exc:
        raise ClusterDown(f"{exc}; the logs stay in {folder / 'logs'} (`lightspeed cluster stop` removes them)") \
            from None
    return cluster.state


def stop_cluster(folder: Path, grace_s: float = STOP_GRACE_S) -> list[str]:
    """Stop the cluster in ``folder`` and remove its folder; lines saying what happened. Nothing to stop is
    said, not an error; a folder start did not make is left alone (``ClusterError``)."""
    if not (folder / STATE_FILE).exists():
        if folder.exists() and any(folder.iterdir()):
            raise ClusterError(f"{folder} holds no cluster (no {STATE_FILE}); nothing stopped or removed")
        return [f"no cluster in {folder}: nothing to stop"]
    cluster = Cluster.load(folder)
    return cluster.stop(grace_s) + cluster.remove()


def run_suite(scenario_paths: list[str], workers: int = 2) -> dict[str, Any]:
    """Run scenarios on the engine on a fresh standalone cluster; judge each and compare with the reference."""
    from reference.judge.compare import first_difference
    from reference.judge.oracles import check_outcome, failures
    from reference.protocol.run import run_scenario
    from reference.language.scenario import load_scenario
    from spark_impl.engine import run_spark
    from spark_impl.session import session, stop

    report: dict[str, Any] = {"cases": []}
    with LocalCluster(workers=workers) as cluster:
        spark = session(cluster.url)
        report["master"] = cluster.url
        spark.sparkContext.parallelize(range(workers * 2), workers * 2).count()  # bring the executors up
        report["executors_before"] = cluster.executor_pids()
        try:
            for path in scenario_paths:
                scenario = load_scenario(path)
                work = Path(tempfile.mkdtemp(prefix="lightspeed-cluster-run-", dir=cluster.dir))
                started = time.time()
                membership = _follow_membership(cluster, scenario, work / "checkpoint")
                result = run_spark(scenario, master=cluster.url, workdir=work, pace=False)
                membership.join(timeout=5)
                outcome, spark_details = result.outcome, result.outcome.details["spark"]
                bad = failures(check_outcome(scenario, outcome, result.checkpoint))
                reference = run_scenario(scenario).outcome()
                report["cases"].append({
                    "scenario": scenario.name, "error": outcome.error,
                    "failed_oracles": [v.describe() for v in bad],
                    "difference": first_difference(reference, outcome, scenario.sink_mode),
                    "wall_s": round(time.time() - started, 2), "tasks": spark_details["tasks"],
                    "cache_hits": spark_details["cache_hits"], "executors": spark_details.get("executors"),
                    "moves": [m.to_dict() for m in outcome.moves],
                    "moved_partition_tasks": spark_details.get("moved_partition_tasks"),
                    "bound_executors": spark_details.get("bound_executors"),
                    "recoveries": [r.to_dict() for r in outcome.recoveries]})
            report["executors_after"] = cluster.executor_pids()
        finally:
            stop()
    report["ok"] = all(not c["error"] and not c["failed_oracles"] and c["difference"] is None
                       for c in report["cases"])
    return report


def _follow_membership(cluster: LocalCluster, scenario: Any, checkpoint: Path) -> threading.Thread:
    """Make the cluster follow the scenario's executor events while it runs: a worker joins once the batch
    before its event has committed (the engine waits for its executor before planning the batch), and the
    worker of an executor that leaves stops once the batch before the leave has committed (the placement
    has moved its partitions back by then). The engine binds a joining executor's name to the executor the new
    worker starts (``engine/locality.py``), so the worker of a name that leaves is the one started for it."""
    from reference.protocol import layout

    def follow() -> None:
        joined: dict[str, int] = {}
        for event in scenario.events:
            entry = checkpoint / layout.commit_path(event.before_batch - 1)
            deadline = time.monotonic() + MEMBERSHIP_TIMEOUT_S
            while not entry.exists() and time.monotonic() < deadline:
                time.sleep(0.1)
            if event.kind == "executor_join":
                joined[event.executor] = cluster.add_worker()
            elif event.executor in joined:
                cluster.stop_worker(joined.pop(event.executor))

    thread = threading.Thread(target=follow, name="cluster-membership", daemon=True)
    thread.start()
    return thread


def main(argv: list[str] | None = None) -> int:
    return suite_main("the engine", run_suite, argv)


def suite_main(backend: str, run: Any, argv: list[str] | None = None, prog: str | None = None) -> int:
    """The command line of a suite on a fresh cluster: ``run(scenario paths, workers)`` gives its report."""
    import argparse
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Start a Spark standalone cluster on localhost (a master and N one-core workers), run "
                    f"scenarios on {backend} there, judge each with the reference oracles and compare it "
                    "with the reference. Prints a JSON report; exit 0 iff every case holds.")
    parser.add_argument("scenarios", nargs="+", help="scenario JSON files")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", help="also write the report here")
    args = parser.parse_args(argv)
    report = run(args.scenarios, args.workers)
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
