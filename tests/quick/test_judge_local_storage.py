"""A checkpoint directory read as ``reference.protocol.storage.LocalStorage``: nothing outside it is read, nothing blocks.

A link (to a file or a folder, outside or inside the checkpoint, or a loop), a FIFO, a device or a socket is
refused by name before it is opened; a file past ``MAX_CHECKPOINT_FILE_BYTES`` is refused with its size; a
listing never walks into a linked folder. ``excerpt`` quotes a short, escaped part of what a file holds.
"""

from __future__ import annotations

import os
import socket
import stat as stat_module
import threading
from pathlib import Path

import pytest

import reference.language.size
from reference.protocol.storage import (
    CheckpointFormatError,
    DurableStorage,
    LocalStorage,
    StorageError,
    entry_kind,
    excerpt,
    inventory,
    temp_name,
)


@pytest.fixture
def ck(tmp_path: Path) -> LocalStorage:
    storage = LocalStorage(tmp_path / "ck")
    storage.write("metadata", b"v1\n{}")
    storage.write("commits/3", b"v1\n{\"batch\": 3}")
    storage.write("state/0/1/2_u.changelog", b"\x00\x01")
    return storage


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret").write_text("SECRET")
    return folder


def refused(storage: LocalStorage, path: str) -> str:
    with pytest.raises(CheckpointFormatError) as caught:
        storage.read(path)
    assert "SECRET" not in str(caught.value)
    return str(caught.value)


def test_regular_files_read_back_and_missing_ones_are_named(ck: LocalStorage):
    assert ck.read("commits/3") == b"v1\n{\"batch\": 3}" and ck.read("state/0/1/2_u.changelog") == b"\x00\x01"
    assert refused(ck, "commits/4") == f"{ck.root / 'commits/4'}: file not found in checkpoint"
    assert refused(ck, "nope/4") == f"{ck.root / 'nope/4'}: file not found in checkpoint"
    gone = LocalStorage(ck.root / "no-such-root")
    assert refused(gone, "metadata").endswith("no-such-root/metadata: file not found in checkpoint")


def test_a_link_is_never_followed_to_a_file_or_a_folder_outside_or_inside(ck: LocalStorage, outside: Path):
    root = ck.root
    (root / "commits" / "4").symlink_to(outside / "secret")
    assert "commits/4: is a symbolic link; a checkpoint holds regular files only" in refused(ck, "commits/4")
    (root / "commits" / "5").symlink_to(root / "commits" / "3")
    assert "is a symbolic link" in refused(ck, "commits/5")
    (root / "state" / "9").symlink_to(outside, target_is_directory=True)
    assert refused(ck, "state/9/secret") == f"{root / 'state' / '9'}: is a symbolic link; a checkpoint holds " \
                                            "regular files only, and a link is never followed out of it"
    (root / "loop").symlink_to("loop2")
    (root / "loop2").symlink_to("loop")
    assert "is a symbolic link" in refused(ck, "loop")


def test_a_fifo_a_socket_or_a_folder_is_refused_without_blocking(ck: LocalStorage, tmp_path: Path):
    root = ck.root
    os.mkfifo(root / "commits" / "4")
    result: list[str] = []
    reader = threading.Thread(target=lambda: result.append(refused(ck, "commits/4")), daemon=True)
    reader.start()
    reader.join(timeout=10)
    assert result == [f"{root / 'commits' / '4'}: is a fifo, not a regular file; a checkpoint holds regular files "
                      "only (it was not opened)"]
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(root / "commits" / "5"))
        assert "is a socket, not a regular file" in refused(ck, "commits/5")
    assert refused(ck, "state/0") == f"{root / 'state' / '0'}: is a directory where the checkpoint layout has a file"
    assert refused(ck, "metadata/x") == f"{root / 'metadata'}: is a file where the checkpoint layout has a directory"


def test_a_link_to_a_device_is_refused_as_a_link(ck: LocalStorage):
    (ck.root / "commits" / "4").symlink_to("/dev/zero")
    assert "is a symbolic link" in refused(ck, "commits/4")


