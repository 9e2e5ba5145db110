"""A redelivering source with deterministic offsets (issue 17 part 2).

The Pub/Sub connector of the Lightspeed posts: the broker "can redeliver
messages after they have been ACKed", so the connector decouples fetching from
the micro-batch, "handles any deduplication and creates its own deterministic
offsets". This module is that layer, in one place for every backend.

The broker (seeded, ``scenario.Broker``) is a delivery timeline: each message
is first delivered at its publish time plus up to ``reorder_ms`` (so out of
order), to one of two subscribers of one subscription; some are delivered
again ``redeliver_after_ms`` later, after their batch was committed and ACKed,
and then possibly to the other subscriber (its ACK covers the first one's
message: the subscription, not the subscriber, holds the ACK). The broker
never replays by position: a fetcher can only pull what is delivered after
what it has already pulled.

The fetch layer (``FetchLayer``) runs inside the driver's ``plan`` step:
it pulls every delivery up to the time of the batch's cut, drops message ids
it has already given an offset (the dedup set), and gives the new ones the
next offsets in delivery order (ties by message id). It then writes its whole
state to ``sources/<sp>/<b>`` before ``offset_log_write`` of the batch: how
far it has pulled and the ledger (offset -> message id) from which both the
dedup set and the records of every offset are rebuilt. A restarted query
resumes from the file of the latest batch in the offset log, so a crash
between the fetch and the offset-log write leaves an orphan file that the
re-planned batch overwrites; a re-run batch reads its records through the
persisted ledger.

Because deliveries are pulled in time order and a message's first delivery
precedes its redeliveries, the ledger is the messages in order of first
delivery, whenever the cuts fall: ``canonical_records`` is that sequence,
and ``SourceData`` serves it to every planning rule (``arrived_by``,
``planned_end_offsets``) unchanged. The model's simplifications: a message's
body is a function of its id (a real connector persists the bodies it
fetched), the ledger is kept whole (Spark would compact it), and the ACK of
``source_commit`` changes no delivery (the redeliveries are in the timeline
already, which is the worst case the ACKs allow).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Sequence

from . import layout
from ..language.scenario import Broker
from .storage import CheckpointFormatError, Storage

SUBSCRIBERS = 2
FETCH_VERSION = 1


@dataclass(frozen=True)
class Message:
    id: int
    key: str
    value: int
    publish_ms: int      # its event time


@dataclass(frozen=True)
class Delivery:
    ms: int
    message_id: int
    subscriber: int
    redelivery: bool


def broker_timeline(broker: Broker, keys: int, seed: int, side: str) -> tuple[list[Message], list[Delivery]]:
    """The broker's messages (by id) and every delivery, in time order (ties: message id, first before again)."""
    rng = random.Random(f"{seed}/{side}/redelivering")
    messages, deliveries = [], []
    for i in range(broker.messages):
        publish = i * broker.interval_ms
        messages.append(Message(i, f"k{rng.randrange(keys)}", rng.randint(1, 9), publish))
        first = publish + rng.randint(0, broker.reorder_ms)
        subscriber = rng.randrange(SUBSCRIBERS)
        deliveries.append(Delivery(first, i, subscriber, False))
        redelivered, crossed = rng.random() < broker.redelivery_rate, rng.random() < broker.ack_coverage
        if redelivered:
            to = (subscriber + 1) % SUBSCRIBERS if crossed else subscriber
            deliveries.append(Delivery(first + broker.redeliver_after_ms, i, to, True))
    deliveries.sort(key=lambda d: (d.ms, d.message_id, d.redelivery))
    return messages, deliveries


def first_deliveries(deliveries: Sequence[Delivery]) -> list[Delivery]:
    """Each message's first delivery, in delivery order: the order a correct fetch layer gives offsets in."""
    seen: set[int] = set()
    out = []
    for d in deliveries:
        if d.message_id not in seen:
            seen.add(d.message_id)
            out.append(d)
    return out


@dataclass
class FetchState:
    """What the fetch layer knows: deliveries up to ``through_ms`` are pulled; ``ledger[o]`` is offset o's id."""

    through_ms: int = -1
    ledger: tuple[int, ...] = ()


def sources_path(source_partition: int, batch: int) -> str:
    return f"{layout.SOURCES}/{source_partition}/{batch}"


class FetchLayer:
    """Fetch, dedup, assign offsets, persist: the one implementation every backend's driver calls.

    Subclasses plant mistakes in tests (never in a shipped path): offsets without dedup, or a persisted state
    that leaves the dedup set out.
    """

    def __init__(self, source_partition: int, deliveries: Sequence[Delivery]):
        self.sp, self.deliveries = source_partition, list(deliveries)
        self.state = FetchState()

    def fetch(self, through_ms: int) -> None:
        """Pull every delivery after the last pull and at or before ``through_ms``; give new ids offsets."""
        state = self.state
        if through_ms <= state.through_ms:
            return
        seen = self.dedup_set()
        fresh = []
        for d in self.deliveries:
            if state.through_ms < d.ms <= through_ms and self.is_new(d.message_id, seen):
                seen.add(d.message_id)
                fresh.append(d.message_id)
        self.state = FetchState(through_ms, state.ledger + tuple(fresh))

    def dedup_set(self) -> set[int]:
        return set(self.state.ledger)

    def is_new(self, message_id: int, seen: set[int]) -> bool:
        return message_id not in seen

    def ids(self, start: int, end: int) -> tuple[int, ...]:
        """The message ids behind offsets [start, end) (a planted mistake may have offsets it cannot name)."""
        if not 0 <= start <= end <= len(self.state.ledger):
            raise CheckpointFormatError(f"{layout.SOURCES}/{self.sp}: offsets [{start}, {end}) are not all "
                                        f"assigned (ledger holds {len(self.state.ledger)})")
        return self.state.ledger[start:end]

    # ------------------------------------------------------ checkpoint
    def encode(self, batch: int) -> bytes:
        body = {"version": FETCH_VERSION, "batch": batch, "through_ms": self.state.through_ms,
                "ledger": list(self.state.ledger)}
        return json.dumps(body, sort_keys=True).encode()

    def decode(self, raw: bytes, path: str) -> FetchState:
        try:
            body = json.loads(raw)
            if body["version"] != FETCH_VERSION:
                raise CheckpointFormatError(f"{path}: fetch state version {body['version']!r}, "
                                            f"expected {FETCH_VERSION}")
            return FetchState(int(body["through_ms"]), tuple(int(x) for x in body["ledger"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise CheckpointFormatError(f"{path}: unreadable fetch state ({exc})") from None

    def persist(self, storage: Storage, batch: int) -> None:
        """Written in ``plan``, before the batch's offset log entry (overwrites an orphan of a crashed plan)."""
        storage.write(sources_path(self.sp, batch), self.encode(batch), overwrite=True)

    def restore(self, storage: Storage, latest_logged: int | None) -> None:
        """Resume from the fetch state of the latest batch in the offset log (a newer file is an orphan)."""
        if latest_logged is None:
            self.state = FetchState()
            return
        path = sources_path(self.sp, latest_logged)
        if not storage.exists(path):
            raise CheckpointFormatError(f"{path}: missing; the fetch state of offset log entry {latest_logged} "
                                        "is what a restart resumes from")
        self.state = self.decode(storage.read(path), path)
