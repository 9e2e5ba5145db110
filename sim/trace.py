"""The trace of a simulated run: (time, component, action) events, saved as JSON lines.

Every component reports what it does to one ``Trace``; the trace is part of the
determinism contract (same scenario and seed, byte-identical trace).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterator


@dataclass(frozen=True)
class TraceEvent:
    time_ms: float
    component: str
    action: str
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"time_ms": round(self.time_ms, 6), "component": self.component, "action": self.action,
                "detail": self.detail}


class Trace:
    """An append-only event log; ``enabled=False`` keeps only a count (for cluster-scale runs)."""

    def __init__(self, enabled: bool = True):
        self.enabled = enabled
        self.events: list[TraceEvent] = []
        self.count = 0

    def record(self, time_ms: float, component: str, action: str, detail: str = "") -> None:
        self.count += 1
        if self.enabled:
            self.events.append(TraceEvent(time_ms, component, action, detail))

    def __iter__(self) -> Iterator[TraceEvent]:
        return iter(self.events)

    def dumps(self) -> str:
        """Canonical JSON lines, one event per line."""
        return "".join(json.dumps(e.to_dict(), sort_keys=True) + "\n" for e in self.events)

    def save(self, path: str) -> None:
        with open(path, "w") as fh:
            fh.write(self.dumps())


def load_trace(path: str) -> list[TraceEvent]:
    """Read a saved trace back for inspection."""
    out = []
    with open(path) as fh:
        for n, line in enumerate(fh, 1):
            try:
                raw = json.loads(line)
                out.append(TraceEvent(raw["time_ms"], raw["component"], raw["action"], raw.get("detail", "")))
            except (json.JSONDecodeError, KeyError) as exc:
                raise ValueError(f"{path}:{n}: not a trace event: {exc}") from None
    return out
