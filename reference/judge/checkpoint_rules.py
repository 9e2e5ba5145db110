"""Rules every checkpoint obeys at every instant (spec sections 2 and 3), whatever crashed when.

They are checked on every crash checkpoint the explorer reaches (before
recovery reads it) and on every backend's final checkpoint. Every file the
checkpoint holds is named by one of them or read by one of them:

- ``layout``: every entry is a file or folder of the layout (``layout.classify``)
  for this query: its stores and partitions, its source partitions, its sink
  mode, a backend's own snapshot data only where ``metadata`` names its
  format. Anything else (a stray file, a link, a FIFO, a device) is named,
  every one of them.
- ``metadata``: the query id ``metadata`` holds is this query's (its seed fixes
  it, ``logs.query_id``), and the name of the scenario that wrote it is a
  scenario's name, never a path.
- ``fields``: every JSON file of the checkpoint (metadata, offset and commit
  entries, sink manifests, fetch states, and the watermark trackers of a commit
  entry) holds only the fields its format has (``layout.FIELDS``): an unknown
  one is named with its file, never silently ignored. This is the one place
  that rule lives.
- ``log_entries``: every offset and commit entry decodes, is of the batch its
  name says, covers the query's source partitions, and consecutive offset
  entries meet (batch b starts where b - 1 ended); a commit entry names a
  lineage id for every store and partition of the query, and no other.
- ``commit_order``: commit entries are written in batch order. Under sync
  progress every batch from the oldest retained commit entry up to the latest
  one has its entry: a gap means a later entry was written before an earlier
  one. (Async progress writes commit entries only for persisted offsets, so
  its logs have gaps by design; the rule does not apply there.)
- ``commit_has_offsets``: no commit entry without its offset entry (purge cuts
  both logs at one threshold).
- ``offsets_committed``: under sync progress an offset entry without its
  commit entry is a batch in flight: a crash may leave the newest ones so
  (``in_flight_limit`` of them, read off the step graph by ``bounds.py``: one,
  ``pipeline_depth`` under pipelining, two under async state checkpointing of a
  stateful query), never one older than a committed
  batch, which ran to its commit after it. (Async progress skips commit
  entries of batches a restart folded, so the rule does not apply there.)
- ``log_retention``: under sync progress purge left the newest
  ``offset_entries_kept`` offset entries, and under inline purge no more than
  ``offset_entries_ceiling`` (``bounds.py``: derived from the step graph).
- ``watermark_monotone``: the watermark in the commit log never decreases.
- ``lineage_reachable``: every version named by the last
  ``min_batches_to_retain`` commit entries is on the committed lineage chain
  walked down from the latest commit entry, with the same uid; a chain that
  stops at a file that does not decode names that file.
- ``state_files``: every state file decodes, and its header is the version,
  kind and lineage id its name says (a file copied over another is named).
- ``sink_files``: every sink manifest and part file decodes, and a manifest
  names part files of its own batch that are there (``sink_files.py``).
- ``fetch_state``: every fetch state of a redelivering source decodes and is
  of the batch its name says.

``violations`` returns each broken rule as ``(rule, message)``; an unreadable
log entry is itself a violation naming the file. A checkpoint that is not a
whole query's (the bug zoo's one store with the logs its committed line
implies) is judged by ``LINE_RULES`` alone.
"""

from __future__ import annotations

import json
from typing import Collection

from ..protocol import layout
from .bounds import bounds_of
from ..language.json_input import JsonInputError, loads
from ..protocol.logs import CommitEntry, OffsetEntry, decode_entry, log_batches, query_id, read_metadata
from ..protocol.retained import committed_chain, unreadable
from ..language.scenario import MAX_NAME_CHARS, Scenario
from ..protocol.sink_files import read_manifest, read_part
from ..protocol.state_store import read_state_file
from ..protocol.storage import CheckpointFormatError, Storage, excerpt, inventory

RULES = ("layout", "metadata", "fields", "log_entries", "commit_order", "commit_has_offsets", "offsets_committed", "log_retention",
         "watermark_monotone", "lineage_reachable", "state_files", "sink_files", "fetch_state")
