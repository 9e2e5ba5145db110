"""One batch's uncommitted changes over the open RocksDB (spec section 2, ``task_apply``).

The ``get`` / ``put`` / ``remove`` / ``rollback`` part of Spark's ``RocksDB.scala``
(``RocksDBStateStoreProvider``'s ``StateStore`` methods call it). Every write
goes straight to the DB and is encoded at once as a changelog record into the
batch's ``ChangelogBuffer`` (last write wins, first-touch order), as Spark's
changelog writer streams records while the batch runs, so sealing the batch
costs no per-record work.

``abort`` uses an undo log, the value each key had when the batch first
touched it: undoing is O(keys touched in the batch), needs no checkpoint
access, and restores exactly the loaded or last committed version. (Reloading
the local checkpoint instead would cost O(state) and need a local checkpoint
per commit.) A range delete enumerates its keys, so every deleted key is in the
changelog (SPARK-55510).

The caller (``RocksDBStateStore``) holds the store's lock around every
mutation; reads take no lock.
"""

from __future__ import annotations

import json
from typing import Any

import rocksdict

from reference.protocol.changelog import encode_value

from .changelog_codec import ChangelogBuffer
from .local_db import LocalWorkspace


class Transaction:
    """The uncommitted changes of the current batch: written through, undoable, already changelog records."""

    def __init__(self, workspace: LocalWorkspace):
        self._workspace = workspace
        self.log = ChangelogBuffer()
        self._undo: dict[bytes, bytes | None] = {}

    def get(self, key: str) -> Any:
        raw = self._workspace.db.get(key.encode())
        return None if raw is None else json.loads(raw)

    def items(self) -> list[tuple[str, Any]]:
        """Every (key, value) in key order (RocksDB's bytewise order of UTF-8 = str order)."""
        return [(k.decode(), json.loads(v)) for k, v in self._workspace.db.items()]

    def put(self, key: str, value: Any) -> None:
        if value is None:
            raise ValueError(f"state value for key {key!r} must not be None (use delete)")
        raw_key, raw_value = key.encode(), encode_value(value)
        db = self._workspace.db
        if raw_key not in self._undo:
            self._undo[raw_key] = db.get(raw_key)
        db[raw_key] = raw_value
        self.log.put(raw_key, raw_value)

    def delete(self, key: str) -> None:
        raw_key = key.encode()
        db = self._workspace.db
        old = db.get(raw_key)
        if old is None:
            return
        if raw_key not in self._undo:
            self._undo[raw_key] = old
        del db[raw_key]
        self.log.delete(raw_key)

    def delete_range(self, start: str, end: str) -> None:
        """Delete every key in ``[start, end)``, recording each one in the changelog (SPARK-55510)."""
        if start >= end:
            return
        doomed = self._keys_in_range(start.encode(), end.encode())
        if not doomed:
            return
        batch = rocksdict.WriteBatch(raw_mode=True)
        for raw_key, raw_value in doomed:
            if raw_key not in self._undo:
                self._undo[raw_key] = raw_value
            self.log.delete(raw_key)
            batch.delete(raw_key)
        self._workspace.db.write(batch, self._workspace.write_options)

    def _keys_in_range(self, low: bytes, high: bytes) -> list[tuple[bytes, bytes]]:
        doomed: list[tuple[bytes, bytes]] = []
        for raw_key, raw_value in self._workspace.db.items(from_key=low):
            if raw_key >= high:
                break
            doomed.append((raw_key, raw_value))
        return doomed

    def abort(self) -> None:
        """Undo the batch's changes: the DB holds the loaded / last committed version again."""
        if not self._undo:
            return
        batch = rocksdict.WriteBatch(raw_mode=True)
        for raw_key, old in self._undo.items():
            if old is None:
                batch.delete(raw_key)
            else:
                batch.put(raw_key, old)
        self._workspace.db.write(batch, self._workspace.write_options)
        self.forget()

    def hand_over(self) -> ChangelogBuffer:
        """The batch is sealed: return its changelog records and start the next batch empty."""
        log = self.log
        self.forget()
        return log

    def forget(self) -> None:
        """Drop the undo log and the records (the DB already holds the state to keep)."""
        self._undo, self.log = {}, ChangelogBuffer()
