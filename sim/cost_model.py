"""The simulator's cost model: named, documented parameters loaded from JSON profiles.

A profile says how long each protocol step of spec section 2 takes on one
cluster. Every parameter is named with its unit; a profile that lacks one, or
gives a negative value, is refused with the parameter's name
(``ProfileError``, a ``ValueError``). Durations are simulated milliseconds.

Two profiles ship in ``sim/profiles``:

- ``lightspeed_cluster.json``: the published Project Lightspeed benchmark
  setup, 7 workers x 4 cores, checkpoint on a cloud object store;
- ``local_spark.json``: local Spark on a 2-core machine, checkpoint on local disk.

``profiles/README.md`` documents every parameter, what each step is charged,
and volume mode's input and state model.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, fields, replace
from typing import Any, Sequence

import numpy as np

from reference.protocol.backend import BackendError
from reference.protocol.storage_profiles import (
    STORAGE_PROFILE_ALIASES,
    STORAGE_PROFILES,
    StorageProfile,
    StorageProfileError,
    storage_profile,
)

from .random_draws import Draws

PROFILE_DIR = os.path.join(os.path.dirname(__file__), "profiles")
DEFAULT_PROFILE = "local_spark"


class ProfileError(BackendError, ValueError):
    """A cost profile is malformed; ``parameter`` names the offending entry.

    A ``BackendError``: the simulator refuses to run rather than produce an outcome.
    """

    def __init__(self, parameter: str, message: str):
        super().__init__(f"cost profile parameter {parameter}: {message}")
        self.parameter = parameter


@dataclass(frozen=True)
class Profile:
    """Every cost the simulator charges; see ``PARAMETER_DOCS`` for each meaning."""

    name: str
    executors: int
    cores_per_executor: int
    per_record_us: float
    per_task_overhead_ms: float
    scheduling_delay_ms: float
    planning_ms: float
    latest_offset_ms: float
    network_rtt_ms: float
    state_load_cached_ms: float
    state_replay_per_key_us: float
    state_commit_base_ms: float
    state_commit_per_changed_key_us: float
    state_commit_per_total_key_us: float
    snapshot_base_ms: float
    snapshot_per_key_us: float
    bytes_per_state_key: float
    bytes_per_output_row: float
    source_commit_ms: float
    restart_ms: float
    executor_replacement_ms: float
    straggler_probability: float
    straggler_slowdown: float
    storage: StorageProfile
    sink_part_files: int = 1   # optional (OPTIONAL_PARAMETERS): 1 a file sink, 0 an in-memory (stat) sink
    # optional: how often a task's process does not hold its partition's loaded store, and what opening one
    # from the checkpoint costs beyond its reads and replay (see PARAMETER_DOCS)
    state_cache_miss_probability: float = 0.0
    state_open_ms: float = 0.0

    @property
    def slots(self) -> int:
        return self.executors * self.cores_per_executor

    # ------------------------------------------------------------- costs
    def task_apply_ms(self, records: int, straggler_factor: float) -> float:
        """Running the operator pipeline on ``records`` input rows in one task."""
        return (self.per_task_overhead_ms + records * self.per_record_us / 1000.0) * straggler_factor

    def state_commit_ms(self, changed_keys: int, total_keys: int) -> float:
        """Making a state version durable locally (RocksDB flush + checkpoint), by key counts."""
        return (self.state_commit_base_ms + changed_keys * self.state_commit_per_changed_key_us / 1000.0
                + total_keys * self.state_commit_per_total_key_us / 1000.0)

    def snapshot_ms(self, total_keys: int) -> float:
        """Building a full snapshot of ``total_keys`` keys (the upload is charged by the storage)."""
        return self.snapshot_base_ms + total_keys * self.snapshot_per_key_us / 1000.0

    @staticmethod
    def snapshot_upload_keys(provider: str, total_keys: int, changed_since_snapshot: int) -> int:
        """The keys a snapshot writes to the checkpoint store (and builds first).

        The HDFS-backed provider (``delta``) writes its whole map (``HDFSBackedStateStoreProvider.doSnapshot``
        writes every entry of the version). RocksDB (``changelog``) uploads only the SST files the checkpoint
        store does not hold yet (``RocksDBFileManager.saveCheckpointToDfs`` copies the new files and reuses the
        others): the keys changed since the last snapshot, flushed from the memtable. Compaction also rewrites
        older files, which this leaves out, so the RocksDB figure is a lower bound."""
        if provider == "changelog":
            return min(total_keys, changed_since_snapshot)
        return total_keys

    def commit_files_bytes(self, provider: str, changed_keys: float) -> list[float]:
        """The files one store's commit writes to the checkpoint store, in bytes.

        ``changelog`` and ``delta`` write the version's changes (``N.changelog``, ``N.delta``). ``snapshot``
        (RocksDB with changelog checkpointing off) uploads the SST files its commit's flush made, which hold
        the keys the version changed, and the version's zip (its file list, MANIFEST, OPTIONS and CURRENT):
        ``RocksDBFileManager.saveCheckpointToDfs`` copies only the files the checkpoint store does not hold yet
        and reuses the rest, so it is not a copy of the whole state. Compaction, which rewrites older files
        from time to time, is left out, as for snapshots (``snapshot_upload_keys``): a lower bound."""
        changes = changed_keys * self.bytes_per_state_key
        return [changes, ROCKSDB_VERSION_ZIP_BYTES] if provider == "snapshot" else [changes]

    def state_cache_missed(self, uniform: float) -> bool:
        """Whether a task whose version is cached on its executor still loads it (``state_cache_miss_probability``),
        given a uniform variate on [0, 1)."""
        return uniform < self.state_cache_miss_probability

    def state_replay_ms(self, keys: int) -> float:
        return keys * self.state_replay_per_key_us / 1000.0

    def straggler_factor(self, rng: "np.random.Generator | Draws") -> float:
        """A task's slowdown: ``straggler_slowdown`` with ``straggler_probability``, else 1."""
        if self.straggler_probability <= 0:
            return 1.0
        return self.straggler_factor_for(rng.random())

    def straggler_factor_for(self, uniform: float) -> float:
        """The slowdown a uniform variate on [0, 1) stands for (``straggler_factor``'s rule)."""
        return self.straggler_slowdown if uniform < self.straggler_probability else 1.0


