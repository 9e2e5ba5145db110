"""What an outside observer saw, journaled beside the checkpoint so that it survives a SIGKILLed driver.

In process mode (``driver_process.py``) a driver crash kills the driver
process. The observer's history (batches, recoveries, progress, deliveries),
the engine's measurements (time 0, sink deliveries, task log) and the life
that last ran are written to ``journal.json`` in the work directory, outside
the checkpoint, after every driver step; the next driver process restores
them, so the outcome covers every life.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reference.protocol.observer import Observer
from reference.protocol.outcome import Outcome, ProgressEvent, Recovery

from .coordination import atomic_write
from ..latency import SinkDelivery

JOURNAL = "journal.json"


@dataclass
class Journaled:
    """One journal's content, read back."""

    observer: Observer
    t0: float
    deliveries: list[SinkDelivery]
    task_log: list[dict[str, Any]]
    life: int        # the incarnation that wrote the journal last


class Journal:
    """``journal.json`` in a work directory; written from several driver threads (async log writer, purger)."""

    def __init__(self, base: Path):
        self.path = base / JOURNAL
        self.lock = threading.Lock()

    def write(self, observer: Observer, t0: float, deliveries: list[SinkDelivery], task_log: list[dict[str, Any]],
              life: int) -> None:
        body = {"t0": t0, "life": life, "observer": _observer_json(observer),
                "deliveries": [d.to_json() for d in deliveries], "task_log": task_log}
        with self.lock:
            atomic_write(self.path, json.dumps(body))

    def read(self) -> Journaled | None:
        if not self.path.exists():
            return None
        body = json.loads(self.path.read_text())
        return Journaled(_observer(body["observer"]), float(body["t0"]),
                         [SinkDelivery.from_json(d) for d in body["deliveries"]], list(body["task_log"]),
                         int(body["life"]))


def _observer_json(observer: Observer) -> dict[str, Any]:
    return {"batches": {str(k): v for k, v in observer.batches.items()},
            "recoveries": [r.to_dict() for r in observer.recoveries],
            "progress": [p.to_dict() for p in observer.progress], "events": observer.events,
            "attempts": {str(k): v for k, v in observer.attempts.items()},
            "deliveries": {str(k): v for k, v in observer.deliveries.items()}}


def _observer(raw: dict[str, Any]) -> Observer:
    recoveries, progress = _typed_history(raw["recoveries"], raw["progress"])
    return Observer(batches={int(k): v for k, v in raw["batches"].items()}, recoveries=recoveries,
                    progress=progress, events=list(raw["events"]),
                    attempts={int(k): v for k, v in raw["attempts"].items()},
                    deliveries={int(k): v for k, v in raw["deliveries"].items()})


def _typed_history(recoveries: list[Any], progress: list[Any]) -> tuple[list[Recovery], list[ProgressEvent]]:
    """Recoveries and progress events back from their JSON, read (and checked) by the outcome's own reader."""
    shell = Outcome.from_dict({"scenario": "journal", "backend": "spark", "batches": [], "state": {}, "sink": [],
                               "recoveries": recoveries, "progress": progress})
    return list(shell.recoveries), list(shell.progress)
