"""Native Spark's checkpoint on a filesystem with a storage profile's latency (``--backend spark-native
--storage-profile NAME``).

Spark's own Structured Streaming writes every checkpoint file through the Hadoop
``FileSystem`` of the checkpoint location's URI scheme. ``java/lightspeed/checkpointfs/``
holds a small one, ``LatencyFileSystem``: the local disk under the scheme
``lslatency://<run>/<local path>``, sleeping each operation's latency as the
profiles of ``reference/protocol/storage_profiles.py`` give it, drawn by the same pure
function as the simulator's and the Spark engine's (``LatencyDraws.java``, the
twin of ``reference.protocol.storage_profiles.LatencyDraws``). It is compiled here, with
the JDK's ``javac`` against the Hadoop jar that pyspark ships, into
``build/latency-fs/lightspeed-latency-fs.jar`` (``make native-fs``, which
``make test`` and ``make demo`` run; never committed), and loaded by the
process's SparkSession at its start (``spark.jars``;
``spark_impl.session``): a class cannot be added to a running driver.

A run on a profile (``run_confs``) gives the query its checkpoint at
``checkpoint_uri`` (a fresh run name, so sequence numbers start at 0), and the
profile, seed and checkpoint root as Spark SQL confs, which Spark copies into
the Hadoop configuration of every checkpoint file manager and state store.
What the run's operations cost is read back from the driver's JVM
(``run_report``: on a local master the executors share that JVM, so it covers
every operation).

The file source's log (``sources/``) pays nothing (``FREE_FOLDERS``): the
adapter's input files stand for the published benchmark's rate source, which
writes its log once at the start and nothing per batch; the engine, whose
source is in memory, writes nothing there either.

``python -m spark_impl.native.checkpoint_fs build [--out JAR]`` builds the jar
(exit 3, naming what is missing, without ``javac`` or pyspark's jars);
``python -m spark_impl.native.checkpoint_fs draws STREAM PROFILE KIND:BYTES...``
prints what the Java twin draws (for tests).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from reference.protocol.backend import BackendUnavailable
from reference.protocol.storage_profiles import StorageProfile, storage_profile

SCHEME = "lslatency"
PACKAGE = "lightspeed.checkpointfs"
FS_CLASS = f"{PACKAGE}.LatencyFileSystem"
STAT_SINK_CLASS = "lightspeed.stat.StatSink"     # spark_impl/native/stat_sink.py
DRAWS_CLASS = f"{PACKAGE}.LatencyDraws"
CONF_PREFIX = "lightspeed.latencyfs."
FREE_FOLDERS = ("sources",)
JAVA_DIR = Path(__file__).resolve().parent / "java"
JAR_NAME = "lightspeed-latency-fs.jar"
JAVA_RELEASE = "17"
EXIT_UNAVAILABLE = 3

_unavailable: str | None = None     # why the session started without the filesystem (None: it has it)


class CheckpointFsUnavailable(RuntimeError):
    """The checkpoint filesystem cannot be built or loaded here; the message names what is missing."""


def java_sources() -> list[Path]:
    return sorted(JAVA_DIR.rglob("*.java"))


def default_jar() -> Path:
    """Where the build puts the jar: ``$LIGHTSPEED_BUILD_DIR`` or the repository's ``build/``."""
    base = os.environ.get("LIGHTSPEED_BUILD_DIR") or str(Path(__file__).resolve().parents[2] / "build")
    return Path(base) / "latency-fs" / JAR_NAME


def pyspark_jars() -> Path:
    """pyspark's own jars folder; ``CheckpointFsUnavailable`` naming what is missing."""
    try:
        import pyspark
    except ImportError as exc:
        raise CheckpointFsUnavailable(f"pyspark is not importable ({exc}): the checkpoint filesystem is compiled "
                                      "against the Hadoop jar pyspark ships") from None
    jars = Path(pyspark.__file__).resolve().parent / "jars"
    if not jars.is_dir():
        raise CheckpointFsUnavailable(f"pyspark has no jars folder at {jars}")
    return jars