# Each numeric or ordered condition of the rules, listed once with every way it can fail;
# tests/quick/test_judge_both_ways.py crafts, for every way, a checkpoint that only that rule rejects.
RULE_WAYS: dict[str, dict[str, tuple[str, ...]]] = {
    "log_entries": {"where an offset entry starts": ("a gap after the entry before", "an overlap with it"),
                    "the first batch's start": ("not at the beginning",),
                    "source partitions of an entry": ("too few", "too many"),
                    "the stores and partitions a commit entry names": ("too few", "too many")},
    "commit_order": {"commit entries (sync)": ("a gap",)},
    "commit_has_offsets": {"a commit entry's offset entry": ("missing",)},
    "offsets_committed": {"offset entries without a commit entry (sync)": ("older than a commit entry",
                                                                           "more than can be in flight")},
    "log_retention": {"offset entries kept (sync)": ("below the floor", "above the inline-purge ceiling")},
    "watermark_monotone": {"the watermarks of the commit log": ("going back",)},
    "lineage_reachable": {"a retained commit entry's version on the chain": ("another attempt", "no file")},
}
LINE_RULES = ("commit_order", "commit_has_offsets", "offsets_committed", "watermark_monotone", "lineage_reachable")


def in_flight_limit(scenario: Scenario) -> int:
    """How many batches may be planned and not committed at once under sync progress, as the step graph
    gives it (``bounds.Bounds.in_flight``), real-time mode's graph included (one batch; two progress points
    under bounded replay). A restart re-runs at most these (``oracles.replay_bound``)."""
    return bounds_of(scenario).in_flight


def violations(storage: Storage, scenario: Scenario, rules: Collection[str] = RULES) -> list[tuple[str, str]]:
    """Each broken rule of ``rules`` (default: every rule) as ``(rule, message)``. ``LINE_RULES`` judge the logs
    and the lineage alone, for a checkpoint that is not a whole query's (the bug zoo writes one store's)."""
    out = _layout(storage, scenario) if "layout" in rules else []
    out += _metadata(storage, scenario) if "metadata" in rules else []
    out += _fields(storage) if "fields" in rules else []
    offsets = log_batches(storage, layout.OFFSETS)
    commits = log_batches(storage, layout.COMMITS)
    broken = _offset_entries(storage, scenario, offsets) if "log_entries" in rules else None
    if broken is not None:
        return out + [("log_entries", broken)]
    sync = scenario.engine.progress_mode == "sync"
    if sync and commits:
        missing = sorted(set(range(commits[0], commits[-1] + 1)) - set(commits))
        if missing:
            out.append(("commit_order", f"{layout.commit_path(missing[0])} is missing while "
                                        f"{layout.commit_path(commits[-1])} exists: commit entries were written "
                                        "out of batch order"))
    orphans = [b for b in commits if b not in offsets]
    if orphans:
        out.append(("commit_has_offsets", f"{layout.commit_path(orphans[0])} exists without "
                                          f"{layout.offset_path(orphans[0])}"))
    if sync:
        out += _uncommitted(scenario, offsets, commits)
        out += _log_retention(scenario, offsets, commits) if "log_retention" in rules else []
    entries = []
    for b in commits:
        try:
            entries.append(CommitEntry.read(storage, b))
        except CheckpointFormatError as exc:
            out.append(("log_entries", str(exc)))
            return out
    lineage = _lineage_keys(scenario, entries) if "log_entries" in rules else None
    if lineage is not None:
        return out + [("log_entries", lineage)]
    for before, after in zip(entries, entries[1:]):
        if after.watermark_ms < before.watermark_ms:
            out.append(("watermark_monotone", f"{layout.commit_path(after.batch)} holds watermark "
                                              f"{after.watermark_ms} after {before.watermark_ms} in "
                                              f"{layout.commit_path(before.batch)}"))
            break
    out += _unreachable(storage, scenario, entries)
    out += [(rule, why) for rule, why in _unreadable_files(storage) if rule in rules]
    return out


# ------------------------------------------------------------------ layout


def source_partitions(scenario: Scenario) -> tuple[int, frozenset[int]]:
    """How many source partitions the query reads (a join's sides in name order, as ``sources.SourceData``
    lays them out), and which of them are redelivering (they keep a fetch state)."""
    count, fetching = 0, set[int]()
    for side in sorted(scenario.sources):
        src = scenario.sources[side]
        if src.kind == "redelivering":
            fetching.add(count)
        count += src.partitions
    return count, frozenset(fetching)