# The zip a RocksDB version uploads beside its new SST files when changelog checkpointing is off: 3.8-4.6 KB for
# versions 1-12 of a 500-key partition on Spark 4.3 (measured: --backend spark-native, changelog-checkpointing's
# snapshot scenario); it grows with the number of SST files it lists, not with the keys.
ROCKSDB_VERSION_ZIP_BYTES = 4096.0


def store_commits_ms(costs_ms: Sequence[float], parallel: bool) -> float:
    """The time of a partition's store commits (a join's two sides): one after the other, as Spark OSS
    commits them in its task, their times add up; in parallel, as Lightspeed commits them, the slowest
    decides."""
    return max(costs_ms, default=0.0) if parallel else sum(costs_ms)


# Storage presets a profile may name instead of giving ``storage`` in full: the named profiles of
# ``reference.protocol.storage_profiles`` (one table, shared with the Spark engine's ``--storage-profile``), under
# their own names and their aliases (``s3`` is ``object_store``).
STORAGE_PRESETS: dict[str, dict[str, float]] = {
    **{name: profile.to_dict() for name, profile in STORAGE_PROFILES.items()},
    **{alias: STORAGE_PROFILES[name].to_dict() for alias, name in STORAGE_PROFILE_ALIASES.items()},
}

# Parameters a profile may leave out, with the value that keeps the behaviour of profiles written before them.
OPTIONAL_PARAMETERS: dict[str, float] = {"sink_part_files": 1, "state_cache_miss_probability": 0.0,
                                         "state_open_ms": 0.0}

