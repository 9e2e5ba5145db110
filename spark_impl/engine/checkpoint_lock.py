"""One live query per checkpoint directory: a lock file beside it names the driver that holds it."""

from __future__ import annotations

import json
import os
from pathlib import Path

from reference.language.scenario import Scenario

LOCK_SUFFIX = ".lightspeed-lock"


class QueryInUse(RuntimeError):
    """Another live query holds the checkpoint directory."""


def acquire_checkpoint(root: Path, scenario: Scenario) -> Path:
    """Refuse a checkpoint directory that another live query holds (two queries on one checkpoint);
    returns the lock file, which the caller removes when its query ends."""
    root.mkdir(parents=True, exist_ok=True)
    lock = root.parent / f"{root.name}{LOCK_SUFFIX}"
    try:
        fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        try:
            holder = json.loads(lock.read_text())
        except (OSError, ValueError):
            holder = {}
        pid = holder.get("pid")
        if isinstance(pid, int) and _alive(pid):
            raise QueryInUse(f"{root}: checkpoint directory is in use by query {holder.get('scenario')!r} "
                             f"(driver pid {pid}); two queries cannot share one checkpoint") from None
        lock.unlink(missing_ok=True)  # a stale lock of a dead driver
        fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    with os.fdopen(fd, "w") as handle:
        json.dump({"pid": os.getpid(), "scenario": scenario.name}, handle)
    return lock


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
