"""The checks that judge what a state-store bug sequence left behind (spec sections 5 and 6).

A sequence of ``store_bug_sequences.py`` runs at the level of one store, not
of a whole query, so the oracles of ``reference/judge/oracles.py`` are applied here
in their store-level form, against the sequence's own ground truth:

- ``steps_complete``: every step of the sequence, on any thread, finished
  without raising (a store that throws mid-sequence is a bug, not a verdict);
- ``state_equivalence``: every open store holds the version it committed, and
  every committed version that must still load loads, into a fresh store of
  the class under test, to exactly its ground truth;
- ``reconstruction``: every snapshot in the checkpoint, loaded on its own
  (every changelog hidden), equals the ground truth of its version; and the
  reference's own loader (``reference.protocol.state_store.load_version``, the one the
  ``reconstruction`` oracle uses) rebuilds every committed version from every
  snapshot on its lineage, and from a full replay, to the same state;
- ``lineage``: every changelog or delta file still holds the bytes its
  attempt wrote (no other attempt rewrote it), and names its own attempt;
- ``checkpoint``: the sequence's committed line, written out as the offset
  and commit logs a query would have written (``commits/b`` naming the uid of
  version b + 1), obeys the rules of ``reference/judge/checkpoint_rules.py``
  (``lineage_reachable``: every committed version is on the lineage chain
  walked down from the latest commit), and the versions the checkpoint
  retains, read back as the ``checkpoint`` oracle reads them
  (``reference.protocol.retained.retained_states``), equal the ground truth;
- ``maintenance``: every snapshot upload that started left its snapshot.

Between steps (``judge(..., between_steps=True)``) ``maintenance`` is left
out: an upload may be held mid-way there on purpose.

Each check returns a ``Finding``: passed or not, and what it found first.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from reference.judge import checkpoint_rules
from reference.protocol import layout
from reference.language.catalogue import make as make_scenario
from reference.protocol.changelog import decode_state_file
from reference.protocol.logs import CommitEntry, OffsetEntry
from reference.protocol.retained import retained_states
from reference.protocol.state_store import load_version, plan_load
from reference.protocol.storage import CheckpointFormatError, DurableStorage

from .store_bug_sequences import OP, PART, StoreBench, Trace, snapshots


@dataclass(frozen=True)
class Finding:
    check: str
    ok: bool
    detail: str


def _state(pairs: Any) -> dict[str, Any]:
    return {k: v for k, v in pairs}


def _first_difference(want: dict[str, Any], got: dict[str, Any]) -> str:
    for key in sorted(set(want) | set(got)):
        if want.get(key) != got.get(key):
            return f"key {key!r}: expected {want.get(key)!r}, found {got.get(key)!r}"
    return "no difference"


def _name(version: int, uid: str) -> str:
    return f"version {version} ({uid or 'empty'})"


def steps_complete(trace: Trace, bench: StoreBench) -> Finding:
    if trace.errors:
        return Finding("steps_complete", False, trace.errors[0])
    return Finding("steps_complete", True, "every step finished")


def state_equivalence(trace: Trace, bench: StoreBench) -> Finding:
    for store, (version, uid) in trace.live:
        try:
            held = (store.version, store.uid)
            got = _state(store.items())
        except Exception as exc:
            return Finding("state_equivalence", False, f"the open store cannot be read: {type(exc).__name__}: {exc}")
        if held != (version, uid):
            return Finding("state_equivalence", False, f"the open store holds {_name(*held)}, "
                                                       f"expected {_name(version, uid)}")
        if got != trace.truth[(version, uid)]:
            return Finding("state_equivalence", False, f"the open store's {_name(version, uid)}: "
                                                       + _first_difference(trace.truth[(version, uid)], got))
    for version, uid in trace.must_load:
        fresh = bench.store(trace.storage, trace.provider)
        try:
            fresh.load(version, uid)
            got = _state(fresh.items())
        except Exception as exc:
            return Finding("state_equivalence", False, f"{_name(version, uid)} does not load: "
                                                       f"{type(exc).__name__}: {exc}")
        finally:
            fresh.close()
        if got != trace.truth[(version, uid)]:
            return Finding("state_equivalence", False, f"{_name(version, uid)} loads other state: "
                                                       + _first_difference(trace.truth[(version, uid)], got))
    return Finding("state_equivalence", True, f"{len(trace.live)} open store(s) and {len(trace.must_load)} "
                                              "fresh load(s) equal the ground truth")


def reconstruction(trace: Trace, bench: StoreBench) -> Finding:
    files = {p: trace.storage.read(p) for p in trace.storage.list()}
    alone = DurableStorage({p: d for p, d in files.items() if not p.endswith((".changelog", ".delta"))},
                           snapshot_readers=bench.readers)
    checked = 0
    for path in snapshots(trace.storage):
        if path in trace.damaged:
            continue
        parsed = layout.parse_state_file(path)
        assert parsed is not None, path
        want = trace.truth.get((parsed.version, parsed.uid))
        if want is None:
            return Finding("reconstruction", False, f"{path} is a snapshot of a version no attempt committed")
        try:
            got = load_version(alone, OP, PART, parsed.version, parsed.uid)
        except Exception as exc:
            return Finding("reconstruction", False, f"{path} does not load on its own: {type(exc).__name__}: {exc}")
        checked += 1
        if got != want:
            return Finding("reconstruction", False, f"{path} loaded on its own: " + _first_difference(want, got))
    everything = DurableStorage(files, snapshot_readers=bench.readers)
    for version, uid in trace.must_load:
        plan = _plan(everything, version, uid)
        bases = sorted({0} | ({plan.base_version} if plan is not None else set()) | _snapshot_versions(
            everything, version, uid))
        for base in bases:
            skip = frozenset(range(base + 1, version + 1))
            try:
                got = load_version(everything, OP, PART, version, uid, skip_snapshots=skip)
            except CheckpointFormatError:
                continue  # this base's files are gone (retention) or damaged on purpose
            except Exception as exc:
                return Finding("reconstruction", False, f"{_name(version, uid)} from base {base}: "
                                                        f"{type(exc).__name__}: {exc}")
            checked += 1
            if got != trace.truth[(version, uid)]:
                how = "a full changelog replay" if base == 0 else f"the snapshot of version {base}"
                return Finding("reconstruction", False, f"the reference loader's {_name(version, uid)} from {how}: "
                                                        + _first_difference(trace.truth[(version, uid)], got))
    return Finding("reconstruction", True, f"{checked} snapshot and reference loads equal the ground truth")


def _plan(storage: DurableStorage, version: int, uid: str) -> Any:
    try:
        return plan_load(storage, OP, PART, version, uid)
    except CheckpointFormatError:
        return None


def _snapshot_versions(storage: DurableStorage, version: int, uid: str) -> set[int]:
    """Versions at or below ``version`` with a snapshot of any attempt (the loader keeps to the lineage)."""
    return {p.version for p in (layout.parse_state_file(x) for x in snapshots(storage))
            if p is not None and p.version <= version}


def lineage(trace: Trace, bench: StoreBench) -> Finding:
    trace.record_files()
    present = set(trace.storage.list())
    for path, first in sorted(trace.written.items()):
        if path not in present or path in trace.damaged:
            continue  # retention may delete; damage on purpose is the sequence's
        now = trace.storage.read(path)
        if now != first:
            return Finding("lineage", False, f"{path} was rewritten after its attempt wrote it")
        parsed = layout.parse_state_file(path)
        header, _records = decode_state_file(now, path)
        if parsed is None or (header.version, header.uid) != (parsed.version, parsed.uid):
            return Finding("lineage", False, f"{path} holds {_name(header.version, header.uid)}")
    return Finding("lineage", True, f"{len(trace.written)} state files hold what their attempt wrote")


def checkpoint(trace: Trace, bench: StoreBench) -> Finding:
    if not trace.line:
        return Finding("checkpoint", True, "nothing committed yet")
    latest = max(trace.line)
    if sorted(trace.line) != list(range(1, latest + 1)):
        return Finding("checkpoint", False, f"the committed line has gaps: versions {sorted(trace.line)}")
    on_line = [v for v, u in trace.must_load if trace.line.get(v) == u]
    retain = latest - min(on_line, default=latest) + 1   # the versions the sequence says must still load
    files = {p: trace.storage.read(p) for p in trace.storage.list()}
    for version, uid in trace.line.items():
        batch = version - 1
        files[layout.offset_path(batch)] = OffsetEntry(batch, (batch,), (version,)).encode()
        files[layout.commit_path(batch)] = CommitEntry(batch, 0, [], {OP: {str(PART): uid}}).encode()
    logged = DurableStorage(files, snapshot_readers=bench.readers)
    broken = checkpoint_rules.violations(logged, make_scenario("aggregate", retain=retain),   # one store's files
                                         checkpoint_rules.LINE_RULES)
    if broken:
        rule, message = broken[0]
        return Finding("checkpoint", False, f"{rule}: {message}")
    loaded, errors = retained_states(logged, [OP], PART + 1, retain)
    if errors:
        return Finding("checkpoint", False, f"a retained version does not load: {errors[0]}")
    versions = loaded[OP][str(PART)]
    for v in range(latest - retain + 1, latest + 1):
        want = trace.truth[(v, trace.line[v])]
        got = _state(versions.get(str(v), []))
        if str(v) not in versions or got != want:
            return Finding("checkpoint", False, f"the checkpoint's retained {_name(v, trace.line[v])}: "
                                                + _first_difference(want, got))
    return Finding("checkpoint", True, f"commit log of {latest} batches: the checkpoint rules hold and the last "
                                       f"{retain} versions read back to the ground truth")


def maintenance(trace: Trace, bench: StoreBench) -> Finding:
    present = set(trace.storage.list())
    for path in trace.uploads:
        if path not in present and path not in trace.purged:
            return Finding("maintenance", False, f"the upload of {path} started but the snapshot is not there")
    return Finding("maintenance", True, f"{len(set(trace.uploads))} snapshot upload(s) completed")


CHECKS: dict[str, Callable[[Trace, StoreBench], Finding]] = {
    "steps_complete": steps_complete,
    "state_equivalence": state_equivalence,
    "reconstruction": reconstruction,
    "lineage": lineage,
    "checkpoint": checkpoint,
    "maintenance": maintenance,
}


BETWEEN_STEPS = ("steps_complete", "state_equivalence", "reconstruction", "lineage", "checkpoint")


def judge(trace: Trace, bench: StoreBench, *, between_steps: bool = False) -> list[Finding]:
    """Every check on one trace (those of ``BETWEEN_STEPS`` while it still runs); a check that itself raises
    is a failed finding naming the error."""
    out = []
    for name, check in CHECKS.items():
        if between_steps and name not in BETWEEN_STEPS:
            continue
        try:
            out.append(check(trace, bench))
        except Exception as exc:
            out.append(Finding(name, False, f"the check could not read the checkpoint: {type(exc).__name__}: {exc}"))
    return out


