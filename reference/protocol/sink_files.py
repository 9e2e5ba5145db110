"""The sink's files in a checkpoint (spec section 3), decoded: what each batch's output is, read from its files.

The exactly-once sink writes ``sink/<b>/part-<p>-<uid>.json`` (a JSON list of
rows) per task attempt and commits batch b by writing ``sink/_manifest/<b>``:
``{"batch": b, "files": [...], "delivery": n}``, the part files of the
committed attempts and how many times the batch was committed. The
at-least-once sink's part files are visible as soon as written. A file that
does not decode, a manifest of another batch or naming a file that is not a
part file of its batch, is a ``CheckpointFormatError`` naming the file.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from . import layout
from ..language.json_input import JsonInputError, loads
from .outcome import SinkEntry, canonical_rows
from .storage import CheckpointFormatError, Storage


@dataclass(frozen=True)
class Manifest:
    """The exactly-once sink's commit of one batch."""

    batch: int
    files: tuple[str, ...]
    delivery: int


def _json(storage: Storage, path: str, what: str) -> Any:
    try:
        return loads(storage.read(path))
    except JsonInputError as exc:
        raise CheckpointFormatError(f"{path}: unreadable {what}: {exc}") from None


def read_part(storage: Storage, path: str) -> list[Any]:
    """The rows of one part file."""
    rows = _json(storage, path, "sink part file")
    if not isinstance(rows, list):
        raise CheckpointFormatError(f"{path}: a sink part file holds a JSON list of rows")
    return rows


def read_manifest(storage: Storage, batch: int) -> Manifest:
    """The manifest of ``batch``: of that batch, naming part files of that batch, delivered at least once."""
    path = layout.manifest_path(batch)
    body = _json(storage, path, "sink manifest")
    if not isinstance(body, dict) or not layout.FIELDS["manifest"] <= set(body):   # more: the ``fields`` rule
        raise CheckpointFormatError(f"{path}: a sink manifest is {{\"batch\": b, \"files\": [...], \"delivery\": n}}")
    files, delivery = body["files"], body["delivery"]
    if body["batch"] != batch or isinstance(body["batch"], bool):
        raise CheckpointFormatError(f"{path}: the manifest is of batch {str(body['batch'])[:20]}, not of batch "
                                    f"{batch} as its name says")
    if not isinstance(delivery, int) or isinstance(delivery, bool) or delivery < 1:
        raise CheckpointFormatError(f"{path}: delivery {str(delivery)[:20]} is not a count of commits (>= 1)")
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        raise CheckpointFormatError(f"{path}: files is not a list of paths")
    for name in files:
        entry = layout.classify(name)
        if entry is None or entry.kind != "sink_part" or entry.batch != batch:
            raise CheckpointFormatError(f"{path}: names {name[:80]!r}, not a part file of batch {batch}")
    return Manifest(batch, tuple(files), delivery)


def manifest_batches(storage: Storage) -> list[int]:
    """The batches the exactly-once sink committed, ascending (names that are not a batch id are stray)."""
    entries = [layout.classify(path) for path in storage.list(layout.MANIFESTS + "/")]
    return sorted(e.batch for e in entries if e is not None and e.kind == "manifest" and e.batch is not None)


def visible_output(storage: Storage, sink_mode: str,
                   digests: Mapping[int, Sequence[str]] | None = None) -> tuple[SinkEntry, ...]:
    """The visible output, per batch: the committed manifests' rows (exactly-once), or every part file's
    (at-least-once, where a batch's deliveries are the most part files one partition has)."""
    digests = digests or {}
    out = []
    if sink_mode == "exactly_once":
        for batch in manifest_batches(storage):
            manifest = read_manifest(storage, batch)
            rows = [row for f in manifest.files for row in read_part(storage, f)]
            out.append(SinkEntry(batch, tuple(canonical_rows(rows)), manifest.delivery,
                                 tuple(digests.get(batch, ()))))
        return tuple(out)
    by_batch: dict[int, tuple[list[Any], dict[int, int]]] = {}
    for path in storage.list(layout.SINK + "/"):
        entry = layout.classify(path)
        if entry is None or entry.kind != "sink_part" or entry.batch is None or entry.partition is None:
            continue   # not a part file (the layout rule of checkpoint_rules.py names it)
        rows, files = by_batch.setdefault(entry.batch, ([], {}))
        rows.extend(read_part(storage, path))
        files[entry.partition] = files.get(entry.partition, 0) + 1
    for batch in sorted(by_batch):
        rows, files = by_batch[batch]
        out.append(SinkEntry(batch, tuple(canonical_rows(rows)), max(files.values()), tuple(digests.get(batch, ()))))
    return tuple(out)