def _layout(storage: Storage, scenario: Scenario) -> list[tuple[str, str]]:
    """Every entry that is not part of this query's checkpoint, named with what it is instead (the entries under
    a stray folder are not named again)."""
    try:
        foreign = (read_metadata(storage) or {}).get("snapshot_format") is not None
    except CheckpointFormatError:
        foreign = False   # the checkpoint oracle names unreadable metadata
    out: list[tuple[str, str]] = []
    stray: list[str] = []
    for path, kind in inventory(storage):
        if any(path.startswith(folder + "/") for folder in stray):
            continue
        if kind == "directory":
            why = _stray_folder(path, scenario, foreign)
            if why is not None:
                stray.append(path)
        elif kind == "file":
            why = _stray_file(path, scenario, foreign)
        else:
            why = f"is a {kind}; a checkpoint holds regular files and folders only"
        if why is not None:
            out.append(("layout", f"{path}: {why}"))
    return out


def _metadata(storage: Storage, scenario: Scenario) -> list[tuple[str, str]]:
    """The fields of ``metadata`` that cannot be this query's (its digest is the checkpoint oracle's first
    question): the query id, which its seed fixes (``logs.query_id``), and the name of the scenario that wrote
    it, which is a scenario's name (not necessarily this one's: a checkpoint may be resumed under other modes,
    and another name), never a path."""
    try:
        meta = read_metadata(storage)
    except CheckpointFormatError:
        return []   # the checkpoint oracle names unreadable metadata
    if meta is None:
        return []
    out = []
    if meta.get("id") != query_id(scenario.seed):
        out.append(("metadata", f"{layout.METADATA}: id is {json.dumps(meta.get('id'))[:80]}, but this query's is "
                                f"{json.dumps(query_id(scenario.seed))} (tampered, or another query's)"))
    name = meta.get("scenario", scenario.name)
    why = layout.name_problem(name) or (None if len(name) <= MAX_NAME_CHARS else "is too long")
    if why is not None:
        out.append(("metadata", f"{layout.METADATA}: scenario {json.dumps(name)[:80]} {why}: not a scenario's "
                                "name (tampered?)"))
    return out


FILE_NAMES = {"metadata": "the metadata file", "offset": "an offset entry", "commit": "a commit entry",
              "manifest": "a sink manifest", "fetch_state": "a fetch state"}


def _fields(storage: Storage) -> list[tuple[str, str]]:
    """Every JSON file of the checkpoint holding a field its format does not have (``layout.FIELDS``), named
    with the file and the field; files that do not decode are the other rules' findings."""
    out = []
    for path in storage.list():
        entry = layout.classify(path)
        kind = entry.kind if entry is not None else None
        if kind not in layout.FIELDS:
            continue
        try:
            data = storage.read(path)
            body = decode_entry(data, path) if kind in ("metadata", "offset", "commit") else loads(data)
        except (CheckpointFormatError, JsonInputError):
            continue
        if not isinstance(body, dict):
            continue
        unknown = sorted(set(body) - layout.FIELDS[kind])
        trackers = body.get("next_trackers") if kind == "commit" else None
        for i, tracker in enumerate(trackers if isinstance(trackers, list) else []):
            if isinstance(tracker, dict):
                unknown += [f"next_trackers[{i}].{k}" for k in sorted(set(tracker) - layout.TRACKER_FIELDS)]
        if unknown:
            out.append(("fields", f"{path}: holds the field {excerpt(unknown[0])}"
                                  + (f" (and {len(unknown) - 1} more)" if len(unknown) > 1 else "")
                                  + f", which {FILE_NAMES[kind]} does not have (tampered?)"))
    return out


def _stray_file(path: str, scenario: Scenario, foreign: bool) -> str | None:
    entry = layout.classify(path)
    if entry is None:
        return "a stray file: no file of the checkpoint layout (spec section 3) has this name"
    kind = entry.written if entry.kind == "temp" else entry.kind
    if kind == "manifest" and scenario.sink_mode != "exactly_once":
        return "a sink manifest, but this query's sink is at-least-once"
    if kind == "sink_part" and entry.partition is not None and entry.partition >= scenario.state_partitions:
        return f"a sink part file of partition {entry.partition}; the query has {scenario.state_partitions}"
    if kind == "fetch_state":
        return _stray_source(entry.partition, scenario)
    if kind == "snapshot_data" and not foreign:
        return "snapshot data of a backend's own format, but metadata names no snapshot_format"
    if kind in ("state", "snapshot_data"):
        return _stray_store(entry, scenario)
    return None


