"""Spark's own checkpoint of the query, read as Spark wrote it: its logs, and which input file each batch read.

The adapter never assumes what Spark did: a batch's boundaries come from
``offsets/<b>`` and the file source's log (``sources/<i>/<log offset>``, plain
or compacted), where the restarted query resumes comes from the latest offset
and commit entries (Spark re-runs a logged batch without a commit, as the
reference does under sync progress).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass

from reference.protocol.recovery import RestartPlan

from .plan import InputFiles, parse_batch_file


@dataclass(frozen=True)
class BatchInfo:
    """What ``offsets/<b>`` says of a batch: the last planned batch of each side's input files, and the
    watermark."""

    files: dict[str, int]
    watermark_ms: int


# CheckpointFileManager's temporary file (".<name>.<uuid>[.TID<n>].tmp"), and RocksDB's SST files
# ("<n>-<uuid>.sst"): names that differ from run to run for the same protocol state
_TEMPORARY = re.compile(r"^\.(.+)\.[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}(\.TID\d+)?\.tmp$")
_SST = re.compile(r"^\d+-[0-9a-f-]{36}\.sst$")


def checkpoint_shape(root: str) -> list[str]:
    """What a crash left, comparable across runs: every file of ``<root>/checkpoint`` and ``<root>/sink`` by
    path relative to ``root``, a temporary file as ``.<name>.tmp`` (its random part dropped), RocksDB's SST
    files left out (their names are random; the version's zip names the ones it needs) and checksums too."""
    out = []
    for top in ("checkpoint", "sink"):
        base = os.path.join(root, top)
        for directory, _dirs, names in os.walk(base):
            for name in names:
                if name.endswith(".crc") or _SST.match(name):
                    continue
                temporary = _TEMPORARY.match(name)
                shown = f".{temporary.group(1)}.tmp" if temporary else name
                out.append(os.path.relpath(os.path.join(directory, shown), root))
    return sorted(out)


def _numbered(directory: str) -> list[int]:
    if not os.path.isdir(directory):
        return []
    return sorted(int(name) for name in os.listdir(directory) if name.isdigit())


class SparkCheckpoint:
    """The checkpoint directory of one query (``<workdir>/checkpoint``) and the input files it read."""

    def __init__(self, path: str, files: InputFiles):
        self.path, self.files = path, files

    def latest_commit(self) -> int:
        return max(_numbered(os.path.join(self.path, "commits")), default=-1)

    def latest_offset(self) -> int:
        return max(_numbered(os.path.join(self.path, "offsets")), default=-1)

    def restart_plan(self) -> RestartPlan:
        """Where Spark's restart begins: re-run the latest logged batch if it has no commit, else the next."""
        logged, committed = self.latest_offset(), self.latest_commit()
        if logged > committed:
            start, end = self.end_of(logged - 1), self.end_of(logged)
            return RestartPlan(logged, start, {logged: (start, end)}, None, kept_through=committed)
        first = committed + 1
        return RestartPlan(first, self.end_of(committed), {}, None, kept_through=committed)

    def end_of(self, b: int) -> tuple[int, ...]:
        """The end offsets of Spark's batch ``b`` (nothing read before batch 0): a batch may have read several
        planned batches' files when the source reads everything that has arrived."""
        position = (0,) * len(self.files.data.partitions)
        if b < 0:
            return position
        for side, planned in sorted(self.read_batch(b).files.items()):
            position = self.files.end_offsets_of(side, planned, position)
        return position

    def source_files(self, source: int, log_offset: int) -> list[str]:
        """The input files the file source logged at ``log_offset`` (plain or compacted log entries): one
        per trigger when it reads one file per trigger, all that had arrived otherwise."""
        directory = os.path.join(self.path, "sources", str(source))
        plain = os.path.join(directory, str(log_offset))
        candidates = [plain] if os.path.exists(plain) else sorted(
            os.path.join(directory, n) for n in os.listdir(directory) if n.endswith(".compact"))
        for path in candidates:
            with open(path) as fh:
                found = [str(entry["path"]) for entry in map(json.loads, fh.read().splitlines()[1:])
                         if entry.get("batchId") == log_offset]
            if found:
                return found
        return []

    def read_batch(self, b: int) -> BatchInfo:
        """Read ``offsets/b`` as Spark wrote it: which input file of each side, and the watermark."""
        with open(os.path.join(self.path, "offsets", str(b))) as fh:
            lines = fh.read().splitlines()
        metadata = json.loads(lines[1])
        files: dict[str, int] = {}
        for source, line in enumerate(lines[2:]):
            try:
                offset = json.loads(line)
            except json.JSONDecodeError:
                continue  # "-": the source has no offset yet
            parsed = [parse_batch_file(path) for path in self.source_files(source, int(offset["logOffset"]))]
            if not parsed or None in parsed:
                raise RuntimeError(f"offsets/{b}: source {source} log offset {offset} names no input file")
            side, planned = max(p for p in parsed if p is not None)   # files are read in batch order
            files[side] = planned
        return BatchInfo(files, int(metadata.get("batchWatermarkMs", 0)))

    def file_list(self, sink_dir: str) -> list[str]:
        """Every file of the checkpoint, and the sink's under ``sink/`` (checksums and temporaries left out)."""
        out = []
        for base, prefix in ((self.path, ""), (sink_dir, "sink/")):
            for directory, _dirs, names in os.walk(base):
                for name in names:
                    if name.endswith(".crc") or name.endswith(".tmp"):
                        continue
                    out.append(prefix + os.path.relpath(os.path.join(directory, name), base))
        return sorted(out)
