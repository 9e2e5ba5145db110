"""Durable state store on RocksDB with changelog checkpointing (spec sections 2, 3, 5, 6).

What it holds: ``RocksDBStateStore`` (``rocksdb_store.py``), the façade the
Spark engine uses per (operator, partition), composed of one module per
concept: ``transaction.py`` (a batch's uncommitted changes), ``commit.py``
(seal / write / mark_durable), ``lineage.py`` (versions and their
invariants), ``snapshots.py`` (taking and uploading snapshots), ``cleanup.py``
(retention), ``version_loader.py`` (load, and the SPARK-21696 fallback) and
``local_db.py`` (the disposable local RocksDB directory). Below them:
``changelog_codec.py`` (the binary changelog format), ``sst_files.py``
(SST-sharing snapshot manifests), ``manifest_index.py`` (which SSTs each
manifest references), ``checkpoint_fs.py`` (checkpoint-directory access),
``memory.py`` (the shared memory bound) and ``maintenance.py`` (the
background pool).

What it may import: ``reference`` (the layout, the changelog format, the
``Storage`` interface and its errors), the standard library and rocksdict. It
never imports ``spark_impl.engine``, ``spark_impl.native``,
``spark_impl.snapshot_reader``, ``sim``, ``experiments`` or pyspark: the
store runs, and is tested, without a SparkSession.
"""

from .commit import ChangeList, Sealed
from .maintenance import MaintenancePool, default_pool
from .memory import MemoryBudget, MemoryUsage, memory_usage, shared_memory
from .rocksdb_store import PROVIDERS, RocksDBStateStore, read_snapshot_records
from .version_loader import LoadReport

__all__ = [
    "PROVIDERS", "ChangeList", "LoadReport", "MaintenancePool", "MemoryBudget", "MemoryUsage", "RocksDBStateStore",
    "Sealed", "default_pool", "memory_usage", "read_snapshot_records", "shared_memory",
]
