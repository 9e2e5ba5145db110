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
from typing import Any

from . import layout
from .query import pipeline_store_ids
from .retained import retained_states
from .storage import Storage

OUTCOME_FIELDS = ("scenario", "backend", "seed", "batches", "state", "sink", "recoveries", "progress",
                  "checkpoint_files", "error", "state_errors")


def dumps(outcome: dict[str, Any]) -> str:
    return json.dumps(outcome, sort_keys=True, indent=1) + "\n"


def digest_rows(rows: list[Any]) -> str:
    return hashlib.sha256(json.dumps(sorted(rows, key=json.dumps)).encode()).hexdigest()[:16]


def read_sink(storage: Storage, sink_mode: str) -> list[dict[str, Any]]:
    """The visible output: committed manifests (exactly-once) or every part file (at-least-once)."""
    out = []
    if sink_mode == "exactly_once":
        for path in storage.list(layout.MANIFESTS + "/"):
            manifest = json.loads(storage.read(path))
            rows = [row for f in manifest["files"] for row in json.loads(storage.read(f))]
            out.append({"batch": manifest["batch"], "rows": sorted(rows, key=json.dumps),
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
        out.append({"batch": batch, "rows": sorted(entry["rows"], key=json.dumps),
                    "deliveries": max(entry["files"].values())})
    return out


def build_outcome(result: Any, backend: str = "reference") -> dict[str, Any]:
    """Outcome of a reference run (``runner.RunResult``)."""
    sc, storage, obs = result.scenario, result.storage, result.observer
    store_ids = pipeline_store_ids(sc.operator.flatten())
    state, state_errors = retained_states(storage, store_ids, sc.state_partitions)
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
