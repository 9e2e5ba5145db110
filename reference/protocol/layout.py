"""Names of every file in the checkpoint layout (spec section 3).

::

    metadata                                   query id, scenario digest
    offsets/<b>                                versioned JSON, one entry per batch
    commits/<b>                                versioned JSON: watermark, state lineage ids
    state/<op>/<partition>/<v>_<uid>.changelog | .delta | .snapshot
    sink/<b>/part-<p>-<uid>.json               one file per task attempt
    sink/_manifest/<b>                         the exactly-once sink's commit of batch b
    sources/<sp>/<b>                           a redelivering source's fetch state after planning b
    state/<op>/<partition>/SSTs/<name>.sst     a backend's own snapshot data (RocksDB's SST files), when
                                               ``metadata`` names its ``snapshot_format``
    .<name>[.<pid>.<thread>.<hex>].tmp         a file being written (left behind by a writer that died)
    .lightspeed-run.lock                       ``lightspeed run --checkpoint``'s lock (top level only)

``classify`` names the entry a path is, and anything it does not name is not
part of a checkpoint. Ids are written in canonical decimal (``offsets/7``,
never ``offsets/07``).

A name read from inside a checkpoint (a manifest's file names, a snapshot's
SST names, a sink manifest's part files, a metadata field) is untrusted input:
``checked_name`` is the one check every reader applies before such a name
becomes a path, and a name it refuses is a ``CheckpointFormatError`` naming the
file and the field. A name passes when it is one path component, or (where a
relative path is expected) a path of such components: no absolute path, no
empty, ``.`` or ``..`` component, no NUL or other control character, no
component over ``MAX_NAME_BYTES`` and no path over ``MAX_PATH_BYTES``. Such a
path stays under whatever root it is joined to, and the writers that use one
never follow a link.

State files carry their attempt's lineage uid in the name (Spark's checkpoint
format v2), so a retried task or a zombie writer can never overwrite or be read
as the committed version.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from .storage import CheckpointFormatError, excerpt

METADATA = "metadata"
OFFSETS = "offsets"
COMMITS = "commits"
STATE = "state"
SINK = "sink"
MANIFESTS = "sink/_manifest"
SOURCES = "sources"
STATE_KINDS = ("changelog", "delta", "snapshot")
SNAPSHOT_DATA = "SSTs"           # a store's folder of snapshot data in a backend's own format (Spark's RocksDB)
RUN_LOCK = ".lightspeed-run.lock"

# The fields of each JSON file of the layout (by ``classify``'s kind) and of each watermark tracker in a commit
# entry's ``next_trackers``: a field outside these is a finding of the checkpoint rules (``fields``), never
# silently ignored; "metadata"'s ``scenario`` and ``snapshot_format`` may be absent.
FIELDS: dict[str, frozenset[str]] = {
    "metadata": frozenset({"id", "scenario_digest", "scenario", "snapshot_format"}),
    "offset": frozenset({"batch", "start_offsets", "end_offsets"}),
    "commit": frozenset({"batch", "watermark_ms", "next_trackers", "state_lineage"}),
    "manifest": frozenset({"batch", "files", "delivery"}),
    "fetch_state": frozenset({"version", "batch", "through_ms", "ledger"}),
}
TRACKER_FIELDS = frozenset({"watermark_ms", "late_watermark_ms", "max_event_ms"})

MAX_NAME_BYTES = 255            # one path component, as Linux's NAME_MAX
MAX_PATH_BYTES = 4096           # a whole relative path, as Linux's PATH_MAX

_STATE_FILE = re.compile(r"^(\d+)_([A-Za-z0-9.-]+)\.(changelog|delta|snapshot)$")


def offset_path(batch: int) -> str:
    return f"{OFFSETS}/{batch}"


def commit_path(batch: int) -> str:
    return f"{COMMITS}/{batch}"


def store_dir(op: str, partition: int) -> str:
    return f"{STATE}/{op}/{partition}"


def state_file(op: str, partition: int, version: int, uid: str, kind: str) -> str:
    return f"{store_dir(op, partition)}/{version}_{uid}.{kind}"


def sink_part_path(batch: int, partition: int, uid: str) -> str:
    return f"{SINK}/{batch}/part-{partition}-{uid}.json"


def manifest_path(batch: int) -> str:
    return f"{MANIFESTS}/{batch}"


@dataclass(frozen=True)
class StateFileName:
    version: int
    uid: str
    kind: str


@functools.lru_cache(maxsize=65536)
def parse_state_file(name: str) -> StateFileName | None:
    """Parse the last path component of a state file; None for anything else."""
    match = _STATE_FILE.match(name.rsplit("/", 1)[-1])
    if not match:
        return None
    return StateFileName(int(match.group(1)), match.group(2), match.group(3))


def batch_of(path: str, folder: str) -> int | None:
    """The batch id of ``offsets/<b>`` or ``commits/<b>``, else None (a name that is not the canonical
    decimal of a batch id is not a log entry)."""
    head, _, tail = path.partition("/")
    if head != folder:
        return None
    return number(tail)


def number(text: str) -> int | None:
    """The id ``text`` is the canonical decimal of (``7``, not ``07`` or ``+7``), else None."""
    if not (text.isascii() and text.isdigit()) or (len(text) > 1 and text[0] == "0"):
        return None
    return int(text)


@dataclass(frozen=True)
class Entry:
    """What a path of a checkpoint is: ``kind`` is one of ``ENTRY_KINDS``, or of ``FOLDER_KINDS`` for a folder;
    the ids its name carries (``batch`` is a state file's version); for a ``temp`` file, the kind of the
    file it was becoming (``written``)."""

    kind: str
    batch: int | None = None
    store: str | None = None
    partition: int | None = None
    written: str | None = None


ENTRY_KINDS = ("metadata", "offset", "commit", "state", "snapshot_data", "sink_part", "manifest", "fetch_state",
               "temp", "run_lock")
FOLDER_KINDS = ("log", "state", "store", "snapshot_data", "sink", "sink_batch", "manifests", "sources",
                "source")
_SINK_PART = re.compile(r"^part-(0|[1-9][0-9]*)-[A-Za-z0-9.-]+\.json$")
_TEMP = re.compile(r"^\.(?P<name>.+?)(\.[0-9]+\.[0-9]+\.[0-9a-f]{8})?\.tmp$")


def classify(path: str) -> Entry | None:
    """The layout entry the file ``path`` is (spec section 3), or None when it is none."""
    folder, _, name = path.rpartition("/")
    temp = _TEMP.match(name)
    if temp is not None:
        inner = classify(f"{folder}/{temp['name']}" if folder else temp["name"])
        if inner is None or inner.kind in ("temp", "run_lock"):
            return None
        return Entry("temp", inner.batch, inner.store, inner.partition, written=inner.kind)
    parts = path.split("/")
    if path in (METADATA, RUN_LOCK):
        return Entry("metadata" if path == METADATA else "run_lock")
    if len(parts) == 2 and parts[0] in (OFFSETS, COMMITS) and number(parts[1]) is not None:
        return Entry("offset" if parts[0] == OFFSETS else "commit", number(parts[1]))
    if len(parts) == 3 and parts[:2] == MANIFESTS.split("/") and number(parts[2]) is not None:
        return Entry("manifest", number(parts[2]))
    if len(parts) == 3 and parts[0] == SINK and number(parts[1]) is not None and _SINK_PART.match(parts[2]):
        return Entry("sink_part", number(parts[1]), partition=int(parts[2].split("-")[1]))
    if len(parts) == 3 and parts[0] == SOURCES and number(parts[1]) is not None and number(parts[2]) is not None:
        return Entry("fetch_state", number(parts[2]), partition=number(parts[1]))
    if len(parts) in (4, 5) and parts[0] == STATE and parts[1] and number(parts[2]) is not None:
        store, partition = parts[1], number(parts[2])
        if len(parts) == 5:
            return Entry("snapshot_data", store=store, partition=partition) \
                if parts[3] == SNAPSHOT_DATA and name.endswith(".sst") and len(name) > 4 else None
        parsed = parse_state_file(name)
        if parsed is not None and number(name.split("_", 1)[0]) is not None:
            return Entry("state", parsed.version, store, partition)
    return None


def classify_folder(path: str) -> Entry | None:
    """The layout folder the directory ``path`` is (kind one of ``FOLDER_KINDS``), or None when it is none."""
    parts = path.split("/")
    if len(parts) == 1:
        kinds = {OFFSETS: "log", COMMITS: "log", STATE: "state", SINK: "sink", SOURCES: "sources"}
        return Entry(kinds[path]) if path in kinds else None
    if parts[0] == SINK and len(parts) == 2:
        if parts[1] == MANIFESTS.split("/")[1]:
            return Entry("manifests")
        return Entry("sink_batch", number(parts[1])) if number(parts[1]) is not None else None
    if parts[0] == SOURCES and len(parts) == 2 and number(parts[1]) is not None:
        return Entry("source", partition=number(parts[1]))
    if parts[0] == STATE and len(parts) == 2 and parts[1]:
        return Entry("store", store=parts[1])
    if parts[0] == STATE and len(parts) in (3, 4) and number(parts[2]) is not None:
        if len(parts) == 3:
            return Entry("store", store=parts[1], partition=number(parts[2]))
        return Entry("snapshot_data", store=parts[1], partition=number(parts[2])) if parts[3] == SNAPSHOT_DATA \
            else None
    return None


def name_problem(name: object, *, component: bool = True) -> str | None:
    """Why ``name``, read from a checkpoint, cannot be joined to a root as a path (``component``: as one path
    component; else as a relative path), or None when it can (see the module docstring)."""
    if not isinstance(name, str):
        return f"is not a string (a JSON {type(name).__name__})"
    if not name:
        return "is empty"
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in name):
        return "holds a control character (a NUL, a newline or a terminal escape)"
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        return "is not valid Unicode text"
    if size > MAX_PATH_BYTES:
        return f"is {size:,} bytes long, more than the {MAX_PATH_BYTES:,} of a path"
    if name.startswith("/"):
        return "is an absolute path"
    parts = name.split("/")
    if component and len(parts) > 1:
        return "is a path, not one file name"
    for part in parts:
        if part in ("", ".", ".."):
            return f"holds the path component {part!r}, which leaves the folder or names none"
        if len(part.encode("utf-8")) > MAX_NAME_BYTES:
            return f"has a component of {len(part.encode('utf-8')):,} bytes, more than the {MAX_NAME_BYTES} of a " \
                   "file name"
    return None


def checked_name(name: object, file: str, field: str, *, component: bool = True) -> str:
    """``name`` when it passes ``name_problem``; else a ``CheckpointFormatError`` naming the checkpoint ``file``
    it was read from and its ``field`` (``other_files[2].name``), quoting the name short and escaped."""
    why = name_problem(name, component=component)
    if why is not None:
        raise CheckpointFormatError(f"{file}: {field} {excerpt(str(name))} {why}; a name read from a checkpoint "
                                    "must stay inside it (tampered?)")
    assert isinstance(name, str)
    return name
