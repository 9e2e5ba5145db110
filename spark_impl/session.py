"""One SparkSession per process, configured for both the engine and the native adapter.

Starting Spark costs about 10 s here, so the engine, the native adapter and the
test suite all share the session this module makes. ``session()`` fails loudly
when there is no Java: every Spark backend needs a JVM. ``missing()`` says
what is missing without starting anything; ``backend_session`` turns a Spark
that cannot start into the backend interface's ``BackendUnavailable``.

The driver JVM's output goes to a log file, not the screen. On a standalone
cluster (``spark://``) the master is checked before the session waits on it
(``master_probe.py``), and the session waits at most
``FIRST_EXECUTOR_TIMEOUT_S`` for its first executor: a wrong or idle master
is named in seconds, not after a minute of Java stack traces or never. The
session is stopped when the process exits, before its temporary folders are
removed (``scratch.py``).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from reference.protocol.backend import BackendUnavailable

from . import scratch
from .master_probe import MasterUnusable, check_reachable, master_addresses, memory_mb, probe

DEFAULT_MASTER = "local[2]"
DRIVER_LOG = "driver.log"
DRIVER_LOG_PREFIX = "lightspeed-driver"   # its scratch folder, and the name of a log kept after a failure
LOOPBACK = ("127.0.0.1", "localhost", "::1")
FIRST_EXECUTOR_TIMEOUT_S = 60.0   # a cluster's first executor: a JVM start on a worker (10-20 s when loaded)
EXECUTOR_POLL_S = 0.25
_lock = threading.Lock()
_session: Any = None
_master: str | None = None
_driver_log: Path | None = None
_extra: dict[str, str] = {}   # the extra confs the session started with: a JVM started after a crash gets them too


class SparkUnavailable(RuntimeError):
    """There is no JVM (or no pyspark) to run Spark with."""


def _java() -> str | None:
    java = shutil.which("java") or (os.path.join(os.environ["JAVA_HOME"], "bin", "java")
                                    if os.environ.get("JAVA_HOME") else None)
    return java if java and os.path.exists(java) else None


def check_java() -> str:
    java = _java()
    if java is None:
        raise SparkUnavailable("Java is not installed (no `java` on PATH and no JAVA_HOME): the spark and "
                               "spark-native backends need Java 17")
    return java


def missing(*modules: str) -> str | None:
    """What a Spark backend lacks here (Java, pyspark, or one of ``modules``), without starting Spark."""
    if _java() is None:
        return "Java (no `java` on PATH and no JAVA_HOME); the Spark backends need Java 17"
    for name in ("pyspark", *modules):
        if importlib.util.find_spec(name) is None:
            return f"the Python package {name} (not importable)"
    return None


def backend_session(backend: str, master: str | None = None) -> Any:
    """``session(master)`` for a backend: a Spark that cannot start here is ``BackendUnavailable``."""
    try:
        return session(master)
    except SparkUnavailable as exc:
        raise BackendUnavailable(backend, str(exc)) from exc


def master_of(master: str | None = None) -> str:
    """The master ``session(master)`` runs on: ``master``, else the running session's, else
    ``$LIGHTSPEED_SPARK_MASTER``, else ``local[2]`` (without starting anything)."""
    return master or _master or os.environ.get("LIGHTSPEED_SPARK_MASTER", DEFAULT_MASTER)


def session(master: str | None = None, extra_conf: dict[str, str] | None = None,
            driver_log: str | os.PathLike[str] | None = None) -> Any:
    """The process's SparkSession, created on first use on ``master`` (default ``local[2]``) with ``extra_conf``
    (a JVM started again after a crash, ``forget_dead_jvm``, gets the same).

    The driver JVM's own output (Spark's log, Java stack traces) goes to ``driver_log`` (default: a file in this
    process's scratch folder, removed at exit), never to the screen. A ``spark://`` master is checked first
    (``master_probe``): one that is unreachable, not a master, or has no worker with a free core is
    ``SparkUnavailable`` within seconds, with the driver log kept and named when it has something to say.
    """
    global _session, _master, _extra
    with _lock:
        wanted = master_of(master)
        if extra_conf is not None and _jvm_running() and dict(extra_conf) != _extra:
            asked = ", ".join(f"{k}={v}" for k, v in sorted(extra_conf.items()) if _extra.get(k) != v) or \
                ", ".join(f"no {k}" for k in sorted(set(_extra) - set(extra_conf)))
            raise SparkUnavailable(f"this process's Spark JVM already runs with other settings than asked ({asked}); "
                                   "settings reach Spark only when its JVM starts: ask in a new process")
        if _session is not None:
            if wanted != _master:
                raise SparkUnavailable(f"this process already runs Spark on {_master}; cannot switch to {wanted}")
            return _session
        check_java()
        try:
            from pyspark.sql import SparkSession
        except ImportError as exc:  # pragma: no cover - pyspark is a dependency
            raise SparkUnavailable(f"pyspark is not importable: {exc}") from exc
        cluster = wanted.startswith("spark://")
        if cluster:
            _check(lambda: check_reachable(wanted))   # before any JVM: a wrong URL is named in seconds
        extra = dict(extra_conf) if extra_conf is not None else dict(_extra)
        options = _options(wanted, extra)
        log = _launch_driver_jvm(options, driver_log)
        builder = SparkSession.builder
        for key, value in options.items():
            builder = builder.config(key, value)
        try:
            if cluster:
                _check_master(wanted, options, log)
            _session = builder.getOrCreate()
        except SparkUnavailable:
            raise
        except Exception as exc:  # noqa: BLE001 - py4j and PySpark raise their own types when the JVM fails
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0].rstrip(". ")
            raise SparkUnavailable(f"Spark did not start on {wanted} ({first}); Spark's log: {_kept(log)}") from exc
        # task failures are part of the protocol (faults, retries); the engine reports what matters itself
        _session.sparkContext.setLogLevel("FATAL")
        _master, _extra = wanted, extra
        scratch.before_removal(stop)   # at exit: stop the executors before the folders they write in go
    if cluster:
        _await_first_executor(wanted, log)
    return _session


def _jvm_running() -> bool:
    """Whether this process has started Spark's driver JVM (a session, or the gateway a stopped one left)."""
    if _session is not None:
        return True
    context = sys.modules.get("pyspark.context")
    return context is not None and getattr(context.SparkContext, "_gateway", None) is not None


def _options(master: str, extra_conf: dict[str, str] | None) -> dict[str, str]:
    """The session's Spark configuration: the same for the JVM's launch and the SparkContext."""
    # executors' Python workers must run this interpreter (it has rocksdict and this package); on other
    # machines the same path must hold the same Python (the README's "Several machines")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    options = {
        "spark.master": master, "spark.app.name": "lightspeed",
        "spark.pyspark.python": os.environ["PYSPARK_PYTHON"],
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.scheduler.mode": "FAIR",
        "spark.python.worker.reuse": "true",
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.task.maxFailures": "4",
        # the driver's own scratch (block manager, shipped files) where this process's temporary files go
        "spark.local.dir": tempfile.gettempdir(),
        "spark.sql.streaming.stateStore.providerClass":
            "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
    }
    if master.startswith("local"):
        # local[N] gives up on the first task failure unless told otherwise; Spark's own default
        # for a cluster is 4 attempts, and the protocol's task retry relies on it
        options["spark.master"] = f"local[{_threads(master)},4]"
    if master.startswith("local") or \
            (master.startswith("spark://") and all(a.host in LOOPBACK for a in master_addresses(master))):
        # one machine: the driver listens on loopback only; a cluster on other machines must reach the
        # driver at an address of this one (Spark's default, or SPARK_LOCAL_IP)
        options["spark.driver.host"] = options["spark.driver.bindAddress"] = "127.0.0.1"
    # native Spark's checkpoint filesystem with a storage profile's latency: its jar must be on the class
    # path when the JVM starts (built here if needed; without javac the session starts without it)
    from .native.checkpoint_fs import session_confs as checkpoint_fs_confs
    options.update(checkpoint_fs_confs())
    options.update(extra_conf or {})
    return options