# the jars of pyspark the Java sources compile against, each with what it provides
COMPILE_JARS = {"hadoop-client-api-*.jar": "Hadoop's RawLocalFileSystem, which the checkpoint filesystem extends",
                "spark-sql-api_*.jar": "Spark's ForeachWriter and Row, which the stat sink implements",
                "scala-library-*.jar": "the Scala classes ForeachWriter is compiled to"}


def compile_classpath() -> list[Path]:
    """pyspark's jars that the sources compile against (``COMPILE_JARS``)."""
    jars = pyspark_jars()
    out = []
    for pattern, why in COMPILE_JARS.items():
        found = sorted(jars.glob(pattern))
        if not found:
            raise CheckpointFsUnavailable(f"no {pattern} in {jars}: it holds {why}")
        out.append(found[-1])
    return out


def javac() -> str:
    """The JDK's compiler; ``CheckpointFsUnavailable`` when there is none."""
    found = shutil.which("javac") or (os.path.join(os.environ["JAVA_HOME"], "bin", "javac")
                                      if os.environ.get("JAVA_HOME") else None)
    if not found or not os.path.exists(found):
        raise CheckpointFsUnavailable("javac not found (no `javac` on PATH and none in JAVA_HOME/bin): the "
                                      "spark-native backend's checkpoint filesystem is compiled with the JDK 17 "
                                      "compiler; install a JDK (not only a JRE)")
    return found


def _digest(sources: Sequence[Path], classpath: Sequence[Path]) -> str:
    h = hashlib.sha256()
    for path in [*sources, *classpath]:
        h.update(path.name.encode())
        h.update(path.read_bytes() if path.suffix == ".java" else str(path.stat().st_size).encode())
    return h.hexdigest()


