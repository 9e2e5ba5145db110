"""The durable storage service: the checkpoint filesystem with a latency per operation.

It owns the durable bytes (a ``reference.protocol.storage.DurableStorage`` in data mode,
so the checkpoint is byte-identical in format to the reference's) and the
latency model of spec section 3's checkpoint file manager: small-file writes,
atomic renames, listings, deletes and bandwidth-bound transfers. Each
operation's latency is drawn by ``reference.protocol.storage_profiles.LatencyDraws``,
the one draw function the Spark engine's checkpoint storage and native
Spark's checkpoint filesystem also use: the n-th operation of a kind on the
``"<seed>/driver"`` or ``"<seed>/executor"`` stream costs the same on all
three. A task step whose jitter was drawn beforehand (volume mode draws a
stage's factors at once, ``jitter_base``) passes one factor for the whole
step instead. Latency spikes (``storage_latency`` faults at a time) make every
operation that starts inside the spike wait for its end.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from reference.protocol.storage import DurableStorage
from reference.protocol.storage_profiles import LatencyDraws, StorageProfile

from .cost_model import store_commits_ms

STREAMS = ("driver", "executor")


class StorageService:
    """Structure: the bytes and the latency model. Behaviour: the costs steps are charged."""

    def __init__(self, profile: StorageProfile, seed: int | str = 0, files: DurableStorage | None = None):
        self.profile = profile
        self.draws = {stream: LatencyDraws(profile, f"{seed}/{stream}") for stream in STREAMS}
        self.files = files if files is not None else DurableStorage()
        self.spikes: list[tuple[float, float]] = []  # (start_ms, end_ms) of latency spikes
        # bytes of state (changelogs, deltas, snapshots) the costs were charged for: the modelled state size,
        # which a data-mode run whose keys stand for blocks of keys does not hold in its (small) real files
        self.state_bytes_charged = 0.0

    def add_spike(self, start_ms: float, duration_ms: float) -> None:
        assert duration_ms >= 0, "a latency spike lasts a non-negative time"
        self.spikes.append((start_ms, start_ms + duration_ms))

    def spike_wait_ms(self, now_ms: float) -> float:
        """How long an operation starting now waits for running latency spikes to end."""
        return max((end - now_ms for start, end in self.spikes if start <= now_ms < end), default=0.0)

    # ------------------------------------------------------------- costs
    def transfer_ms(self, size_bytes: float) -> float:
        return self.profile.transfer_ms(size_bytes)

    def atomic_write_ms(self, size_bytes: float, jitter: float | None = None, stream: str = "driver") -> float:
        """Write to a temporary name, then rename (HDFS-style atomic create): a ``create`` and a ``rename``
        drawn on ``stream``, or, with ``jitter`` (a factor drawn by the caller), the base costs times it."""
        p = self.profile
        if jitter is not None:
            return (p.small_write_ms + p.rename_ms + self.transfer_ms(size_bytes)) * jitter
        return self.draws[stream].write_ms(int(size_bytes))

    def state_writes_ms(self, sizes_bytes: Sequence[float], parallel: bool, jitter: float | None = None) -> float:
        """One state file per store of a task (``store_files_ms``), counted in ``state_bytes_charged``."""
        return self.store_files_ms([[size] for size in sizes_bytes], parallel, jitter)

    def store_files_ms(self, files_bytes: Sequence[Sequence[float]], parallel: bool,
                       jitter: float | None = None) -> float:
        """A partition's state commit, each store writing its files (``Profile.commit_files_bytes``), counted in
        ``state_bytes_charged``."""
        self.state_bytes_charged += sum(sum(files) for files in files_bytes)
        return self._commits_ms(files_bytes, parallel, jitter)

    def store_writes_ms(self, sizes_bytes: Sequence[float], parallel: bool, jitter: float | None = None) -> float:
        """A partition's state files, one per store, each an atomic write on the executor stream (not counted)."""
        return self._commits_ms([[size] for size in sizes_bytes], parallel, jitter)

    def _commits_ms(self, files_bytes: Sequence[Sequence[float]], parallel: bool, jitter: float | None) -> float:
        """Each store's files one after the other, the stores in turn or in parallel (``store_commits_ms``);
        ``jitter``: one factor for every file of the step."""
        return store_commits_ms([sum(self.atomic_write_ms(size, jitter, "executor") for size in files)
                                 for files in files_bytes], parallel)

    def read_ms(self, size_bytes: float, jitter: float | None = None, stream: str = "executor") -> float:
        if jitter is not None:
            return (self.profile.read_ms + self.transfer_ms(size_bytes)) * jitter
        return self.draws[stream].read_ms(int(size_bytes))

    def jitter_base(self, generator: np.random.Generator) -> int | None:
        """The one draw from ``generator`` that fixes a stage step's jitter factors (None: no jitter): factor ``i``
        is the shared draw function over the key ``stage/<base>/<i>`` (``stage_jitter.stage_jitter``)."""
        if self.profile.jitter_sigma <= 0:
            return None
        return int(generator.integers(0, 2 ** 62))

    def list_ms(self, listings: int = 1, stream: str = "driver") -> float:
        return sum(self.draws[stream].list_ms() for _ in range(listings))

    def delete_ms(self, files: int, stream: str = "driver") -> float:
        return sum(self.draws[stream].delete_ms() for _ in range(files))
