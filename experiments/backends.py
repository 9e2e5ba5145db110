"""The one registry of backends: a name to a ``reference.protocol.backend.Backend``.

The command line, the experiments and the tests reach every backend through
``get_backend`` / ``run_backend``; nothing else imports a backend's entry
point. Backends are imported when first asked for, so ``lightspeed run
--backend reference`` never imports pyspark, and a backend whose packages are
missing says so (``BackendUnavailable``) instead of failing at import.
"""

from __future__ import annotations

import difflib
import importlib
import json
import re
from dataclasses import dataclass
from typing import Any

from reference.protocol.backend import Backend, BackendUnavailable, RunOptions, RunResult
from reference.protocol.logs import read_metadata
from reference.language.scenario import Scenario
from reference.protocol.storage import SnapshotReader, Storage


@dataclass(frozen=True)
class Entry:
    """Where a backend lives, and whether its runs are Spark jobs (they then run one at a time in the
    driver's process, sharing its SparkSession, and ``--master`` says where)."""

    module: str
    cls: str
    on_spark: bool = False


# backend name -> where it lives; the order is the order help texts list them in
BACKENDS: dict[str, Entry] = {
    "reference": Entry("reference.protocol.backend", "ReferenceBackend"),
    "sim": Entry("sim.backend", "SimBackend"),
    "spark": Entry("spark_impl.engine.backend", "SparkEngineBackend", on_spark=True),
    "spark-native": Entry("spark_impl.native.backend", "NativeBackend", on_spark=True),
}
BACKEND_NAMES = tuple(BACKENDS)
_INSTANCES: dict[str, Backend] = {}


class UnknownBackend(ValueError):
    """A backend name that is not in the registry; the message suggests the nearest one."""

    def __init__(self, name: str):
        near = difflib.get_close_matches(name, BACKEND_NAMES, n=1)
        hint = f"; did you mean {near[0]!r}?" if near else ""
        super().__init__(f"unknown backend {name!r}{hint} (available: {', '.join(BACKEND_NAMES)})")
        self.name = name


class BackendListError(ValueError):
    """A list of backend names that is too short for what it is for."""


class MasterError(ValueError):
    """A Spark master the spark backends cannot run on."""


# local, local[N], local[*], local[N,F], local[*,F], or a standalone cluster spark://host:port[,host:port...]
MASTER = re.compile(r"^(local(\[(\d+|\*)(,\d+)?\])?|spark://[^\s,/:]+:\d+(,[^\s,/:]+:\d+)*)$")


MAX_LOCAL_THREADS = 1_024   # local[N]: more threads than any machine this runs on has cores


def check_master(master: str | None) -> str | None:
    """``master`` when it is a Spark master the spark backends run on; ``MasterError`` naming it otherwise, at
    once (not after Spark's start-up): its syntax, a thread count of 1 to ``MAX_LOCAL_THREADS``, a failure count
    of at least 1, ports of 1 to 65535."""
    if master is None:
        return master
    if not MASTER.match(master):
        raise MasterError(f"--master {master[:200]!r}: expected local, local[N], local[*], local[N,F] or "
                          "spark://HOST:PORT")
    counts = re.fullmatch(r"local\[(\d+|\*)(?:,(\d+))?\]", master)
    if counts is not None:
        threads, failures = counts.groups()
        if threads != "*" and not 1 <= _small(threads) <= MAX_LOCAL_THREADS:
            raise MasterError(f"--master {master[:60]!r}: local[N] runs N threads; expected N from 1 to "
                              f"{MAX_LOCAL_THREADS:,}, or *")
        if failures is not None and _small(failures) < 1:
            raise MasterError(f"--master {master[:60]!r}: local[N,F] allows F task failures; expected F of at "
                              "least 1")
    for port in re.findall(r":(\d+)", master):
        if not 1 <= _small(port) <= 65_535:
            raise MasterError(f"--master {master[:200]!r}: port {port[:20]} is not a port (1 to 65535)")
    return master


def _small(digits: str) -> int:
    """The number ``digits`` says, or one too large for any count here when it has more than 9 digits."""
    return int(digits) if len(digits) <= 9 else 10**9


def parse_backend_list(text: str, at_least: int = 1) -> list[str]:
    """Comma-separated backend names, each known and named once; ``UnknownBackend`` or ``BackendListError``
    otherwise."""
    names = [known(n.strip()) for n in text.split(",") if n.strip()]
    twice = next((n for i, n in enumerate(names) if n in names[:i]), None)
    if twice is not None:
        raise BackendListError(f"backend {twice!r} is named twice in {text!r}: each backend runs once")
    if len(names) < at_least:
        raise BackendListError(f"give at least {at_least} of {', '.join(BACKEND_NAMES)} separated by commas; "
                               f"got {text!r}")
    return names


def known(name: str) -> str:
    """``name`` if the registry has it, else ``UnknownBackend``."""
    if name not in BACKENDS:
        raise UnknownBackend(name)
    return name


def on_spark(name: str) -> bool:
    """Whether the backend's runs are Spark jobs (known without importing it)."""
    return BACKENDS[known(name)].on_spark


def get_backend(name: str) -> Backend:
    """The backend called ``name``; ``UnknownBackend`` for a name not in the registry, ``BackendUnavailable``
    when its packages cannot be imported here."""
    entry = BACKENDS[known(name)]
    if name not in _INSTANCES:
        try:
            module = importlib.import_module(entry.module)
        except ImportError as exc:
            raise BackendUnavailable(name, f"cannot import {entry.module}: {exc}") from None
        _INSTANCES[name] = getattr(module, entry.cls)()
    return _INSTANCES[name]


def require_available(name: str) -> Backend:
    """The backend, if it can run here; ``BackendUnavailable`` saying what is missing otherwise."""
    backend = get_backend(name)
    missing = backend.unavailable()
    if missing is not None:
        raise BackendUnavailable(name, missing)
    return backend


def run_backend(name: str, scenario: Scenario, options: RunOptions = RunOptions()) -> RunResult:
    """Run ``scenario`` on the named backend; ``BackendUnavailable`` when it cannot run here, ``ScenarioRefused``
    or ``OptionRefused`` when it will not run this scenario or take these options."""
    return require_available(name).run(scenario, options)


def snapshot_readers_for(storage: Storage) -> tuple[SnapshotReader, ...]:
    """The readers a checkpoint's foreign snapshots need, found from its metadata's ``snapshot_format``.

    ``ValueError`` naming the format when no backend here knows it.
    """
    metadata = read_metadata(storage)
    fmt = (metadata or {}).get("snapshot_format")
    if fmt is None:
        return ()
    if not isinstance(fmt, str):
        raise ValueError(f"metadata: snapshot_format {json.dumps(fmt)[:40]} is not the name of a format")
    for name in BACKEND_NAMES:
        try:
            backend = get_backend(name)
        except BackendUnavailable:
            continue
        reader = backend.snapshot_formats.get(fmt)
        if reader is not None:
            return (reader,)
    raise ValueError(f"metadata: snapshot_format {fmt!r} is not one any backend here can read")


def describe_backends() -> list[dict[str, Any]]:
    """Name, whether it runs here (and if not, why), its options and whether it is timed; for ``--help``."""
    out = []
    for name in BACKEND_NAMES:
        try:
            backend = get_backend(name)
            missing = backend.unavailable()
            out.append({"name": name, "available": missing is None, "missing": missing,
                        "options": sorted(backend.options), "timed": backend.timed})
        except BackendUnavailable as exc:
            out.append({"name": name, "available": False, "missing": exc.missing, "options": [], "timed": None})
    return out
