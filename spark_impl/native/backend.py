"""Spark's own Structured Streaming behind the backend interface of ``reference.protocol.backend`` (``--backend spark-native``)."""

from __future__ import annotations

from reference.protocol.backend import RunOptions, RunResult, refuse_too_large, refuse_unknown_options
from reference.language.scenario import Scenario
from reference.protocol.storage import SnapshotReader

from ..session import missing
from . import run_native
from .support import BACKEND


class NativeBackend:
    """The scenario's query on Spark's own operators, state store and restart logic.

    It keeps no checkpoint the reference can read (Spark's own files). It runs
    untimed (all the input at once) unless ``realtime`` is given, which paces the
    input and measures latency; ``storage_profile`` puts the checkpoint on the
    filesystem with that profile's latency (``checkpoint_fs.py``).
    """

    name = BACKEND
    options: frozenset[str] = frozenset({"master", "workdir", "storage_profile", "realtime"})
    timed = True
    snapshot_formats: dict[str, SnapshotReader] = {}

    def unavailable(self) -> str | None:
        return missing()

    def run(self, scenario: Scenario, options: RunOptions = RunOptions()) -> RunResult:
        refuse_unknown_options(self, options)
        refuse_too_large(self.name, scenario)
        return run_native(scenario, workdir=options.workdir, master=options.master, realtime=options.realtime,
                          storage_profile=options.storage_profile)
