"""Spark's own Structured Streaming behind the backend interface of ``reference.backend`` (``--backend spark-native``)."""

from __future__ import annotations

from reference.backend import RunOptions, RunResult, refuse_too_large, refuse_unknown_options
from reference.scenario import Scenario
from reference.storage import SnapshotReader

from ..session import missing
from . import run_native
from .support import BACKEND


class NativeBackend:
    """The scenario's query on Spark's own operators, state store and restart logic.

    It keeps no checkpoint the reference can read (Spark's own files), and runs
    untimed (all the input at once) through this interface; ``run_native(...,
    realtime=True)`` paces the input and measures latency.
    """

    name = BACKEND
    options: frozenset[str] = frozenset({"master", "workdir"})
    timed = True
    snapshot_formats: dict[str, SnapshotReader] = {}

    def unavailable(self) -> str | None:
        return missing()

    def run(self, scenario: Scenario, options: RunOptions = RunOptions()) -> RunResult:
        refuse_unknown_options(self, options)
        refuse_too_large(self.name, scenario)
        return run_native(scenario, workdir=options.workdir, master=options.master)
