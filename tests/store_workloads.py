"""Write patterns shared by the RocksDB state-store tests."""

from __future__ import annotations

import random
from typing import Any


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


def apply_writes(store: Any, state: dict[str, Any], writes: dict[str, Any]) -> dict[str, Any]:
    """Apply ``writes`` (None = delete) to the store; returns ``state`` with the same writes applied."""
    expected = dict(state)
    for key, value in writes.items():
        if value is None:
            store.delete(key)
            expected.pop(key, None)
        else:
            store.put(key, value)
            expected[key] = value
    return expected
