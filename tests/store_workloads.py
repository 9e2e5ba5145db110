"""What the RocksDB state-store tests share: write patterns, a scratch directory, the snapshot readers."""

from __future__ import annotations

import os
import random
import tempfile
from pathlib import Path
from typing import Any


from experiments.store_bug_sequences import apply as apply_writes  # noqa: F401  (one definition, shared with the zoo)
from reference.protocol.storage import SnapshotReader


def random_changes(store: Any, rng: random.Random, *, max_ops: int, key_space: int) -> None:
    """Between 5 and ``max_ops`` random puts (70%), deletes (25%) and range deletes (5%)."""
    for _ in range(rng.randint(5, max_ops)):
        key = f"k{rng.randint(0, key_space):03d}"
        roll = rng.random()
        if roll < 0.7:
            store.put(key, {"n": rng.randint(0, 9), "s": "é" * rng.randint(0, 2)})
        elif roll < 0.95:
            store.delete(key)
        else:
            store.delete_range(key, f"k{rng.randint(0, key_space):03d}")


def scratch_directory(prefix: str) -> Path:
    """A fresh temporary directory, in memory (``/dev/shm``) where the machine has it.

    The state machines open and drop thousands of RocksDB instances; on a busy
    shared disk each costs ~100 ms, in tmpfs ~3 ms. What they check is the
    store's logic, not the disk's durability, so either place is valid.
    """
    in_memory = Path("/dev/shm")
    parent = in_memory if in_memory.is_dir() and os.access(in_memory, os.W_OK) else None
    return Path(tempfile.mkdtemp(prefix=prefix, dir=parent))


def manifest_snapshot_readers() -> tuple[SnapshotReader, ...]:
    """What a storage must carry for reference code to decode this store's snapshot manifests.

    The reader is the Spark backend's (``spark_impl.snapshot_reader``); nothing registers it process-wide.
    """
    from spark_impl.snapshot_reader import read_manifest_snapshot
    return (read_manifest_snapshot,)