def _stray_folder(path: str, scenario: Scenario, foreign: bool) -> str | None:
    entry = layout.classify_folder(path)
    if entry is None:
        return "a stray folder: the checkpoint layout (spec section 3) has no folder of this name"
    if entry.kind == "source":
        return _stray_source(entry.partition, scenario)
    if entry.kind == "snapshot_data" and not foreign:
        return "a folder of a backend's own snapshot data, but metadata names no snapshot_format"
    if entry.store is not None:
        return _stray_store(entry, scenario)
    return None


def _stray_source(partition: int | None, scenario: Scenario) -> str | None:
    if partition not in source_partitions(scenario)[1]:
        return f"a fetch state of source partition {partition}, which is not a redelivering source partition of " \
               "this query"
    return None


def _stray_store(entry: layout.Entry, scenario: Scenario) -> str | None:
    stores = scenario.store_ids
    if entry.store not in stores:
        return f"state of store {entry.store!r}; this query's stores are {list(stores)}"
    if entry.partition is not None and entry.partition >= scenario.state_partitions:
        return f"state of partition {entry.partition}; the query has {scenario.state_partitions}"
    return None


# ------------------------------------------------------------- log entries


def _offset_entries(storage: Storage, scenario: Scenario, offsets: list[int]) -> str | None:
    """The first offset entry that does not decode, is of another batch or partition count, or does not start
    where the entry before it ended."""
    count, _ = source_partitions(scenario)
    previous: OffsetEntry | None = None
    for b in offsets:
        try:
            entry = OffsetEntry.read(storage, b)
        except CheckpointFormatError as exc:
            return str(exc)
        if len(entry.end) != count:
            return f"{layout.offset_path(b)}: offsets of {len(entry.end)} source partitions; the query reads {count}"
        if b == 0 and any(entry.start):
            return f"{layout.offset_path(b)}: the first batch starts at {list(entry.start)}, not at the beginning"
        if previous is not None and previous.batch == b - 1 and entry.start != previous.end:
            return (f"{layout.offset_path(b)}: starts at {list(entry.start)}, but "
                    f"{layout.offset_path(b - 1)} ended at {list(previous.end)}")
        previous = entry
    return None


def _lineage_keys(scenario: Scenario, entries: list[CommitEntry]) -> str | None:
    """The first commit entry whose lineage does not name exactly the query's stores and partitions."""
    want = {sid: sorted(str(p) for p in range(scenario.state_partitions)) for sid in scenario.store_ids}
    for entry in entries:
        have = {sid: sorted(parts) for sid, parts in entry.state_lineage.items()}
        if have != want:
            return (f"{layout.commit_path(entry.batch)}: names lineage ids of stores and partitions "
                    f"{ {k: len(v) for k, v in have.items()} }; the query has { {k: len(v) for k, v in want.items()} }")
    return None


def _uncommitted(scenario: Scenario, offsets: list[int], commits: list[int]) -> list[tuple[str, str]]:
    """Sync progress: offset entries without their commit entry are the newest, at most ``in_flight_limit``."""
    pending = [b for b in offsets if b not in set(commits)]
    older = [b for b in pending if commits and b < commits[-1]]
    if older:
        return [("offsets_committed", f"{layout.offset_path(older[0])} has no {layout.commit_path(older[0])}, "
                                      f"but {layout.commit_path(commits[-1])} exists: under sync progress only "
                                      "the newest batches may be planned and not committed")]
    limit = in_flight_limit(scenario)
    if len(pending) > limit:
        return [("offsets_committed", f"{len(pending)} offset entries ({layout.offset_path(pending[0])} to "
                                      f"{layout.offset_path(pending[-1])}) have no commit entry; at most {limit} "
                                      "batch(es) can be in flight in these modes")]
    return []