PARAMETER_DOCS: dict[str, str] = {
    "executors": "number of executor processes (workers)",
    "cores_per_executor": "task slots per executor",
    "per_record_us": "CPU time per input record in task_apply, microseconds",
    "per_task_overhead_ms": "fixed cost of every task (deserialise, set up, report), ms",
    "scheduling_delay_ms": "driver-side delay from a task being ready to its launch, ms",
    "planning_ms": "queryPlanning: planning one micro-batch on the driver, ms",
    "latest_offset_ms": "latestOffset: asking the source for its available offsets, ms",
    "network_rtt_ms": "one driver <-> executor round trip (task launch, status), ms",
    "state_load_cached_ms": "state_load when the version is cached on the executor, ms",
    "state_replay_per_key_us": "replaying one key of a snapshot or changelog on load, us",
    "state_commit_base_ms": "fixed cost of a state store commit, ms",
    "state_commit_per_changed_key_us": "commit cost per changed key (write batch + flush), us",
    "state_commit_per_total_key_us": "commit cost per key in the store (checkpoint of the store), us",
    "snapshot_base_ms": "fixed cost of building a snapshot in maintenance, ms",
    "snapshot_per_key_us": "snapshot cost per key of the store, us",
    "bytes_per_state_key": "size of one key/value record in a state file, bytes",
    "bytes_per_output_row": "size of one sink row, bytes",
    "source_commit_ms": "telling the source it may drop data, ms",
    "restart_ms": "from a driver crash to the restarted driver planning, ms",
    "executor_replacement_ms": "time to get a replacement executor after an executor loss, ms",
    "straggler_probability": "chance that a task is a straggler (0..1)",
    "straggler_slowdown": "a straggler's slowdown factor (>= 1)",
    "sink_part_files": "1: each sink task writes a part file to the checkpoint storage; 0: the sink keeps what it "
                       "is given in memory (the benchmark's stat sink) and writes nothing (optional, default 1)",
    "state_cache_miss_probability": "chance that a task's process does not hold its partition's store although "
                                    "the executor ran the partition last: 0 on a Spark executor, whose JVM keeps "
                                    "its loaded stores for every task; on the engine each of an executor's Python "
                                    "workers keeps its own, and a task lands on any of them (optional, default 0)",
    "state_open_ms": "opening a store from the checkpoint (a new local database, the listing, the restore) "
                     "beyond its file reads and replay, ms (optional, default 0)",
    "storage.small_write_ms": "creating a small file on the checkpoint storage, ms",
    "storage.rename_ms": "the rename that makes a write atomic, ms",
    "storage.list_ms": "one listing of a checkpoint directory, ms",
    "storage.delete_ms": "deleting one file, ms",
    "storage.read_ms": "opening a file and reading its first byte, ms",
    "storage.bandwidth_mb_per_s": "transfer rate of large reads and writes, MB/s",
    "storage.jitter_sigma": "log-normal shape of per-operation storage jitter",
}


def _number(raw: dict[str, Any], name: str, path: str) -> float:
    if name not in raw:
        raise ProfileError(path, "missing (see sim.cost_model.PARAMETER_DOCS)")
    value = raw[name]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise ProfileError(path, f"expected a number, got {value!r}")
    if value < 0:
        raise ProfileError(path, f"must not be negative, got {value}")
    return value


