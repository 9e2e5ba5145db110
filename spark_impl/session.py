"""One SparkSession per process, configured for both the engine and the native adapter.

Starting Spark costs about 10 s here, so the engine, the native adapter and the
test suite all share the session this module makes. ``session()`` fails loudly
when there is no Java: every Spark backend needs a JVM. ``missing()`` says
what is missing without starting anything; ``backend_session`` turns a Spark
that cannot start into the backend interface's ``BackendUnavailable``.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import threading
from typing import Any

from reference.backend import BackendUnavailable

DEFAULT_MASTER = "local[2]"
_lock = threading.Lock()
_session: Any = None
_master: str | None = None
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


def session(master: str | None = None, extra_conf: dict[str, str] | None = None) -> Any:
    """The process's SparkSession, created on first use on ``master`` (default ``local[2]``) with ``extra_conf``
    (a JVM started again after a crash, ``forget_dead_jvm``, gets the same)."""
    global _session, _master, _extra
    with _lock:
        wanted = master_of(master)
        if _session is not None:
            if wanted != _master:
                raise SparkUnavailable(f"this process already runs Spark on {_master}; cannot switch to {wanted}")
            return _session
        check_java()
        try:
            from pyspark.sql import SparkSession
        except ImportError as exc:  # pragma: no cover - pyspark is a dependency
            raise SparkUnavailable(f"pyspark is not importable: {exc}") from exc
        # executors' Python workers must run this interpreter (it has rocksdict and this package)
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        builder = (SparkSession.builder.master(wanted).appName("lightspeed")
                   .config("spark.pyspark.python", os.environ["PYSPARK_PYTHON"])
                   .config("spark.ui.enabled", "false")
                   .config("spark.ui.showConsoleProgress", "false")
                   .config("spark.scheduler.mode", "FAIR")
                   .config("spark.python.worker.reuse", "true")
                   .config("spark.sql.shuffle.partitions", "2")
                   .config("spark.default.parallelism", "2")
                   .config("spark.task.maxFailures", "4")
                   .config("spark.driver.host", "127.0.0.1")
                   .config("spark.driver.bindAddress", "127.0.0.1")
                   .config("spark.sql.streaming.stateStore.providerClass",
                           "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider")
                   .config("spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled", "true"))
        if wanted.startswith("local"):
            # local[N] gives up on the first task failure unless told otherwise; Spark's own default
            # for a cluster is 4 attempts, and the protocol's task retry relies on it
            builder = builder.master(f"local[{_threads(wanted)},4]")
        # native Spark's checkpoint filesystem with a storage profile's latency: its jar must be on the class
        # path when the JVM starts (built here if needed; without javac the session starts without it)
        from .native.checkpoint_fs import session_confs as checkpoint_fs_confs
        extra = dict(extra_conf) if extra_conf is not None else dict(_extra)
        for key, value in {**checkpoint_fs_confs(), **extra}.items():
            builder = builder.config(key, value)
        try:
            _session = builder.getOrCreate()
        except Exception as exc:  # noqa: BLE001 - py4j and PySpark raise their own types when the JVM fails
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise SparkUnavailable(f"Spark did not start on {wanted}: {first}") from exc
        # task failures are part of the protocol (faults, retries); the engine reports what matters itself
        _session.sparkContext.setLogLevel("FATAL")
        _master, _extra = wanted, extra
        return _session


def jvm_exit_status(wait_s: float = 0.0) -> int | None:
    """The exit status of this process's Spark JVM once it has died (waiting up to ``wait_s`` for it to exit),
    None while it runs or when there is none."""
    import subprocess
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