def _launch_driver_jvm(options: dict[str, str], driver_log: str | os.PathLike[str] | None) -> Path:
    """Start the driver's JVM (py4j's gateway) with its output in a log file, unless this process has one
    already (a session stopped and started again reuses it, and its log); the log's path."""
    global _driver_log
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway
    if SparkContext._gateway is not None:
        assert _driver_log is not None, "a JVM this module did not start (the driver log is unknown)"
        return _driver_log
    path = Path(driver_log) if driver_log is not None else scratch.scratch_dir(DRIVER_LOG_PREFIX + "-") / \
        DRIVER_LOG
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "ab") as out:
        conf = SparkConf(loadDefaults=False).setAll(list(options.items()))
        try:
            gateway = launch_gateway(conf, popen_kwargs={"stdout": out, "stderr": subprocess.STDOUT})
        except Exception as exc:  # noqa: BLE001 - PySpark's own error when the JVM exits at once
            kept = scratch.keep(path, DRIVER_LOG_PREFIX)
            raise SparkUnavailable(f"the driver's JVM did not start ({exc}); its output: {kept}") from exc
    SparkContext._ensure_initialized(gateway=gateway)
    _driver_log = path
    return path


def _check(fn: Any) -> None:
    try:
        fn()
    except MasterUnusable as exc:
        raise SparkUnavailable(str(exc)) from None


