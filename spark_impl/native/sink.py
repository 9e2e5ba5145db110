"""The adapter's sink, written by foreachBatch: exactly-once by batch id, or at-least-once.

Exactly-once: batch b's rows go to a temporary file that is renamed to
``sink/<b>.json``, so a re-run batch replaces its output and never duplicates
it. At-least-once: every delivery is its own visible file, ``sink/<b>-<n>.json``.
Each delivery is recorded with its digest and the wall time it became visible.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from typing import Any, Callable

from reference.protocol.outcome import SinkEntry, canonical_rows, digest_rows


@dataclass(frozen=True)
class Delivery:
    """One visible delivery of a batch's output."""

    digest: str
    seen_s: float


class FileSink:
    """The sink directory of one run and every delivery made to it."""

    def __init__(self, directory: str, exactly_once: bool):
        self.dir, self.exactly_once = directory, exactly_once
        os.makedirs(directory, exist_ok=True)
        self.deliveries: dict[int, list[Delivery]] = {}

    def deliver(self, b: int, rows: list[Any], attempt: int, written: Callable[[], None]) -> None:
        """Make batch ``b``'s rows visible; ``written`` runs once the part file is written (before the
        exactly-once commit, after an at-least-once file became visible)."""
        payload = json.dumps(rows)
        if self.exactly_once:
            tmp = os.path.join(self.dir, f".{b}.json.tmp")
            with open(tmp, "w") as fh:
                fh.write(payload)
            written()
            os.replace(tmp, os.path.join(self.dir, f"{b}.json"))  # the idempotent commit by batch id
            self._delivered(b, rows)
            return
        # at-least-once: every attempt's output is visible as soon as it is written
        with open(os.path.join(self.dir, f"{b}-{attempt}.json"), "w") as fh:
            fh.write(payload)
        self._delivered(b, rows)
        written()

    def _delivered(self, b: int, rows: list[Any]) -> None:
        self.deliveries.setdefault(b, []).append(Delivery(digest_rows(rows), time.time()))

    def entries(self) -> tuple[SinkEntry, ...]:
        """What the sink shows for each delivered batch, with its delivery count and digests."""
        out = []
        for b in sorted(self.deliveries):
            rows = self._rows(b)
            if rows is None:
                continue
            sent = self.deliveries[b]
            out.append(SinkEntry(b, tuple(canonical_rows(rows)), len(sent), tuple(d.digest for d in sent)))
        return tuple(out)

    def _rows(self, b: int) -> list[Any] | None:
        if self.exactly_once:
            path = os.path.join(self.dir, f"{b}.json")
            if not os.path.exists(path):
                return None
            with open(path) as fh:
                return list(json.load(fh))
        rows: list[Any] = []
        for name in sorted(os.listdir(self.dir)):
            if name.startswith(f"{b}-") and name.endswith(".json"):
                with open(os.path.join(self.dir, name)) as fh:
                    rows.extend(json.load(fh))
        return rows
