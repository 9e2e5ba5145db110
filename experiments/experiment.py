"""What an experiment is: its points, the sanity checks on its summary, and how a run of it was asked for.

An experiment (one folder ``experiments/<name>``, its ``definition`` module) says which points to run
(a scenario, a seed, a backend, a cost profile and what to measure), how to
summarise the measurements, which sanity checks the summary must pass, and
what figures to draw. ``experiments.sweep.run_experiment`` runs it.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from experiments.stopping import Stopping

if TYPE_CHECKING:
    from experiments.conditions import Condition

DEFAULT_MASTER = "local[*]"               # where points run as Spark tasks unless --master names another
EXECUTORS = ("spark", "processes", "inline")
# how a run's verdicts were reached (``experiments.verdicts``): on an engine, on the simulator's first-principles
# costs, on costs fitted to the very figures judged, or on costs fitted to other runs (kept here, not with the
# verdicts, so that the code a measurement reaches, ``experiments.staleness``, holds no judgement)
MEASURED, FIRST_PRINCIPLES, FITTED, FITTED_ELSEWHERE = (
    "measured", "first principles", "fitted to the claim", "fitted to other runs")


class ExperimentError(ValueError):
    """Bad input to an experiment: an unknown experiment, backend, executor or option value."""


@dataclass(frozen=True)
class Point:
    """One measurement of a sweep: everything needed to run it again, and nothing else.

    ``task`` names what the experiment measures for this point (its
    ``measure`` method dispatches on it); ``params`` are the sweep
    coordinates; ``profile`` is the full cost profile document for the sim
    backend (so a result file alone reproduces the point), None otherwise;
    ``sim_mode`` is the simulator's mode (the sim backend only). ``extra``
    holds what else the measurement needs (a Spark backend's ``master``,
    ``group`` and ``straggler``, crash counts, ...).
    """

    experiment: str
    task: str
    config: str
    params: dict[str, Any]
    seed: int
    backend: str
    scenario: dict[str, Any]
    profile: dict[str, Any] | None = None
    sim_mode: str = "data"
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> str:
        coords = ",".join(f"{k}={_short(v)}" for k, v in sorted(self.params.items()))
        return f"{self.task}/{self.config}" + (f"/{coords}" if coords else "") + f"/seed={self.seed}"

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["id"] = self.id
        return out

    @staticmethod
    def from_dict(raw: dict[str, Any]) -> "Point":
        known = {k: raw[k] for k in ("experiment", "task", "config", "params", "seed", "backend", "scenario",
                                     "profile", "sim_mode", "extra") if k in raw}
        return Point(**known)


def _short(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


@dataclass(frozen=True)
class Check:
    """A sanity check on a summary: a trend or bound the model implies, or a correctness condition.

    ``ok`` False fails the run (exit code 1): a real inversion or a correctness problem. ``ok`` None decides
    nothing: not applicable, or (``within_noise``) a comparison whose difference is inside the spread the run
    measured over its seeds, or that one seed cannot judge (``experiments.sanity``).
    """

    name: str
    ok: bool | None
    detail: str
    within_noise: bool = False

    def describe(self) -> str:
        mark = "NOISE" if self.within_noise else {True: "PASS", False: "FAIL", None: "N/A "}[self.ok]
        return f"[{mark}] {self.name}: {self.detail}"


@dataclass
class RunContext:
    """How this run of an experiment was asked for."""

    backend: str = "sim"
    quick: bool = False
    seeds: int | None = None
    out_dir: Path | None = None
    executor: str = "spark"
    master: str = DEFAULT_MASTER            # where points run as Spark tasks (executor "spark")
    workers: int | None = None
    figures: bool = True
    quiet: bool = False                     # no progress bar
    backend_master: str | None = None       # --master given explicitly: the Spark backends run there too
    point_timeout_s: float | None = None    # a point on a Spark backend taking longer fails (None: the experiment's)
    storage_profile: str | None = None      # every point's checkpoint storage: a reference.protocol.storage_profiles name
    deadline: float | None = None           # no point is started unless expected to end by then (epoch seconds)
    fresh: bool = False                     # measure every point again, reusing no unit of the ledger

    @property
    def mode(self) -> str:
        return "quick" if self.quick else "full"


@dataclass(frozen=True)
class BackendRun:
    """An experiment on one backend: how long each mode takes on this project's 2-core machine (minutes,
    measured where a run was timed, else estimated from its points) and the options of the paper's run."""

    quick_minutes: float
    full_minutes: float
    options: tuple[str, ...] = ()


