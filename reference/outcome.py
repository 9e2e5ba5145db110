"""The outcome JSON of SPEC section 4, built from a run and its checkpoint.

Everything in an outcome is either observed across incarnations (the batch
history, recoveries, deliveries) or read back from the checkpoint (retained
state versions, sink contents, the file list). ``dumps`` gives canonical bytes,
so the ``determinism`` oracle can compare two runs byte for byte.

Additions to the SPEC shape: ``seed``; per batch ``start_offsets``; per sink
entry ``delivery_digests`` (one per exactly-once commit, for idempotence);
``error`` (a loud failure) and ``state_errors`` (versions that would not load).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from . import layout
from .query import pipeline_store_ids
from .retained import retained_states
from .storage import Storage

OUTCOME_FIELDS = ("scenario", "backend", "seed", "batches", "state", "sink", "recoveries", "progress",
                  "checkpoint_files", "error", "state_errors")


class OutcomeError(ValueError):
    """An outcome file does not have the shape of SPEC section 4. ``field`` names where."""

    def __init__(self, field_path: str, message: str):
        super().__init__(f"{field_path}: {message}")
        self.field = field_path


@dataclass(frozen=True)
class BatchRecord:
    id: int
    end_offsets: tuple[int, ...]
    start_offsets: tuple[int, ...] | None = None
    watermark_ms: int | None = None
    attempts: int = 1


@dataclass(frozen=True)
class SinkEntry:
    batch: int
    rows: tuple[Any, ...]
    deliveries: int = 1
    delivery_digests: tuple[str, ...] = ()


@dataclass(frozen=True)
class Outcome:
    """An outcome (SPEC section 4) as a value; ``extra`` keeps backend-specific fields (e.g. latency_ms)."""

    scenario: str
    backend: str
    batches: tuple[BatchRecord, ...]
    state: dict[str, dict[str, dict[str, list[list[Any]]]]]
    sink: tuple[SinkEntry, ...]
    recoveries: tuple[dict[str, Any], ...] = ()
    progress: tuple[dict[str, Any], ...] = ()
    checkpoint_files: tuple[str, ...] = ()
    seed: int | None = None
    error: str | None = None
    state_errors: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)

    @staticmethod
    def from_dict(raw: Any) -> "Outcome":
        if not isinstance(raw, dict):
            raise OutcomeError("<outcome>", "expected a JSON object")
        for name in ("scenario", "backend", "batches", "state", "sink"):
            if name not in raw:
                raise OutcomeError(name, "required field is missing")
        batches = tuple(_batch(b, f"batches[{i}]") for i, b in enumerate(_list(raw, "batches")))
        sink = tuple(_sink(e, f"sink[{i}]") for i, e in enumerate(_list(raw, "sink")))
        state = raw["state"]
        if not isinstance(state, dict):
            raise OutcomeError("state", "expected operator -> partition -> version -> [[key, value], ...]")
        for sid, parts in state.items():
            for p, versions in (parts.items() if isinstance(parts, dict) else [(None, None)]):
                if not isinstance(versions, dict):
                    raise OutcomeError(f"state.{sid}", "expected partition -> version -> pairs")
                for v, pairs in versions.items():
                    if not str(v).isdigit() or not isinstance(pairs, list) or \
                            any(not (isinstance(x, list) and len(x) == 2) for x in pairs):
                        raise OutcomeError(f"state.{sid}.{p}.{v}", "expected a version number -> [[key, value], ...]")
        known = set(OUTCOME_FIELDS)
        return Outcome(raw["scenario"], raw["backend"], batches, state, sink,
                       tuple(raw.get("recoveries", [])), tuple(raw.get("progress", [])),
                       tuple(raw.get("checkpoint_files", [])), raw.get("seed"), raw.get("error"),
                       tuple(raw.get("state_errors", [])), {k: v for k, v in raw.items() if k not in known})

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "scenario": self.scenario, "backend": self.backend, "seed": self.seed,
            "batches": [_drop_none({"id": b.id, "start_offsets": list(b.start_offsets) if b.start_offsets is not None
                                    else None, "end_offsets": list(b.end_offsets),
                                    "watermark_ms": b.watermark_ms, "attempts": b.attempts})
                        for b in self.batches],
            "state": self.state,
            "sink": [{"batch": e.batch, "rows": list(e.rows), "deliveries": e.deliveries,
                      "delivery_digests": list(e.delivery_digests)} for e in self.sink],
            "recoveries": list(self.recoveries), "progress": list(self.progress),
            "checkpoint_files": list(self.checkpoint_files), "error": self.error,
            "state_errors": list(self.state_errors)}
        out.update(self.extra)
        return out


def _drop_none(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


def _list(raw: dict[str, Any], name: str) -> list[Any]:
    value = raw[name]
    if not isinstance(value, list):
        raise OutcomeError(name, "expected a list")
    return value


def _ints(value: Any, path: str) -> tuple[int, ...]:
    if not isinstance(value, list) or any(isinstance(x, bool) or not isinstance(x, int) or x < 0 for x in value):
        raise OutcomeError(path, f"expected a list of offsets (integers >= 0), got {value!r}")
    return tuple(value)


def _batch(raw: Any, path: str) -> BatchRecord:
    if not isinstance(raw, dict) or not isinstance(raw.get("id"), int) or "end_offsets" not in raw:
        raise OutcomeError(path, "expected {\"id\": int, \"end_offsets\": [...], ...}")
    start = _ints(raw["start_offsets"], f"{path}.start_offsets") if "start_offsets" in raw else None
    return BatchRecord(raw["id"], _ints(raw["end_offsets"], f"{path}.end_offsets"), start,
                       raw.get("watermark_ms"), raw.get("attempts", 1))


def _sink(raw: Any, path: str) -> SinkEntry:
    if not isinstance(raw, dict) or not isinstance(raw.get("batch"), int) or not isinstance(raw.get("rows"), list):
        raise OutcomeError(path, "expected {\"batch\": int, \"rows\": [...], \"deliveries\": int}")
    return SinkEntry(raw["batch"], tuple(raw["rows"]), raw.get("deliveries", 1),
                     tuple(raw.get("delivery_digests", [])))


def dumps(outcome: dict[str, Any]) -> str:
    return json.dumps(outcome, sort_keys=True, indent=1) + "\n"


def canonical_rows(rows: list[Any]) -> list[Any]:
    """Sink rows in the one order every backend reports them in."""
    return sorted(rows, key=repr)


def digest_rows(rows: list[Any]) -> str:
    return hashlib.sha256(json.dumps(canonical_rows(rows)).encode()).hexdigest()[:16]


def read_sink(storage: Storage, sink_mode: str) -> list[dict[str, Any]]:
    """The visible output: committed manifests (exactly-once) or every part file (at-least-once)."""
    out = []
    if sink_mode == "exactly_once":
        for path in storage.list(layout.MANIFESTS + "/"):
            manifest = json.loads(storage.read(path))
            rows = [row for f in manifest["files"] for row in json.loads(storage.read(f))]
            out.append({"batch": manifest["batch"], "rows": canonical_rows(rows),
                        "deliveries": manifest["delivery"]})
        return sorted(out, key=lambda e: e["batch"])
    by_batch: dict[int, dict[str, Any]] = {}
    for path in storage.list(layout.SINK + "/"):
        if path.startswith(layout.MANIFESTS + "/"):
            continue
        batch = int(path.split("/")[1])
        partition = path.rsplit("/", 1)[-1].split("-")[1]
        entry = by_batch.setdefault(batch, {"batch": batch, "rows": [], "files": {}})
        entry["rows"].extend(json.loads(storage.read(path)))
        entry["files"][partition] = entry["files"].get(partition, 0) + 1
    for batch in sorted(by_batch):
        entry = by_batch[batch]
        out.append({"batch": batch, "rows": canonical_rows(entry["rows"]),
                    "deliveries": max(entry["files"].values())})
    return out


def build_outcome(result: Any, backend: str = "reference") -> dict[str, Any]:
    """Outcome of a reference run (``runner.RunResult``)."""
    sc, storage, obs = result.scenario, result.storage, result.observer
    store_ids = pipeline_store_ids(sc.operator.flatten())
    state, state_errors = retained_states(storage, store_ids, sc.state_partitions,
                                          sc.engine.min_batches_to_retain)
    batches = [{"id": b, "start_offsets": rec["start_offsets"], "end_offsets": rec["end_offsets"],
                "watermark_ms": rec.get("watermark_ms"), "attempts": rec["attempts"]}
               for b, rec in sorted(obs.batches.items()) if "end_offsets" in rec]
    sink = read_sink(storage, sc.sink_mode)
    for entry in sink:
        entry["delivery_digests"] = list(obs.deliveries.get(entry["batch"], []))
    return {
        "scenario": sc.name,
        "backend": backend,
        "seed": sc.seed,
        "batches": batches,
        "state": state,
        "sink": sink,
        "recoveries": obs.recoveries,
        "progress": obs.progress,
        "checkpoint_files": storage.list(),
        "error": result.error,
        "state_errors": state_errors,
    }
