"""Durable state store on RocksDB with changelog checkpointing (SPEC sections 2, 3, 5, 6).

See ``rocksdb_store.py`` for the design; ``sst_files.py`` for snapshots,
``changelog_codec.py`` for the binary format, ``memory.py`` for the shared
memory bound, ``maintenance.py`` for the background pool and
``checkpoint_fs.py`` for the checkpoint-directory access.
"""

from .maintenance import MaintenancePool, default_pool
from .memory import MemoryBudget, MemoryUsage, memory_usage, shared_memory
from .rocksdb_store import PROVIDERS, ChangeList, LoadReport, RocksDBStateStore, Sealed, read_snapshot_records

__all__ = [
    "PROVIDERS", "ChangeList", "LoadReport", "MaintenancePool", "MemoryBudget", "MemoryUsage", "RocksDBStateStore",
    "Sealed", "default_pool", "memory_usage", "read_snapshot_records", "shared_memory",
]