def _log_retention(scenario: Scenario, offsets: list[int], commits: list[int]) -> list[tuple[str, str]]:
    """Sync progress: purge left at least the newest ``offset_entries_kept`` offset entries and (inline purge)
    at most ``offset_entries_ceiling`` (``bounds.py``). The floor of commit entries (``commit_entries_kept``)
    follows from this floor, ``offsets_committed`` and ``commit_has_offsets``, so it needs no check here."""
    limits = bounds_of(scenario)
    if offsets:
        first = max(0, offsets[-1] - limits.offset_entries_kept + 1)
        if offsets[0] > first:
            return [("log_retention", f"{layout.offset_path(first)} is purged while {layout.offset_path(offsets[-1])} "
                                      f"exists: purge keeps the newest {limits.offset_entries_kept} offset entries")]
    ceiling = limits.offset_entries_ceiling
    if ceiling is not None and len(offsets) > ceiling:
        return [("log_retention", f"{len(offsets)} offset entries ({layout.offset_path(offsets[0])} to "
                                  f"{layout.offset_path(offsets[-1])}) are kept; inline purge keeps at most {ceiling}")]
    return []


# ------------------------------------------------------------------- state


def _unreachable(storage: Storage, scenario: Scenario, entries: list[CommitEntry]) -> list[tuple[str, str]]:
    if not entries:
        return []
    latest = entries[-1]
    recent = entries[-scenario.engine.min_batches_to_retain:]
    for sid, per_part in latest.state_lineage.items():
        for p_text, uid in per_part.items():
            links = committed_chain(storage, sid, int(p_text), latest.batch + 1, uid)
            chain = {link.version: link.uid for link in links}
            for entry in recent:
                want = entry.state_lineage.get(sid, {}).get(p_text)
                version = entry.batch + 1
                if want is not None and chain.get(version) != want:
                    store = layout.store_dir(sid, int(p_text))
                    found = chain.get(version)
                    stop = unreadable(storage, links[-1]) if links and not found else None
                    if stop is not None:   # name the file that broke the chain, not the version it hid
                        return [("lineage_reachable", f"{store}: the lineage chain stops at version "
                                                      f"{links[-1].version}, whose file does not decode ({stop}); "
                                                      f"version {version} ({layout.commit_path(entry.batch)} names "
                                                      f"{want!r}) is below it")]
                    what = f"lineage id {found!r}" if found else "no file on the chain"
                    return [("lineage_reachable", f"{store}: version {version} "
                                                  f"({layout.commit_path(entry.batch)} names {want!r}) has {what}")]
    return []


def _unreadable_files(storage: Storage) -> list[tuple[str, str]]:
    """The first state, sink or fetch-state file that does not decode as what its name says it is."""
    for path in storage.list():
        entry = layout.classify(path)
        kind = entry.kind if entry is not None else None
        try:
            if kind == "state":
                _state_file(storage, path)
            elif kind == "manifest":
                assert entry is not None and entry.batch is not None
                for part in read_manifest(storage, entry.batch).files:
                    storage.read(part)
            elif kind == "sink_part":
                read_part(storage, path)
            elif kind == "fetch_state":
                assert entry is not None
                _fetch_state(storage, path, entry.batch)
        except CheckpointFormatError as exc:
            rule = {"state": "state_files", "fetch_state": "fetch_state"}.get(kind or "", "sink_files")
            return [(rule, str(exc))]
    return []


def _state_file(storage: Storage, path: str) -> None:
    """Decode a state file in full (decodes of the reference's format are cached by content) and compare its
    header with its name. A snapshot of a backend's own format is decoded by its reader too, which validates
    every name it holds before restoring it: a load could fall back past a damaged one (SPARK-21696), so only
    this rule names it when it is off the committed chain."""
    name = layout.parse_state_file(path)
    assert name is not None
    header, _ = read_state_file(storage, path)
    if (header.version, header.kind, header.uid) != (name.version, name.kind, name.uid):
        raise CheckpointFormatError(f"{path}: holds {header.kind} version {header.version} of lineage id "
                                    f"{header.uid!r}, not what its name says")


def _fetch_state(storage: Storage, path: str, batch: int | None) -> None:
    try:
        body = loads(storage.read(path))
    except JsonInputError as exc:
        raise CheckpointFormatError(f"{path}: unreadable fetch state: {exc}") from None
    if not isinstance(body, dict) or body.get("batch") != batch or not isinstance(body.get("ledger"), list) \
            or not isinstance(body.get("through_ms"), int):
        raise CheckpointFormatError(f"{path}: not the fetch state of batch {batch} "
                                    "({\"batch\", \"through_ms\", \"ledger\", \"version\"})")
