"""The durable storage service: the checkpoint filesystem with a latency per operation.

It owns the durable bytes (a ``reference.storage.DurableStorage`` in data mode,
so the checkpoint is byte-identical in format to the reference's) and the
latency model of SPEC section 3's checkpoint file manager: small-file writes,
atomic renames, listings, deletes and bandwidth-bound transfers, each with a
seeded log-normal jitter. Latency spikes (``storage_latency`` faults at a time)
make every operation that starts inside the spike wait for its end.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from reference.storage import DurableStorage

from reference.storage_profiles import StorageProfile

from .cost_model import store_commits_ms
from .random_draws import Draws


class StorageService:
    """Structure: the bytes and the latency model. Behaviour: the costs steps are charged."""

    def __init__(self, profile: StorageProfile, rng: Draws | np.random.Generator,
                 files: DurableStorage | None = None):
        self.profile = profile
        self.rng = rng if isinstance(rng, Draws) else Draws(rng)
        self.files = files if files is not None else DurableStorage()
        self.spikes: list[tuple[float, float]] = []  # (start_ms, end_ms) of latency spikes
        # bytes of state (changelogs, deltas, snapshots) the costs were charged for: the modelled state size,
        # which a data-mode run whose keys stand for blocks of keys does not hold in its (small) real files
        self.state_bytes_charged = 0.0

    def _jitter(self) -> float:
        sigma = self.profile.jitter_sigma
        return self.rng.lognormal(0.0, sigma) if sigma > 0 else 1.0

    def add_spike(self, start_ms: float, duration_ms: float) -> None:
        assert duration_ms >= 0, "a latency spike lasts a non-negative time"
        self.spikes.append((start_ms, start_ms + duration_ms))

    def spike_wait_ms(self, now_ms: float) -> float:
        """How long an operation starting now waits for running latency spikes to end."""
        return max((end - now_ms for start, end in self.spikes if start <= now_ms < end), default=0.0)

    # ------------------------------------------------------------- costs
    def transfer_ms(self, size_bytes: float) -> float:
        return self.profile.transfer_ms(size_bytes)

    def atomic_write_ms(self, size_bytes: float, jitter: float | None = None) -> float:
        """Write to a temporary name, then rename (HDFS-style atomic create).

        ``jitter``: a jitter factor drawn by the caller (else one is drawn here).
        """
        p = self.profile
        factor = self._jitter() if jitter is None else jitter
        return (p.small_write_ms + p.rename_ms + self.transfer_ms(size_bytes)) * factor

    def state_writes_ms(self, sizes_bytes: Sequence[float], parallel: bool, jitter: float | None = None) -> float:
        """State files written by a task's stores (``store_writes_ms``), counted in ``state_bytes_charged``."""
        self.state_bytes_charged += sum(sizes_bytes)
        return self.store_writes_ms(sizes_bytes, parallel, jitter)

    def store_writes_ms(self, sizes_bytes: Sequence[float], parallel: bool, jitter: float | None = None) -> float:
        """A partition's state files, one per store, each an atomic write: one after the other or in
        parallel (``store_commits_ms``); the step draws one jitter factor for all of them."""
        factor = self._jitter() if jitter is None else jitter
        return store_commits_ms([self.atomic_write_ms(size, factor) for size in sizes_bytes], parallel)

    def read_ms(self, size_bytes: float, jitter: float | None = None) -> float:
        factor = self._jitter() if jitter is None else jitter
        return (self.profile.read_ms + self.transfer_ms(size_bytes)) * factor

    def jitter_factors(self, generator: np.random.Generator, count: int) -> list[float]:
        """``count`` jitter factors drawn at once from ``generator`` (the same distribution as ``_jitter``)."""
        sigma = self.profile.jitter_sigma
        if sigma <= 0:
            return [1.0] * count
        return generator.lognormal(0.0, sigma, count).tolist()

    def list_ms(self, listings: int = 1) -> float:
        return listings * self.profile.list_ms * self._jitter()

    def delete_ms(self, files: int) -> float:
        return files * self.profile.delete_ms * self._jitter() if files else 0.0
