"""Names of every file in the checkpoint layout (SPEC section 3).

::

    metadata                                   query id, scenario digest
    offsets/<b>                                versioned JSON, one entry per batch
    commits/<b>                                versioned JSON: watermark, state lineage ids
    state/<op>/<partition>/<v>_<uid>.changelog | .delta | .snapshot
    sink/<b>/part-<p>-<uid>.json               one file per task attempt
    sink/_manifest/<b>                         the exactly-once sink's commit of batch b
    sources/<sp>/<b>                           a redelivering source's fetch state after planning b

State files carry their attempt's lineage uid in the name (Spark's checkpoint
format v2), so a retried task or a zombie writer can never overwrite or be read
as the committed version.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

METADATA = "metadata"
OFFSETS = "offsets"
COMMITS = "commits"
STATE = "state"
SINK = "sink"
MANIFESTS = "sink/_manifest"
SOURCES = "sources"
STATE_KINDS = ("changelog", "delta", "snapshot")

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
    """The batch id of ``offsets/<b>`` or ``commits/<b>``, else None."""
    head, _, tail = path.partition("/")
    if head != folder or not tail.isdigit():
        return None
    return int(tail)
