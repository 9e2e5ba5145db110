"""The backend interface of spec section 4, declared once: a scenario and options in, a run result out.

Every backend (the reference model here, the simulator in ``sim/``, the
PySpark engine and the native Spark adapter in ``spark_impl/``) implements
``Backend``. The command line, the experiments and the tests reach them by
name through one registry (``experiments/backends.py``, the only place that
imports every backend). A backend that cannot run here raises
``BackendUnavailable`` naming what is missing (Java, pyspark, a free port); one
that cannot run a scenario raises ``ScenarioRefused`` naming the field and
why; an option it does not take is refused with ``OptionRefused``. Library
code never exits the process.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Protocol

from .outcome import Outcome
from .run import run_scenario
from ..language.scenario import Scenario
from ..language.size import MATERIALISED, SizeLimits, refusal
from .storage import SnapshotReader, Storage


class BackendError(Exception):
    """Base of the errors a backend raises instead of producing an outcome."""


class BackendUnavailable(BackendError):
    """The backend cannot run on this machine; ``missing`` says what is missing."""

    def __init__(self, backend: str, missing: str):
        super().__init__(f"backend {backend} is not available here: {missing}")
        self.backend, self.missing = backend, missing


class ScenarioRefused(BackendError):
    """The backend cannot run this scenario; ``field`` names the scenario field, ``reason`` says why."""

    def __init__(self, backend: str, field: str, reason: str):
        super().__init__(f"backend {backend} refuses {field}: {reason}")
        self.backend, self.field, self.reason = backend, field, reason


class OptionRefused(BackendError):
    """An option was given to a backend that does not take it."""

    def __init__(self, backend: str, option: str, takes: frozenset[str]):
        accepted = ", ".join(sorted(takes)) or "no options"
        super().__init__(f"backend {backend} does not take --{option.replace('_', '-')} (it takes {accepted})")
        self.backend, self.option = backend, option


@dataclass(frozen=True)
class RunOptions:
    """How to run a scenario. Each backend takes some of these (``Backend.options``); the rest must be unset."""

    profile: Any = None                       # sim: a cost profile (shipped name, path, dict or Profile)
    sim_mode: str = "data"                    # sim: "data" (real records) or "volume" (counts, at scale)
    master: str | None = None                 # spark backends: local[N] or spark://host:port
    workdir: str | None = None                # spark backends: where the checkpoint and work files go
    crash: str = "in-process"                 # spark engine: a driver_crash drops the incarnation or SIGKILLs
    group: int = 1                            # spark engine: batches per Spark job (group scheduling)
    straggler: tuple[float, float, int] | None = None   # spark engine: (probability, extra ms, seed)
    pace: bool = True                         # spark engine: plan a batch only once its input has arrived
    storage_profile: str | None = None        # spark backends: sleep each checkpoint operation's latency from a
                                              # reference.protocol.storage_profiles profile (local_disk, hdfs, object_store)
    realtime: bool = False                    # spark-native: feed the input as it arrives and measure latency
                                              # (the engine always paces its input: pace)

    def given(self) -> list[str]:
        """The options set to something other than their default."""
        return [f.name for f in fields(self) if getattr(self, f.name) != f.default]


@dataclass(frozen=True)
class RunResult:
    """What a backend returns: the outcome, and a handle on the checkpoint storage (None if it keeps none
    the reference can read)."""

    outcome: Outcome
    checkpoint: Storage | None


class Backend(Protocol):
    """A way to run a scenario. ``run`` never raises for a fault the scenario plants: a run that fails
    loudly has ``outcome.error`` set."""

    name: str
    options: frozenset[str]            # the RunOptions fields this backend takes
    timed: bool                        # whether outcomes carry a timing block
    snapshot_formats: dict[str, SnapshotReader]   # metadata snapshot_format -> reader, for foreign snapshots

    def unavailable(self) -> str | None:
        """None when the backend can run here, else what is missing."""
        ...

    def run(self, scenario: Scenario, options: RunOptions = RunOptions()) -> RunResult:
        ...


def refuse_unknown_options(backend: Backend, options: RunOptions) -> None:
    """``OptionRefused`` for the first option given that ``backend`` does not take."""
    for name in options.given():
        if name not in backend.options:
            raise OptionRefused(backend.name, name, backend.options)


def refuse_too_large(backend: str, scenario: Scenario, limits: SizeLimits = MATERIALISED) -> None:
    """``ScenarioRefused`` with the numbers when the backend cannot fit the scenario (``size.refusal``: which
    limit it passes, and the simulator's volume mode where that is the way to run it); every backend calls it
    before it spends anything on the scenario."""
    why = refusal(scenario, limits)
    if why is not None:
        raise ScenarioRefused(backend, "source", why)


class ReferenceBackend:
    """The executable spec itself: sequential, untimed, in memory."""

    name = "reference"
    options: frozenset[str] = frozenset()
    timed = False
    snapshot_formats: dict[str, SnapshotReader] = {}

    def unavailable(self) -> str | None:
        return None

    def run(self, scenario: Scenario, options: RunOptions = RunOptions()) -> RunResult:
        refuse_unknown_options(self, options)
        refuse_too_large(self.name, scenario)
        finished = run_scenario(scenario)
        return RunResult(finished.outcome(), finished.storage)
