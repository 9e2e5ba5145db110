"""The temporary folders of a process that runs Spark, removed when the process ends, however it ends.

A ``spark`` run without ``--workdir`` keeps its checkpoint, coordination and
executor-local folders in a temporary folder (``lightspeed-spark-*``); the
code shipped to a cluster's executors is zipped into another
(``lightspeed-points-*``); the driver JVM's output goes to a log in a third.
The caller judges a run's checkpoint after the run returns, and executors keep
stores open in it until their SparkSession stops, so none of them can go when
the run returns. They go when the process ends: at a normal end, after an
error and after Ctrl-C (Python's ``atexit``; a process killed by a signal
cannot clean up, and ``lightspeed cluster``'s state folder is its own). Before
removing them the SparkSession is stopped (``before_removal``), so no executor
of this application writes into a folder after it is gone.

A file a message names (the driver log of a Spark that failed to start) is
moved out of its folder first (``keep``), so it outlives the process.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

_lock = threading.Lock()
_folders: list[Path] = []
_before: list[Callable[[], None]] = []
_registered = False


def scratch_dir(prefix: str) -> Path:
    """A new temporary folder named ``<prefix>...``, removed when this process ends."""
    global _registered
    path = Path(tempfile.mkdtemp(prefix=prefix))
    with _lock:
        _folders.append(path)
        if not _registered:
            atexit.register(remove_all)
            _registered = True
    return path


def before_removal(fn: Callable[[], None]) -> None:
    """Call ``fn`` (once) before the folders are removed at exit: what still writes into them stops first."""
    with _lock:
        if fn not in _before:
            _before.append(fn)


def keep(path: Path, name: str) -> Path:
    """Move ``path`` (a file in a scratch folder) into the temporary directory itself as ``<name>-<pid>-<time>``,
    where it outlives this process; its new path."""
    kept = Path(tempfile.gettempdir()) / f"{name}-{os.getpid()}-{time.strftime('%Y%m%d-%H%M%S')}{path.suffix}"
    shutil.move(str(path), kept)
    return kept


def remove_all() -> None:
    """Stop what writes into the folders, then remove every one this process made (idempotent)."""
    with _lock:
        before, _before[:] = list(_before), []
        folders, _folders[:] = list(_folders), []
    for fn in before:
        try:
            fn()
        except Exception:  # noqa: BLE001 - the process is ending; removing the folders matters more
            pass
    for path in folders:
        shutil.rmtree(path, ignore_errors=True)


def made() -> list[Path]:
    """The folders this process made that still exist (for a test to see)."""
    with _lock:
        return [p for p in _folders if p.exists()]