class Experiment:
    """Base class of an experiment definition; one subclass instance per module (``EXPERIMENT``).

    A definition sets ``name``, ``version`` (bump it whenever its points or
    metrics change, so old result files are not mixed with new ones),
    ``title``, ``claim`` (the published claim under test, for the report),
    ``runs`` (the backends it runs on, with their times and the paper's
    options) and the seed counts, and implements ``points``, ``measure``,
    ``summarize``, ``checks`` and ``figures``. ``conditions`` says under what
    the published claim was measured and how a run meets it;
    ``storage_default`` names the checkpoint storage a backend uses unless
    ``--storage-profile`` names another, so that a run with the defaults tests
    the claim under its conditions.
    """

    name = ""
    version = "1"
    title = ""
    claim = ""
    runs: dict[str, BackendRun] = {"sim": BackendRun(1.0, 10.0)}
    # backends the experiment does not run on, with the reason (the paper says it beside the missing column)
    unsupported: dict[str, str] = {}
    default_backend = "sim"
    storage_default: dict[str, str] = {}
    seeds_quick = 1
    seeds_full = 3
    base_seed = 1
    # True: when some points cannot run (a backend is missing), summarise the others and say what is missing
    partial_ok = False
    # a point on a Spark backend that takes longer than this is recorded as failed and the backend as stuck
    point_timeout_s = 900.0
    # adaptive stopping of its timed points (experiments.stopping): None, each point runs once as defined
    stopping: Stopping | None = None

    # -- what to run
    def points(self, ctx: RunContext) -> list[Point]:
        raise NotImplementedError

    def measure(self, point: Point) -> dict[str, Any]:
        """Run one point and return its metrics (numbers, lists, small dicts). Runs in a worker."""
        raise NotImplementedError

    # -- what it means
    def summarize(self, records: list[dict[str, Any]], ctx: RunContext) -> dict[str, Any]:
        raise NotImplementedError

    def summarize_again(self, records: list[dict[str, Any]], stored: dict[str, Any], ctx: RunContext
                        ) -> dict[str, Any]:
        """The summary of a stored run's records judged again (``--resummarize``), given the summary it stored:
        by default ``summarize`` itself; an experiment whose summary is costly to recompute may reuse the stored
        parts that no judgement changed, and say so in the summary."""
        return self.summarize(records, ctx)

    def checks(self, summary: dict[str, Any], ctx: RunContext) -> list[Check]:
        return []

    def report(self, summary: dict[str, Any], ctx: RunContext) -> list[str]:
        """Lines for the terminal: the headline numbers against the claim."""
        return []

    def figures(self, summary: dict[str, Any], ctx: RunContext, out_dir: Path) -> list[Path]:
        return []

    def conditions(self, ctx: RunContext) -> list["Condition"]:
        """The conditions the published claim was measured under, as a run on ``ctx.backend`` meets them."""
        return []

    def write_artifacts(self, summary: dict[str, Any], ctx: RunContext, out_dir: Path) -> list[Path]:
        """Files besides results.json and the figures (e.g. a fitted profile); written whenever there is a summary."""
        return []

    # -- helpers for definitions
    @property
    def backends(self) -> tuple[str, ...]:
        return tuple(self.runs)

    def basis(self, ctx: RunContext) -> str:
        """How this run's verdicts were reached (``experiments.verdicts``): measured on an engine, or on the
        simulator's first-principles costs."""
        return FIRST_PRINCIPLES if ctx.backend == "sim" else MEASURED

    def storage(self, ctx: RunContext) -> str | None:
        """The checkpoint storage of this run's points: ``--storage-profile`` when given, else the experiment's
        default for the backend (None: the backend's own, local disk for the engine)."""
        return ctx.storage_profile or self.storage_default.get(ctx.backend)

    def paper_command(self, backend: str, quick: bool = False, seeds: int | None = None) -> str:
        """The command that makes the paper's run on ``backend`` (its full mode unless ``quick``; the mode's
        default seeds unless ``seeds``)."""
        options = " ".join(self.runs[backend].options)
        seeds = seeds or (self.seeds_quick if quick else self.seeds_full)
        return (f"lightspeed experiment {self.name} --backend {backend}" + (" --quick" if quick else "")
                + f" --seeds {seeds}" + (f" {options}" if options else ""))

    def seed_list(self, ctx: RunContext) -> list[int]:
        count = ctx.seeds if ctx.seeds is not None else (self.seeds_quick if ctx.quick else self.seeds_full)
        return [self.base_seed + i for i in range(count)]

    def describe(self) -> str:
        return f"{self.name} (v{self.version}): {self.title}"


def json_ready(value: Any) -> Any:
    """A JSON-ready copy of metrics or a summary: numpy scalars to Python numbers, floats rounded to 6 places
    (NaN and infinities to None), tuples to lists, keys to strings."""
    if isinstance(value, dict):
        return {str(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return None
        return round(value, 6)
    return value