def test_a_file_past_the_limit_is_refused_with_its_size(ck: LocalStorage, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(reference.language.size, "MAX_CHECKPOINT_FILE_BYTES", 4)
    assert refused(ck, "commits/3") == f"{ck.root / 'commits/3'}: 15 bytes, more than the 4 bytes this reads; no " \
                                       "checkpoint file is that large"
    assert ck.read("state/0/1/2_u.changelog") == b"\x00\x01"
    monkeypatch.setattr(reference.language.size, "MAX_CHECKPOINT_FILE_BYTES", 15)
    assert ck.read("commits/3") == b"v1\n{\"batch\": 3}"


def test_an_unreadable_file_is_named(ck: LocalStorage):
    if os.geteuid() == 0:
        return   # root reads every file whatever its mode; the refusal is the one of any other user
    (ck.root / "commits" / "3").chmod(0)
    assert refused(ck, "commits/3") == f"{ck.root / 'commits/3'}: cannot be read (permission denied)"


def test_listing_never_walks_into_a_linked_folder(ck: LocalStorage, outside: Path):
    (outside / "7").write_text("x")
    (ck.root / "offsets").symlink_to(outside, target_is_directory=True)
    with pytest.raises(CheckpointFormatError, match=r"offsets: is a symbolic link where the checkpoint layout has "
                                                    r"a directory; it is not listed"):
        ck.list("offsets/")
    (ck.root / "state" / "5").symlink_to(outside, target_is_directory=True)
    assert ck.list("state/") == ["state/0/1/2_u.changelog"]
    assert ck.list("nothing/here/") == [] and ck.list("metadata/x/") == []
    assert ck.list("commits/") == ["commits/3"]


def test_exists_does_not_follow_a_link(ck: LocalStorage, tmp_path: Path):
    (ck.root / "commits" / "4").symlink_to(tmp_path / "nowhere")
    assert ck.exists("commits/4") and not ck.exists("commits/5")


def test_entries_list_everything_hidden_or_special_and_follow_nothing(ck: LocalStorage, outside: Path):
    root = ck.root
    (root / "offsets").mkdir()
    (root / "offsets" / ".hidden").write_text("x")
    (root / "state" / "5").symlink_to(outside, target_is_directory=True)
    os.mkfifo(root / "sink")
    assert ck.entries() == [("commits", "directory"), ("commits/3", "file"), ("metadata", "file"),
                            ("offsets", "directory"), ("offsets/.hidden", "file"), ("sink", "fifo"),
                            ("state", "directory"), ("state/0", "directory"), ("state/0/1", "directory"),
                            ("state/0/1/2_u.changelog", "file"), ("state/5", "symlink")]
    assert inventory(ck) == ck.entries()
    memory = DurableStorage()
    memory.write("a/b", b"")
    assert inventory(memory) == [("a/b", "file")]


def test_entry_kinds_by_mode(tmp_path: Path):
    import stat
    assert entry_kind(stat.S_IFREG) == "file" and entry_kind(stat.S_IFDIR) == "directory"
    assert entry_kind(stat.S_IFLNK) == "symlink" and entry_kind(stat.S_IFIFO) == "fifo"
    assert entry_kind(stat.S_IFSOCK) == "socket" and entry_kind(stat.S_IFCHR) == "device"
    assert entry_kind(stat.S_IFBLK) == "device"


def test_writes_are_atomic_and_leave_no_temporary_file(ck: LocalStorage):
    with pytest.raises(StorageError, match="already exists"):
        ck.write("commits/3", b"other")
    ck.write("commits/3", b"new", overwrite=True)
    assert ck.read("commits/3") == b"new"
    assert not [p for p in ck.root.rglob(".*")]
    name = temp_name("7")
    assert name.startswith(".7.") and name.endswith(".tmp") and name.count(".") == 5


def test_an_excerpt_is_short_escaped_and_says_how_much_more_there_was():
    assert excerpt(b"short") == '"short"'
    assert excerpt("x" * 40) == '"' + "x" * 40 + '"'
    assert excerpt("x" * 41) == '"' + "x" * 40 + '" (and 1 more characters)'
    assert excerpt(b"\x1b[31m\n\"\\\xff" + b"y" * 2_000_000) == \
        '"\\u001b[31m\\n\\"\\\\\\ufffd' + "y" * 31 + '" (and 1,999,969 more characters)'
    assert excerpt("abc", limit=2) == '"ab" (and 1 more characters)'


# ------------------------------------------------- an entry that changes between the look and the open


class Racing:
    """The ``os`` module as ``reference.protocol.storage`` sees it while an entry changes under it: ``stat`` of ``name``
    (relative to a folder's descriptor) reports ``mode``; ``fstat`` may report a smaller size; ``open`` of
    ``denied`` fails with a permission error. Everything else is the real ``os``."""

    def __init__(self, name: str = "", mode: int = 0, size: int | None = None, denied: str = ""):
        self.name, self.mode, self.size, self.denied = name, mode, size, denied

    def __getattr__(self, attr: str):
        return getattr(os, attr)

    def stat(self, path, *args, **kwargs):
        real = os.stat(path, *args, **kwargs)
        if path != self.name:
            return real
        return os.stat_result((self.mode,) + tuple(real)[1:])

    def fstat(self, fd):
        real = os.fstat(fd)
        if self.size is None or not stat_module.S_ISREG(real.st_mode):
            return real
        return os.stat_result(tuple(real)[:6] + (self.size,) + tuple(real)[7:])

    def open(self, path, flags, *args, **kwargs):
        if path == self.denied:
            raise PermissionError(13, "Permission denied")
        return os.open(path, flags, *args, **kwargs)


def test_a_file_swapped_for_a_link_after_it_was_looked_at_is_not_followed(ck, outside, monkeypatch):
    (ck.root / "commits" / "4").symlink_to(outside / "secret")
    monkeypatch.setattr(reference.protocol.storage, "os", Racing("4", stat_module.S_IFREG))
    says = refused(ck, "commits/4")
    assert says.startswith(f"{ck.root / 'commits' / '4'}: cannot be opened safely")


def test_a_file_swapped_for_a_fifo_after_it_was_looked_at_is_not_waited_on(ck, monkeypatch):
    fifo = ck.root / "commits" / "4"
    os.mkfifo(fifo)
    monkeypatch.setattr(reference.protocol.storage, "os", Racing("4", stat_module.S_IFREG))
    result: list[str] = []
    reader = threading.Thread(target=lambda: result.append(refused(ck, "commits/4")), daemon=True)
    reader.start()
    reader.join(timeout=10)
    if reader.is_alive():   # it blocked on the FIFO: open the other end so that it ends
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    assert result == [f"{fifo}: is a fifo, not a regular file; a checkpoint holds regular files only (it was not "
                      "opened)"]


def test_a_folder_swapped_for_a_file_after_it_was_looked_at_is_not_opened_as_one(ck, monkeypatch):
    (ck.root / "sink").write_text("not a folder")
    monkeypatch.setattr(reference.protocol.storage, "os", Racing("sink", stat_module.S_IFDIR))
    assert refused(ck, "sink/x").startswith(f"{ck.root / 'sink'}: cannot be opened safely")


def test_a_file_that_cannot_be_opened_is_named(ck, monkeypatch):
    monkeypatch.setattr(reference.protocol.storage, "os", Racing(denied="3"))
    assert refused(ck, "commits/3") == f"{ck.root / 'commits/3'}: cannot be read (permission denied)"


def test_a_file_that_grows_past_the_limit_while_read_is_refused(ck, monkeypatch):
    monkeypatch.setattr(reference.language.size, "MAX_CHECKPOINT_FILE_BYTES", 14)
    monkeypatch.setattr(reference.protocol.storage, "os", Racing(size=14))   # 15 bytes, said to be 14 when looked at
    assert refused(ck, "commits/3") == f"{ck.root / 'commits/3'}: grew past 14 bytes while read"
    monkeypatch.setattr(reference.language.size, "MAX_CHECKPOINT_FILE_BYTES", 15)
    assert ck.read("commits/3") == b"v1\n{\"batch\": 3}"


def test_reads_leave_no_descriptor_open(ck):
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(20):
        ck.read("state/0/1/2_u.changelog")
        with pytest.raises(CheckpointFormatError):
            ck.read("state/0/9")
    assert len(os.listdir("/proc/self/fd")) == before


def test_a_root_that_is_a_file_is_named(tmp_path):
    (tmp_path / "file").write_text("x")
    assert refused(LocalStorage(tmp_path / "file"), "metadata") == f"{tmp_path / 'file'}: the checkpoint is not a " \
                                                                   "directory"


def test_paths_must_stay_inside(ck):
    for path in ("", "/etc/passwd", "a/../../b", ".."):
        with pytest.raises(ValueError, match="must be relative and stay inside the checkpoint"):
            ck.read(path)
    assert DurableStorage().exists("a/b") is False


def test_a_nested_linked_folder_is_not_listed(ck, outside):
    (ck.root / "state" / "0" / "7").symlink_to(outside, target_is_directory=True)
    with pytest.raises(CheckpointFormatError, match=r"state/0/7: is a symbolic link"):
        ck.list("state/0/7/")
    assert ck.list("state/0/") == ["state/0/1/2_u.changelog"]


def test_delete_rename_and_dump(ck, tmp_path):
    ck.delete("commits/3")
    ck.delete("commits/3")   # a second delete of a file that is gone does nothing
    assert not ck.exists("commits/3")
    ck.rename("metadata", "deep/new/place")
    assert ck.read("deep/new/place") == b"v1\n{}" and not ck.exists("metadata")
    ck.write("x", b"1")
    ck.rename("x", "deep/new/y")   # into a folder that exists
    memory = DurableStorage()
    memory.write("deep/new/place", b"other")
    memory.dump_to(ck.root)        # over a file that is there
    assert ck.read("deep/new/place") == b"other"


def test_the_in_memory_storage_counts_and_lists(tmp_path):
    memory = DurableStorage()
    assert (memory.ops, memory.bytes_written) == (0, 0) and "folders" not in repr(memory)
    memory.write("offsets/1", b"abc")
    with pytest.raises(StorageError, match="already exists"):
        memory.write("offsets/1", b"again")
    memory.write("offsets/2", b"de", overwrite=True)
    assert (memory.ops, memory.bytes_written) == (2, 5)
    memory.rename("offsets/2", "offsets/3")
    memory.delete("offsets/3")
    assert memory.ops == 4 and memory.list("off") == ["offsets/1"] and memory.list("offsets/") == ["offsets/1"]
    with pytest.raises(StorageError, match="source does not exist"):
        memory.rename("offsets/9", "offsets/10")


def test_a_temporary_name_is_one_the_layout_knows():
    from reference.protocol.layout import classify
    entry = classify(f"offsets/{temp_name('3')}")
    assert entry is not None and entry.kind == "temp" and entry.written == "offset"


def test_listing_takes_the_prefix_as_a_prefix_and_leaves_hidden_files_out(ck):
    ck.write("commits/30", b"x")
    ck.write("commits/4", b"x")
    (ck.root / "commits" / ".3.1.2.abcdef01.tmp").write_bytes(b"half")
    assert ck.list("commits/3") == ["commits/3", "commits/30"]
    assert ck.list("commits/") == ["commits/3", "commits/30", "commits/4"]
    memory = DurableStorage()
    for path in ("offsets/1", "offsets/10", "offsets/2"):
        memory.write(path, b"")
    assert memory.list("offsets/1") == ["offsets/1", "offsets/10"]
