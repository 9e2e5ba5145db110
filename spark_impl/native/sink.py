"""The adapter's sink, written by foreachBatch: exactly-once by batch id, or at-least-once.

Exactly-once: batch b's rows go to a temporary file that is renamed to
``sink/<b>.json``, so a re-run batch replaces its output and never duplicates
it. At-least-once: every delivery is its own visible file, ``sink/<b>-<n>.json``.
Each delivery is recorded with its digest and the wall time it became visible.

The files are written by the local filesystem (``LocalFiles``), or, when the
run's checkpoint is on the adapter's checkpoint filesystem (a storage profile
or faults fired by path: ``checkpoint_fs.py``), through that filesystem in the
driver's JVM (``HadoopFiles``), so that a fault plan reaches the sink's part
file and its commit as it reaches Spark's own files. The temporary file is
named as Spark's ``CheckpointFileManager`` names its own,
``.<name>.<uuid>.tmp``, so a fault names the file it stands for.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Protocol

from reference.protocol.outcome import SinkEntry, canonical_rows, digest_rows


@dataclass(frozen=True)
class Delivery:
    """One visible delivery of a batch's output."""

    digest: str
    seen_s: float


class SinkFiles(Protocol):
    """Where the sink's bytes go: a create (closed when it returns) and a rename, by local path."""

    def write(self, path: str, payload: bytes) -> None: ...
    def rename(self, src: str, dst: str) -> None: ...


class LocalFiles:
    """The local filesystem, from Python."""

    def write(self, path: str, payload: bytes) -> None:
        with open(path, "wb") as fh:
            fh.write(payload)

    def rename(self, src: str, dst: str) -> None:
        os.replace(src, dst)


class HadoopFiles:
    """The checkpoint filesystem in the driver's JVM: ``uri_of`` turns a local path into its URI there. A fault
    the plan fires at one of these operations raises here (a storage error), or halts the JVM under it."""

    def __init__(self, spark_of: Callable[[], Any], uri_of: Callable[[str], str]):
        self.spark_of, self.uri_of = spark_of, uri_of

    def _fs(self, path: str) -> tuple[Any, Any]:
        spark = self.spark_of()
        jpath = spark._jvm.org.apache.hadoop.fs.Path(self.uri_of(path))
        return jpath.getFileSystem(spark._jsparkSession.sessionState().newHadoopConf()), jpath

    def write(self, path: str, payload: bytes) -> None:
        fs, jpath = self._fs(path)
        out = fs.create(jpath, True)
        out.write(bytearray(payload))
        out.close()

    def rename(self, src: str, dst: str) -> None:
        fs, jsrc = self._fs(src)
        _fs, jdst = self._fs(dst)
        if not fs.rename(jsrc, jdst):
            raise OSError(f"the checkpoint filesystem did not rename {src} to {dst}")


def temporary_name(name: str) -> str:
    """``CheckpointFileManager``'s temporary file for ``name``: ``.<name>.<uuid>.tmp``."""
    return f".{name}.{uuid.uuid4()}.tmp"


class FileSink:
    """The sink directory of one run and every delivery made to it."""

    def __init__(self, directory: str, exactly_once: bool):
        self.dir, self.exactly_once = directory, exactly_once
        os.makedirs(directory, exist_ok=True)
        self.deliveries: dict[int, list[Delivery]] = {}

    def deliver(self, b: int, rows: list[Any], attempt: int, files: SinkFiles | None = None) -> None:
        """Make batch ``b``'s rows visible (exactly-once: a temporary file renamed to its name by batch id),
        through ``files`` (default: the local filesystem)."""
        files = files or LocalFiles()
        payload = json.dumps(rows).encode()
        if self.exactly_once:
            name = f"{b}.json"
            tmp, final = os.path.join(self.dir, temporary_name(name)), os.path.join(self.dir, name)
            files.write(tmp, payload)
            try:
                files.rename(tmp, final)  # the idempotent commit by batch id
            except BaseException:
                if not os.path.exists(tmp) and os.path.exists(final):
                    self._delivered(b, rows)   # the rename happened, and then failed or the driver died
                raise
            self._delivered(b, rows)
            return
        # at-least-once: every attempt's output is visible as soon as it is written
        path = os.path.join(self.dir, f"{b}-{attempt}.json")
        try:
            files.write(path, payload)
        except BaseException:
            if os.path.exists(path):
                self._delivered(b, rows)   # written, and then its close failed or the driver died
            raise
        self._delivered(b, rows)

    def _delivered(self, b: int, rows: list[Any]) -> None:
        self.deliveries.setdefault(b, []).append(Delivery(digest_rows(rows), time.time()))

    def entries(self) -> tuple[SinkEntry, ...]:
        """What the sink shows for each delivered batch, with its delivery count and digests."""
        out = []
        for b in sorted(self.deliveries):
            rows = self._rows(b)
            if rows is None:
                continue
            sent = self.deliveries[b]
            out.append(SinkEntry(b, tuple(canonical_rows(rows)), len(sent), tuple(d.digest for d in sent)))
        return tuple(out)

    def _rows(self, b: int) -> list[Any] | None:
        if self.exactly_once:
            path = os.path.join(self.dir, f"{b}.json")
            if not os.path.exists(path):
                return None
            with open(path) as fh:
                return list(json.load(fh))
        rows: list[Any] = []
        for name in sorted(os.listdir(self.dir)):
            if name.startswith(f"{b}-") and name.endswith(".json"):
                with open(os.path.join(self.dir, name)) as fh:
                    rows.extend(json.load(fh))
        return rows
