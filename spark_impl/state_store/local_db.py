"""The store's disposable local directory: its RocksDB instances and their checkpoints.

The local half of spec section 2's ``changelog`` / ``snapshot`` providers, the
part of Spark's ``RocksDB.scala`` that owns the working directory (``workingDir``,
``checkpointDir``): one RocksDB instance at a time, WAL off, on the process's
shared memory budget (``memory.py``), and immutable RocksDB checkpoints (hard
links) that maintenance uploads later. Nothing here is needed for recovery
(spec section 3 puts everything durable in the checkpoint directory): a crash
may delete this directory at any moment.

Each load builds its instance in a new sub-directory, so the files of an
abandoned instance are never reused (SPARK-45419, SPARK-51717). The
workspace itself is a private directory made by ``tempfile.mkdtemp`` (mode
0700, a name no one can predict), in the system's temporary directory unless
the caller names a root, and is removed on close: a fixed, shared path could
be made in advance by another user, or be a link.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import rocksdict

from .changelog_codec import replay_chunks
from .checkpoint_fs import StoreId
from .memory import SharedRocksMemory
from .sst_files import LocalCheckpoint


@dataclass
class LocalDB:
    """One local RocksDB instance and the content-hash memo of its SST files."""

    directory: Path
    db: Any
    hash_cache: dict[tuple[str, int], str] = field(default_factory=dict)

    def is_unwritten(self) -> bool:
        """Nothing was ever written to it nor restored into it: as empty as a new instance."""
        return self.db.latest_sequence_number() == 0 and not self.hash_cache

    def dispose(self) -> None:
        """Close the DB and delete its directory (it is never opened again)."""
        self.db.close()
        del self.db
        shutil.rmtree(self.directory, ignore_errors=True)


def unlogged_write_options() -> rocksdict.WriteOptions:
    """Write options with the WAL off: the changelog in the checkpoint is the log."""
    options = rocksdict.WriteOptions()
    # rocksdict's stub declares ``disable_wal`` a method; at run time it is a property.
    options.disable_wal = True  # type: ignore[method-assign,assignment]
    return options


class LocalWorkspace:
    """The local working directory of one store and the instance currently open in it."""

    def __init__(self, store: StoreId, root: Path | None, memory: SharedRocksMemory):
        """A new private directory (``mkdtemp``) under ``root`` (made if missing; None: the system's
        temporary directory)."""
        self.store = store
        self.memory = memory
        if root is not None:
            root.mkdir(parents=True, exist_ok=True)
        self.directory = Path(tempfile.mkdtemp(prefix=f"lightspeed-rocksdb-{store.op}-{store.partition}-",
                                               dir=root))
        self.checkpoint_dir = self.directory / "checkpoints"
        self.checkpoint_dir.mkdir()
        self.write_options = unlogged_write_options()
        self.current: LocalDB | None = None

    @property
    def db(self) -> Any:
        """The open DB; an error naming the store when it is closed or its last load failed."""
        current = self.current
        if current is None:
            raise RuntimeError(f"state store {self.store} is closed or failed to load")
        return current.db

    def new_instance_directory(self) -> Path:
        return self.directory / f"db-{uuid.uuid4().hex[:12]}"

    def open_db(self, directory: Path) -> Any:
        """A RocksDB in ``directory`` (created if absent) on the shared memory budget."""
        directory.mkdir(parents=True, exist_ok=True)
        db = rocksdict.Rdict(str(directory), self.memory.db_options())
        db.set_write_options(self.write_options)
        return db

    def open_empty(self) -> LocalDB:
        """A new, empty instance in a new directory."""
        directory = self.new_instance_directory()
        try:
            return LocalDB(directory, self.open_db(directory))
        except BaseException:
            shutil.rmtree(directory, ignore_errors=True)
            raise

    def open_read_only(self, directory: str) -> Any:
        return rocksdict.Rdict(directory, self.memory.db_options(), access_type=rocksdict.AccessType.read_only())

    def replay_into(self, db: Any, data: bytes, path: str) -> int:
        """Apply one verified state file to ``db`` in ``WriteBatch`` chunks; returns its record count."""
        batch = None

        def new_batch() -> tuple[Any, Any]:
            nonlocal batch
            batch = rocksdict.WriteBatch(raw_mode=True)
            return batch.put, batch.delete

        count = 0
        write, options = db.write, self.write_options
        for _header, count in replay_chunks(data, path, new_batch):
            write(batch, options)
        return count

    def checkpoint(self, version: int, uid: str, parent_uid: str, compact: bool) -> LocalCheckpoint:
        """An immutable RocksDB checkpoint (hard links) of the open DB, as version ``version``."""
        db = self.db
        if compact:
            db.compact_range(None, None)
        path = self.checkpoint_dir / f"{version}_{uid}-{uuid.uuid4().hex[:8]}"
        rocksdict.Checkpoint(db).create_checkpoint(str(path))
        assert self.current is not None
        return LocalCheckpoint(str(path), version, uid, parent_uid, self.current.hash_cache)

    def detach_unwritten(self) -> LocalDB | None:
        """Take the current instance off: returned if nothing was ever written to it, else disposed."""
        current, self.current = self.current, None
        if current is None:
            return None
        if current.is_unwritten():
            return current
        current.dispose()
        return None

    def close(self) -> None:
        """Close the open instance and delete the whole local directory."""
        current, self.current = self.current, None
        if current is not None:
            current.dispose()
        shutil.rmtree(self.directory, ignore_errors=True)

    def abandon(self) -> None:
        """Process death: no flush, no waiting for background work; the local directory is gone."""
        current, self.current = self.current, None
        if current is not None:
            current.db.cancel_all_background(False)
            del current
        shutil.rmtree(self.directory, ignore_errors=True)