def profile_from_dict(raw: dict[str, Any]) -> Profile:
    """Validate a profile document; every parameter is required and non-negative."""
    if not isinstance(raw, dict):
        raise ProfileError("<profile>", "expected a JSON object")
    storage_raw = raw.get("storage")
    if isinstance(storage_raw, str):
        if storage_raw not in STORAGE_PRESETS:
            raise ProfileError("storage", f"unknown preset {storage_raw!r}; expected one of "
                                          f"{', '.join(STORAGE_PRESETS)} or an object")
        storage_raw = STORAGE_PRESETS[storage_raw]
    if not isinstance(storage_raw, dict):
        raise ProfileError("storage", "missing or not an object")
    try:   # the storage parameters are reference.protocol.storage_profiles.StorageProfile's, shared with the engine
        storage = StorageProfile(**{f.name: _number(storage_raw, f.name, f"storage.{f.name}")
                                    for f in fields(StorageProfile)})
    except StorageProfileError as exc:
        raise ProfileError(f"storage.{exc.parameter}", str(exc)) from None
    values: dict[str, Any] = {}
    for f in fields(Profile):
        if f.name in ("name", "storage"):
            continue
        if f.name in OPTIONAL_PARAMETERS and f.name not in raw:
            values[f.name] = OPTIONAL_PARAMETERS[f.name]
            continue
        values[f.name] = _number(raw, f.name, f.name)
    if values["sink_part_files"] not in (0, 1):
        raise ProfileError("sink_part_files", f"expected 0 or 1, got {values['sink_part_files']}")
    values["sink_part_files"] = int(values["sink_part_files"])
    for name in ("executors", "cores_per_executor"):
        if int(values[name]) != values[name] or values[name] < 1:
            raise ProfileError(name, f"expected a whole number >= 1, got {values[name]}")
        values[name] = int(values[name])
    if values["state_cache_miss_probability"] > 1:
        raise ProfileError("state_cache_miss_probability", "must be at most 1")
    if values["straggler_probability"] > 1:
        raise ProfileError("straggler_probability", "must be at most 1")
    if values["straggler_slowdown"] < 1:
        raise ProfileError("straggler_slowdown", "must be at least 1")
    if storage.bandwidth_mb_per_s <= 0:
        raise ProfileError("storage.bandwidth_mb_per_s", "must be positive")
    known = {f.name for f in fields(Profile)} | {"description"}
    extra = sorted(set(raw) - known)
    if extra:
        raise ProfileError(extra[0], "unknown parameter (check the spelling against PARAMETER_DOCS)")
    return Profile(name=str(raw.get("name", "custom")), storage=storage, **values)


def shipped_profile_path(name: str) -> str | None:
    """The file of the shipped profile ``name`` (``local_spark``), or None when no shipped profile has that name.
    Only a plain name is looked up, so a name with a path in it (``../../x``) never reads a file outside
    ``PROFILE_DIR``."""
    if not re.fullmatch(r"[A-Za-z0-9_-]{1,100}", name):
        return None
    path = os.path.join(PROFILE_DIR, f"{name}.json")
    return path if os.path.isfile(path) else None


def load_profile(path: str) -> Profile:
    """Read a JSON profile file the user named, or a shipped profile by name (``local_spark``)."""
    if not os.path.exists(path):
        path = shipped_profile_path(path) or path
    try:
        with open(path) as fh:
            raw = json.load(fh)
    except FileNotFoundError:
        raise ProfileError("<file>", f"{path}: no such profile file") from None
    except json.JSONDecodeError as exc:
        raise ProfileError("<file>", f"{path}: not valid JSON: {exc}") from None
    except UnicodeDecodeError:
        raise ProfileError("<file>", f"{path}: not a UTF-8 text file") from None
    except OSError as exc:   # a directory, no permission, ...
        raise ProfileError("<file>", f"{path}: cannot be read: {exc.strerror or exc}") from None
    try:
        return profile_from_dict(raw)
    except ProfileError as exc:
        raise ProfileError(exc.parameter, f"{path}: {exc}") from None


def shipped_profile(name: str = DEFAULT_PROFILE) -> Profile:
    return load_profile(os.path.join(PROFILE_DIR, f"{name}.json"))


def resolve_profile(profile: Profile | dict[str, Any] | str | None) -> Profile:
    """A Profile from a Profile, a profile dict, a path or shipped name, or None (the default)."""
    if profile is None:
        return shipped_profile()
    if isinstance(profile, Profile):
        return profile
    if isinstance(profile, dict):
        return profile_from_dict(profile)
    if not isinstance(profile, str):
        raise ProfileError("<profile>", f"expected a shipped profile name, a path, a profile document or a "
                                        f"Profile, got {type(profile).__name__}")
    return load_profile(profile)


def with_storage_profile(profile: Profile, name: str) -> Profile:
    """``profile`` with its checkpoint storage replaced by the named ``reference.protocol.storage_profiles`` profile
    (what ``--storage-profile`` gives the Spark engine); ``ProfileError`` naming an unknown one."""
    try:
        named = storage_profile(name)
    except StorageProfileError as exc:
        raise ProfileError("storage_profile", str(exc)) from None
    return replace(profile, storage=named)
