"""Where a result came from: package versions, interpreter, machine, Java, and the source revision."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from experiments.experiment import RunContext

PACKAGES = ("lightspeed-ref", "numpy", "simpy", "pyspark", "rocksdict", "matplotlib", "tqdm")
ROOT = Path(__file__).resolve().parent.parent


def environment(ctx: RunContext | None = None) -> dict[str, Any]:
    """Package versions, interpreter, machine and source revision of this run (and how its points ran)."""
    ctx = ctx or RunContext(executor="inline")
    versions: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return {"python": sys.version.split()[0], "implementation": platform.python_implementation(),
            "platform": platform.platform(), "machine": platform.machine(), "cpu_count": os.cpu_count(),
            "packages": versions, "java": java_version(), "git": git_revision(exclude=OUTPUTS),
            "executor": ctx.executor, "master": ctx.master if ctx.executor == "spark" else None,
            "argv": sys.argv[1:]}


def java_version() -> str | None:
    """The first line of ``java -version``; None without Java."""
    try:
        proc = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    text = proc.stderr or proc.stdout
    return text.splitlines()[0] if text else None


# what the commands write: a run's own results are not the source it measured, so they never make a tree dirty
OUTPUTS = ("paper/results", "paper/generated", "paper/figures", "results")


def git_revision(exclude: tuple[str, ...] = ()) -> dict[str, Any] | None:
    """The commit this source tree is at, and whether it has uncommitted changes (outside the paths ``exclude``
    names: the results a command is rewriting are not the source that rewrites them); None outside git."""
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                                timeout=10).stdout.strip()
        paths = ["--", "."] + [f":(exclude){path}" for path in exclude] if exclude else []
        dirty = subprocess.run(["git", "status", "--porcelain", *paths], cwd=ROOT, capture_output=True, text=True,
                               timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": commit or None, "dirty": bool(dirty)} if commit else None
