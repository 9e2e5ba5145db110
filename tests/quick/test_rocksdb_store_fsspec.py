"""The RocksDB state store over ``FsspecStorage`` (spec section 3: any filesystem with atomic create).

``fsspec`` is not a dependency of this project, so the store is run over a
small in-memory filesystem written here that has exactly the methods
``FsspecStorage`` calls (``open``, ``exists``, ``rm``, ``mv``, ``find``,
``makedirs``), in two flavours: one that lists absolute paths (like fsspec's
local filesystem) and one that drops the leading slash (like some object
stores). When ``fsspec`` itself is installed its ``MemoryFileSystem`` and
``LocalFileSystem`` are run too. Each one must carry a full recovery round
trip for all three providers: a fresh store, with nothing local, loads every
retained version to exactly the state the live store had.
"""

from __future__ import annotations

import importlib.util
import io
import random
from pathlib import Path

import pytest
from store_workloads import random_changes

from reference.protocol.state_store import load_version
from reference.protocol.storage import CheckpointFormatError, StorageError
from spark_impl.state_store import RocksDBStateStore
from spark_impl.state_store.checkpoint_fs import FsspecStorage

OP, PART = "join-left", 2
RETAIN = 4


class _PendingFile(io.BytesIO):
    """A file being written: visible only once closed, like an object-store upload."""

    def __init__(self, fs: "DictFileSystem", path: str):
        super().__init__()
        self.fs, self.path = fs, path

    def close(self) -> None:
        if not self.closed:
            self.fs.files[self.path] = self.getvalue()
        super().close()


class DictFileSystem:
    """The fsspec methods ``FsspecStorage`` uses, over a dict of path -> bytes."""

    def __init__(self, strip_leading_slash: bool = False):
        self.files: dict[str, bytes] = {}
        self.dirs: set[str] = set()
        self.strip = strip_leading_slash
        self.calls: dict[str, int] = {}

    def _norm(self, path: str) -> str:
        return "/" + path.strip("/")

    def _count(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1

    def open(self, path: str, mode: str = "rb"):
        self._count("open")
        path = self._norm(path)
        if mode == "wb":
            return _PendingFile(self, path)
        if mode == "rb":
            if path not in self.files:
                raise FileNotFoundError(path)
            return io.BytesIO(self.files[path])
        raise ValueError(f"mode {mode!r} not supported")

    def exists(self, path: str) -> bool:
        self._count("exists")
        path = self._norm(path)
        return path in self.files or path in self.dirs or any(p.startswith(path + "/") for p in self.files)

    def rm(self, path: str) -> None:
        self._count("rm")
        del self.files[self._norm(path)]

    def mv(self, src: str, dst: str) -> None:
        self._count("mv")
        self.files[self._norm(dst)] = self.files.pop(self._norm(src))

    def makedirs(self, path: str, exist_ok: bool = False) -> None:
        self._count("makedirs")
        self.dirs.add(self._norm(path))

    def find(self, path: str) -> list[str]:
        self._count("find")
        prefix = self._norm(path) + "/"
        found = sorted(p for p in self.files if p.startswith(prefix))
        return [p.lstrip("/") for p in found] if self.strip else found


FILESYSTEMS = ["dict-absolute", "dict-stripped"] + (
    ["fsspec-memory", "fsspec-local"] if importlib.util.find_spec("fsspec") is not None else [])


@pytest.fixture(params=FILESYSTEMS)
def storage(request, tmp_path: Path):
    if request.param.startswith("dict"):
        yield FsspecStorage(DictFileSystem(strip_leading_slash=request.param == "dict-stripped"), "/ck")
    elif request.param == "fsspec-memory":
        import fsspec
        fs = fsspec.filesystem("memory")
        root = f"/lightspeed-{random.getrandbits(48):x}"
        yield FsspecStorage(fs, root)
        if fs.exists(root):
            fs.rm(root, recursive=True)
    else:
        import fsspec
        yield FsspecStorage(fsspec.filesystem("file"), str(tmp_path / "ck"))


def workload(store: RocksDBStateStore, rng: random.Random, versions: int) -> dict[int, list]:
    live: dict[int, list] = {0: []}
    for v in range(1, versions + 1):
        random_changes(store, rng, max_ops=30, key_space=40)
        store.commit(f"v{v}")
        live[v] = store.items()
        if rng.random() < 0.5:
            store.do_maintenance()
        if rng.random() < 0.3:
            store.cleanup(RETAIN)
    return live


@pytest.mark.parametrize("provider", ["changelog", "delta", "snapshot"])
def test_recovery_round_trip_over_fsspec(storage: FsspecStorage, tmp_path: Path, provider: str):
    store = RocksDBStateStore(storage, OP, PART, provider, 3, local_root=tmp_path / "live")
    live = workload(store, random.Random(11), 12)
    store.do_maintenance()
    store.cleanup(RETAIN)
    store.crash()
    fresh = RocksDBStateStore(storage, OP, PART, provider, 3, local_root=tmp_path / "fresh")
    for version in range(12 - RETAIN + 1, 13):
        report = fresh.load(version, f"v{version}")
        assert fresh.items() == live[version], f"{provider} version {version}"
    assert report.base_version > 0 or provider != "snapshot", "the snapshot provider loads from a snapshot"
    fresh.close()
    if provider == "delta":
        # The reference's own loader reads this store's binary snapshots and deltas through the same storage.
        ref = load_version(storage, OP, PART, 12, "v12")
        assert sorted(ref.items()) == live[12]


def test_fsspec_storage_contract(storage: FsspecStorage):
    storage.write("state/a/0/1_x.changelog", b"one")
    with pytest.raises(StorageError, match="already exists"):
        storage.write("state/a/0/1_x.changelog", b"two")
    assert storage.read("state/a/0/1_x.changelog") == b"one"
    storage.write("state/a/0/1_x.changelog", b"two", overwrite=True)
    assert storage.read("state/a/0/1_x.changelog") == b"two"
    storage.write("state/a/0/SSTs/f.sst", b"s")
    storage.write("offsets/0", b"o")
    assert storage.list("state/") == ["state/a/0/1_x.changelog", "state/a/0/SSTs/f.sst"]
    assert storage.list() == ["offsets/0", "state/a/0/1_x.changelog", "state/a/0/SSTs/f.sst"]
    storage.rename("offsets/0", "offsets/1")
    assert storage.exists("offsets/1") and not storage.exists("offsets/0")
    storage.delete("offsets/1")
    storage.delete("offsets/1")  # deleting a missing file is not an error
    assert not storage.exists("offsets/1")
    with pytest.raises(CheckpointFormatError, match="offsets/1"):
        storage.read("offsets/1")
    with pytest.raises(ValueError, match="inside the checkpoint"):
        storage.write("../escape", b"x")


def test_corrupt_changelog_over_fsspec_names_file_and_version(storage: FsspecStorage, tmp_path: Path):
    store = RocksDBStateStore(storage, OP, PART, "changelog", 100, local_root=tmp_path / "live")
    for v in (1, 2, 3):
        store.put(f"k{v}", v)
        store.commit(f"u{v}")
    store.close()
    path = f"state/{OP}/{PART}/2_u2.changelog"
    storage.write(path, storage.read(path)[:-2], overwrite=True)
    fresh = RocksDBStateStore(storage, OP, PART, "changelog", 100, local_root=tmp_path / "fresh")
    with pytest.raises(CheckpointFormatError, match=r"2_u2\.changelog.*version 2"):
        fresh.load(3, "u3")
    fresh.close()
