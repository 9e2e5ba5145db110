"""Bounded RocksDB memory shared by every state store in one process.

Implements the memory part of the state-store contract (spec section 2,
``state_store.provider = changelog``; Spark's
``spark.sql.streaming.stateStore.rocksdb.boundedMemoryUsage``): every
``RocksDBStateStore`` of a process opens its database with the *same* block
cache and the *same* ``WriteBufferManager``, so memory does not grow with the
number of (operator, partition) stores an executor hosts.

The configured total is split in two disjoint budgets, so the gauge
(block cache usage + write buffer usage) is bounded by their sum:

- the block cache (data, index and filter blocks; ``cache_index_and_filter_blocks``
  is on so table readers are charged to it) gets
  ``total_bytes * (1 - write_buffer_fraction)``;
- the write buffer manager (all memtables of all stores) gets the rest and
  stalls writers rather than exceed it (``allow_stall``).

Memtables are deliberately *not* charged to the block cache
(``new_write_buffer_manager_with_cache``): that would count them twice in the
gauge.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import rocksdict

MIB = 1 << 20
DEFAULT_TOTAL_MEMORY_BYTES = 256 * MIB
DEFAULT_WRITE_BUFFER_FRACTION = 0.5
DEFAULT_PER_DB_WRITE_BUFFER_BYTES = 4 * MIB
MIN_TOTAL_MEMORY_BYTES = 8 * MIB


@dataclass(frozen=True)
class MemoryBudget:
    """The per-process memory bound of all RocksDB state stores."""

    total_bytes: int = DEFAULT_TOTAL_MEMORY_BYTES
    write_buffer_fraction: float = DEFAULT_WRITE_BUFFER_FRACTION
    per_db_write_buffer_bytes: int = DEFAULT_PER_DB_WRITE_BUFFER_BYTES

    def __post_init__(self) -> None:
        if self.total_bytes < MIN_TOTAL_MEMORY_BYTES:
            raise ValueError(f"total_bytes {self.total_bytes} below the minimum {MIN_TOTAL_MEMORY_BYTES}")
        if not 0.05 <= self.write_buffer_fraction <= 0.95:
            raise ValueError(f"write_buffer_fraction {self.write_buffer_fraction} outside [0.05, 0.95]")

    @property
    def write_buffer_bytes(self) -> int:
        return int(self.total_bytes * self.write_buffer_fraction)

    @property
    def block_cache_bytes(self) -> int:
        return self.total_bytes - self.write_buffer_bytes


@dataclass(frozen=True)
class MemoryUsage:
    """One reading of the per-process gauge."""

    block_cache_bytes: int
    write_buffer_bytes: int
    bound_bytes: int

    @property
    def total_bytes(self) -> int:
        return self.block_cache_bytes + self.write_buffer_bytes


class SharedRocksMemory:
    """The one block cache and one write buffer manager of this process."""

    def __init__(self, budget: MemoryBudget):
        self.budget = budget
        self.cache = rocksdict.Cache(budget.block_cache_bytes)
        self.write_buffer_manager = rocksdict.WriteBufferManager(budget.write_buffer_bytes, True)

    def resize(self, budget: MemoryBudget) -> None:
        """Apply a new budget to the shared objects (stores keep using them)."""
        self.cache.set_capacity(budget.block_cache_bytes)
        self.write_buffer_manager.set_buffer_size(budget.write_buffer_bytes)
        self.budget = budget

    def usage(self) -> MemoryUsage:
        return MemoryUsage(self.cache.get_usage(), self.write_buffer_manager.get_usage(),
                           self.budget.total_bytes)

    def db_options(self) -> rocksdict.Options:
        """Options for one store's database: raw bytes, shared cache and write buffers."""
        options = rocksdict.Options(raw_mode=True)
        options.create_if_missing(True)
        options.set_write_buffer_manager(self.write_buffer_manager)
        options.set_write_buffer_size(self.budget.per_db_write_buffer_bytes)
        options.set_max_write_buffer_number(2)
        options.set_arena_block_size(max(self.budget.per_db_write_buffer_bytes // 8, 64 * 1024))
        table = rocksdict.BlockBasedOptions()
        table.set_block_cache(self.cache)
        table.set_cache_index_and_filter_blocks(True)
        table.set_pin_l0_filter_and_index_blocks_in_cache(False)
        table.set_bloom_filter(10, False)
        options.set_block_based_table_factory(table)
        options.set_max_open_files(256)
        options.set_keep_log_file_num(2)
        return options


_lock = threading.Lock()
_shared: SharedRocksMemory | None = None


def shared_memory(budget: MemoryBudget | None = None) -> SharedRocksMemory:
    """The process-wide memory object; a different ``budget`` resizes it in place."""
    global _shared
    with _lock:
        if _shared is None:
            _shared = SharedRocksMemory(budget or MemoryBudget())
        elif budget is not None and budget != _shared.budget:
            _shared.resize(budget)
        return _shared


def memory_usage() -> MemoryUsage:
    """The per-process gauge: block cache usage + write buffer usage, and the bound."""
    return shared_memory().usage()
