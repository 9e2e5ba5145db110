"""Comparing two outcomes of one scenario: what every backend must agree on (``lightspeed diff``).

Two backends agree when they committed the same batches with the same
boundaries and watermarks, hold the same state in every version both still
retain (and each store's newest version), and show the same sink output.
What legitimately differs is left out: delivery counts and digests, attempts,
timing, which versions older than the retention window survive (that depends
on when a purge ran), and under an at-least-once sink how many duplicates a
re-run left (the oracles bound those).
"""

from __future__ import annotations

import json
from typing import Any

from ..protocol.outcome import Outcome

COMPARED = ("batches", "state", "sink")


def first_difference(a: Outcome, b: Outcome, sink_mode: str = "exactly_once") -> str | None:
    """The first place two outcomes disagree, as ``path: value against value``; None when they agree."""
    for key in COMPARED:
        left, right = _comparable(key, a, sink_mode), _comparable(key, b, sink_mode)
        if key == "state":
            left, right = _common_versions(left, right), _common_versions(right, left)  # both from the originals
        found = _first_difference(left, right, key)
        if found:
            return found
    return None


def _comparable(key: str, outcome: Outcome, sink_mode: str) -> Any:
    if key == "batches":
        return [{"id": b.id, "start_offsets": list(b.start_offsets or ()), "end_offsets": list(b.end_offsets),
                 "watermark_ms": b.watermark_ms} for b in outcome.batches]
    if key == "sink":
        if sink_mode == "at_least_once":
            return [{"batch": e.batch, "rows": sorted({json.dumps(r) for r in e.rows})} for e in outcome.sink]
        return [{"batch": e.batch, "rows": list(e.rows)} for e in outcome.sink]
    return outcome.state


def _common_versions(mine: dict[str, Any], theirs: dict[str, Any]) -> dict[str, Any]:
    """The versions of ``mine`` that ``theirs`` also holds, plus each store's newest version."""
    out: dict[str, Any] = {}
    for sid, parts in mine.items():
        for p, versions in parts.items():
            other = theirs.get(sid, {}).get(p, {})
            newest = max(versions, key=int, default=None)
            out.setdefault(sid, {})[p] = {v: pairs for v, pairs in versions.items() if v in other or v == newest}
    return out


def _first_difference(a: Any, b: Any, path: str) -> str | None:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b), key=str):
            if key not in a or key not in b:
                return f"{path}.{key}: present in only one ({'first' if key in a else 'second'})"
            found = _first_difference(a[key], b[key], f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b)):
            found = _first_difference(x, y, f"{path}[{i}]")
            if found:
                return found
        if len(a) != len(b):
            return f"{path}: {len(a)} items against {len(b)}"
        return None
    return None if a == b else f"{path}: {json.dumps(a)} against {json.dumps(b)}"