def build(out: Path | None = None) -> Path:
    """Compile the Java sources into a jar at ``out`` (default ``default_jar()``), unless it is up to date
    (a digest of the sources and of the jar compiled against sits beside it). ``CheckpointFsUnavailable``
    naming javac, pyspark or the Hadoop jar when one is missing, or with javac's errors."""
    jar = out or default_jar()
    sources = java_sources()
    if not sources:
        raise CheckpointFsUnavailable(f"no Java sources under {JAVA_DIR}")
    classpath = compile_classpath()
    digest = _digest(sources, classpath)
    stamp = jar.with_suffix(".sha256")
    if jar.exists() and stamp.exists() and stamp.read_text().strip() == digest:
        return jar
    compiler = javac()
    jar.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="lightspeed-latency-fs-") as classes:
        done = subprocess.run([compiler, "--release", JAVA_RELEASE, "-nowarn", "-d", classes,
                               "-cp", os.pathsep.join(map(str, classpath)), *map(str, sources)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise CheckpointFsUnavailable(f"javac failed on {JAVA_DIR}:\n{done.stderr.strip()}")
        partial = jar.with_name(f".{jar.name}.{uuid.uuid4().hex}.tmp")
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as zf:
            zf.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\nCreated-By: lightspeed-ref\n")
            for path in sorted(Path(classes).rglob("*.class")):
                zf.write(path, path.relative_to(classes).as_posix())
        os.replace(partial, jar)
    stamp.write_text(digest + "\n")
    return jar


def session_confs() -> dict[str, str]:
    """What the process's SparkSession needs at its start to offer the filesystem (the jar on the driver's and
    the executors' class path, the scheme's class), building the jar if needed; {} when it cannot be built
    here (the reason is kept: ``require_loaded`` reports it when a run needs the filesystem)."""
    global _unavailable
    try:
        jar = build()
    except CheckpointFsUnavailable as exc:
        _unavailable = str(exc)
        return {}
    _unavailable = None
    # the executors of a localhost cluster load it from the same path, on their own class path (as the driver's
    # JVM does through spark.jars): Hadoop looks the scheme's class up with the system class loader there too
    return {"spark.jars": str(jar), "spark.executor.extraClassPath": str(jar),
            f"spark.hadoop.fs.{SCHEME}.impl": FS_CLASS}


def require_loaded(spark: Any, cls: str = FS_CLASS) -> None:
    """``CheckpointFsUnavailable`` unless the session's driver can load ``cls`` from the jar (the checkpoint
    filesystem, or the stat sink built with it)."""
    try:
        spark._jvm.java.lang.Class.forName(cls, True, spark._jvm.Thread.currentThread().getContextClassLoader())
    except Exception:  # noqa: BLE001 - py4j raises its own type for a ClassNotFoundException
        why = _unavailable or (f"the SparkSession was started without {JAR_NAME} on its class path (it is added "
                               "when the session starts, spark_impl.session; build it with `make native-fs` "
                               "before the process starts Spark)")
        raise CheckpointFsUnavailable(f"{cls} is not loaded: {why}") from None


def require_stat_sink(spark: Any) -> None:
    """``BackendUnavailable`` naming what is missing unless the session can load the stat sink."""
    try:
        require_loaded(spark, STAT_SINK_CLASS)
    except CheckpointFsUnavailable as exc:
        raise BackendUnavailable("spark-native", f"a realtime run of a stateless query delivers through the "
                                                 f"stat sink, and {exc}") from None


def new_run_name() -> str:
    """A fresh run name: the URI authority that keeps one run's sequence numbers and costs apart."""
    return f"run-{uuid.uuid4().hex[:16]}"


def checkpoint_uri(run: str, local_path: str) -> str:
    """The URI under which Spark reaches the local checkpoint directory ``local_path`` with latency."""
    return f"{SCHEME}://{run}{os.path.abspath(local_path)}"


def run_confs(profile: StorageProfile | None, seed: int | str, root: str) -> dict[str, str]:
    """The Spark SQL confs that give a run's filesystem its profile (None: no latency, only the fault plan),
    seed and checkpoint root. Hadoop's cache of FileSystem instances is off for the scheme, so every query run
    of the run reads its own fault plan (``fault_plan.plan_confs``) from the configuration."""
    confs = {f"{CONF_PREFIX}{name}": repr(float(value)) for name, value in profile.to_dict().items()} \
        if profile is not None else {f"{CONF_PREFIX}latency": "off"}
    confs.update({f"{CONF_PREFIX}seed": str(seed), f"{CONF_PREFIX}root": os.path.abspath(root),
                  f"{CONF_PREFIX}free": ",".join(FREE_FOLDERS), f"fs.{SCHEME}.impl": FS_CLASS,
                  f"fs.{SCHEME}.impl.disable.cache": "true"})
    return confs


def run_report(spark: Any, run: str) -> dict[str, Any] | None:
    """What run ``run``'s operations cost in the driver's JVM: per "stream/kind" the count, the ms slept and
    the bytes created or read; None when the JVM never saw the run."""
    import json
    text = spark._jvm.lightspeed.checkpointfs.LatencyFileSystem.report(run)
    return None if text is None else dict(json.loads(str(text)))


def forget_run(spark: Any, run: str) -> None:
    spark._jvm.lightspeed.checkpointfs.LatencyFileSystem.forget(run)


def storage_profile_of(name: str | None) -> StorageProfile | None:
    """The named profile, None for none; ``StorageProfileError`` naming the known ones (before Spark starts)."""
    return None if name is None else storage_profile(name)


def folder_bytes(checkpoint: str) -> dict[str, int]:
    """Bytes the local checkpoint directory holds per top-level folder (``metadata`` and the like: ``""``)."""
    out: dict[str, int] = {}
    for directory, _dirs, names in os.walk(checkpoint):
        rel = os.path.relpath(directory, checkpoint)
        folder = "" if rel == "." else rel.split(os.sep)[0]
        for name in names:
            try:
                out[folder] = out.get(folder, 0) + os.path.getsize(os.path.join(directory, name))
            except OSError:
                continue   # a temporary file renamed away meanwhile
    return out


@dataclass(frozen=True)
class LatencyCheckpoint:
    """One run's checkpoint on the adapter's filesystem: its profile (None: no latency, the filesystem is there
    for a fault plan), seed and fresh run name."""

    profile: StorageProfile | None
    name: str | None
    seed: int | str
    run: str

    @staticmethod
    def start(spark: Any, name: str | None, seed: int | str) -> "LatencyCheckpoint":
        """A new run on the named profile (None: none); ``BackendUnavailable`` naming what is missing when the
        session cannot load the filesystem (no javac when it started, say)."""
        try:
            require_loaded(spark)
        except CheckpointFsUnavailable as exc:
            need = f"--storage-profile {name}" if name else "a fault fired inside Spark's checkpoint code"
            raise BackendUnavailable("spark-native", f"{need} needs {exc}") from None
        return LatencyCheckpoint(storage_profile(name) if name else None, name, seed, new_run_name())

    def confs(self, checkpoint: str) -> dict[str, str]:
        return run_confs(self.profile, self.seed, checkpoint)

    def location(self, checkpoint: str) -> str:
        return checkpoint_uri(self.run, checkpoint)

    def uri(self, local_path: str) -> str:
        """Any local path of the run (the sink's files) as this filesystem reaches it."""
        return checkpoint_uri(self.run, local_path)

    def finish(self, spark: Any, checkpoint: str, halted: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
        """What the run's storage cost (``details["native"]["storage"]``): the profile and seed, every
        "stream/folder/kind" with its count, ms slept and bytes, how many of them ran on Spark's asynchronous
        log writer (``async_log_write``), and the bytes the checkpoint holds per folder. ``halted``: the reports
        that JVMs halted by a fault left (``fault_plan.saved_costs``), added to the live JVM's."""
        reports = [r for r in halted if r.get("run") == self.run] + [run_report(spark, self.run) or {}]
        forget_run(spark, self.run)
        operations: dict[str, dict[str, float]] = {}
        async_writes: dict[str, int] = {}
        for report in reports:
            for key, cost in (report.get("operations") or {}).items():
                into = operations.setdefault(key, {"count": 0, "ms": 0.0, "bytes": 0})
                for field in into:
                    into[field] += cost[field]
            for key, count in (report.get("async_log_write") or {}).items():
                async_writes[key] = async_writes.get(key, 0) + count
        return {"profile": self.name, "seed": self.seed, "run": self.run, "operations": operations,
                "free_operations": sum(r.get("free_operations", 0) for r in reports),
                "async_log_write": async_writes, "jvms": len(reports), "checkpoint_bytes": folder_bytes(checkpoint)}


def java_draws(jar: Path, stream: str, profile: StorageProfile, ops: Sequence[tuple[str, int]]) -> list[float]:
    """The latencies, ms, that the Java twin draws for ``ops`` ((kind, bytes) in order) on ``stream``: a
    separate JVM runs ``LatencyDraws.main`` (no Spark, no Hadoop)."""
    java = shutil.which("java") or "java"
    text = ",".join(f"{k}={float(v)!r}" for k, v in profile.to_dict().items())
    done = subprocess.run([java, "-cp", str(jar), DRAWS_CLASS, stream, text, *(f"{k}:{n}" for k, n in ops)],
                          capture_output=True, text=True, check=True)
    return [float.fromhex(_bits_to_hex(line.split()[3])) for line in done.stdout.splitlines()]


def _bits_to_hex(bits: str) -> str:
    """IEEE 754 bits (16 hex digits) as Python's ``float.fromhex`` text."""
    import struct
    return struct.unpack(">d", bytes.fromhex(bits))[0].hex()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m spark_impl.native.checkpoint_fs",
                                     description="Build native Spark's checkpoint filesystem with latency.")
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="compile the Java sources with javac against pyspark's Hadoop jar")
    b.add_argument("--out", type=Path, default=None, help=f"the jar to write (default: {default_jar()})")
    args = parser.parse_args(argv)
    try:
        jar = build(args.out)
    except CheckpointFsUnavailable as exc:
        print(f"error: cannot build the checkpoint filesystem: {exc}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    print(jar)
    return 0


if __name__ == "__main__":
    sys.exit(main())