def _check_master(master: str, options: dict[str, str], log: Path) -> None:
    """``SparkUnavailable`` naming why ``master`` cannot run this application now (``master_probe``)."""
    from pyspark import SparkContext
    try:
        state = probe(SparkContext._jvm, master)
    except MasterUnusable as exc:
        raise SparkUnavailable(f"{str(exc).rstrip('.')} (Spark's log: {_kept(log)})") from None
    problem = None if state is None else state.problem(memory_mb(options.get("spark.executor.memory", "1g")))
    if problem is not None:
        raise SparkUnavailable(problem)


def _await_first_executor(master: str, log: Path) -> None:
    """On a cluster, the first executor registers within ``FIRST_EXECUTOR_TIMEOUT_S``; else the session stops and
    ``SparkUnavailable`` says so (what the master's check could not foresee: a worker that fails to launch one)."""
    assert _session is not None
    jsc = _session.sparkContext._jsc.sc()
    deadline = time.monotonic() + FIRST_EXECUTOR_TIMEOUT_S
    while time.monotonic() < deadline:
        if jsc.statusStore().executorList(True).size() > 1:   # the driver is listed too
            return
        time.sleep(EXECUTOR_POLL_S)
    stop()
    raise SparkUnavailable(f"the master at {master} accepted the application but started no executor for it "
                           f"within {FIRST_EXECUTOR_TIMEOUT_S:.0f} s; the workers' logs say why "
                           f"(Spark's log: {_kept(log)})")


def _kept(log: Path) -> Path:
    """The driver log, moved where it outlives this process when it is in the scratch folder (the JVM writes on
    into the moved file)."""
    global _driver_log
    if log.parent.name.startswith(DRIVER_LOG_PREFIX) and log.exists():
        log = scratch.keep(log, DRIVER_LOG_PREFIX)
        if _driver_log is not None:
            _driver_log = log
    return log


def jvm_exit_status(wait_s: float = 0.0) -> int | None:
    """The exit status of this process's Spark JVM once it has died (waiting up to ``wait_s`` for it to exit),
    None while it runs or when there is none."""
    from pyspark import SparkContext
    proc = getattr(SparkContext._gateway, "proc", None)
    if proc is None:
        return None
    try:
        return int(proc.wait(timeout=wait_s)) if wait_s > 0 else proc.poll()
    except subprocess.TimeoutExpired:
        return None


def forget_dead_jvm() -> None:
    """Let go of a JVM that died under the session (a driver crash: ``Runtime.halt``), so that the next
    ``session()`` starts a new JVM on the same master: PySpark keeps its gateway, context and session in class
    attributes, which a stop() cannot clear when the JVM is gone."""
    global _session
    from pyspark import SparkContext
    from pyspark.sql import SparkSession, SQLContext
    status = jvm_exit_status()
    assert status is not None, "forget_dead_jvm: the JVM is still running"
    with _lock:
        gateway = SparkContext._gateway
        context = SparkContext._active_spark_context
        server = getattr(context, "_accumulatorServer", None)
        if server is not None:
            server.shutdown()
        if gateway is not None:
            try:
                gateway.shutdown_callback_server()
                gateway.close()
            except Exception:  # noqa: BLE001 - py4j raises its own types against a dead JVM
                pass
        SparkContext._gateway, SparkContext._jvm, SparkContext._active_spark_context = None, None, None
        SparkSession._instantiatedSession, SparkSession._activeSession = None, None
        SQLContext._instantiatedContext = None
        _session = None   # _master stays: the next session() starts on the same master


def _threads(master: str) -> str:
    inner = master[len("local"):].strip("[]")
    return inner.split(",")[0] or "1"


def stop() -> None:
    global _session, _master, _extra
    with _lock:
        if _session is not None:
            _session.stop()
        _session, _master, _extra = None, None, {}


def task_slots(spark: Any) -> int:
    """How many tasks the cluster runs at once right now (cores of the registered executors).

    ``defaultParallelism`` is not it: the session pins it to 2 for small shuffles.
    """
    jsc = spark.sparkContext._jsc.sc()
    return int(jsc.maxNumConcurrentTasks(jsc.resourceProfileManager().defaultResourceProfile()))
