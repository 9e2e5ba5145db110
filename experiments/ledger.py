"""The ledger of measurement units: what is measured, where it came from, and whether it still holds (issue 39).

A **unit** is one point x seed of one experiment on one backend and mode
(an ``experiments.experiment.Point``: its id ends in ``seed=N``). Each unit is
written to its run's results folder as soon as it ends, atomically, with its
provenance::

    <results dir>/units/<point id>.json       one per unit (the id quoted: ``/`` as ``%2F``)
    <results dir>/units/code/<key>.json       the parts of each code key the units name
    <results dir>/results.json                assembled from the units once every planned unit has one

where ``<results dir>`` is ``paper/results/<experiment>/<backend>-<mode>/``
for the paper (``paper/collect_results.py``) and
``results/experiments/<experiment>/<backend>-<mode>/`` for a user's
``lightspeed experiment``. A unit holds the point's record (its point,
metrics or error, wall time, and how adaptive stopping ended it) and its
provenance: the commit, whether the tree was dirty, when it started and
ended, how busy the machine was (``experiments.machine_load``) and the key
of the code it measured (``experiments.staleness``).

**Status.** Each planned unit of a run is exactly one of:

- ``missing``: no unit file (or one that cannot be read);
- ``stale``: the code it measured changed since (its code key differs from
  the same code's key at HEAD, by the rule of ``experiments.staleness``), or
  the experiment's version or the point itself changed, or it was measured
  before the ledger (a ``results.json`` with no units);
- ``failed``: its measurement raised (the record holds the error);
- ``dirty``: measured from a tree with uncommitted changes;
- ``noisy``: other processes used more than ``machine_load.NOISY_SHARE`` of
  the machine's CPU while it ran (wall-clock backends only);
- ``fresh``: none of the above.

Nothing is ever marked fresh by hand: the status is computed from the unit
file and HEAD every time. A run's verdicts may be given only when every one
of its units is fresh and it has at least ``MIN_VERDICT_SEEDS`` seeds; a run
with fewer seeds is *exploratory* (``RunStatus``).

**Resuming.** A run reuses every unit whose code key equals the working
tree's, whose point and experiment version are the planned ones, and which
neither failed nor was noisy (nor was measured from a dirty tree, when this
one is clean); it runs only the others. An interrupted run
therefore resumes at the next missing unit, and no finished unit runs twice.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import platform
import re
import urllib.parse
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from experiments.experiment import Experiment, ExperimentError, Point, RunContext, json_ready
from experiments.output_paths import OutputPathError, write_text
from experiments.provenance import OUTPUTS
from experiments.staleness import CodeKey, GitCommit, SourceTree, StalenessError, WorkTree, measured_code

if TYPE_CHECKING:
    from experiments.machine_load import Load

FRESH, STALE, DIRTY, NOISY, FAILED, MISSING = "fresh", "stale", "dirty", "noisy", "failed", "missing"
# every status, from the best to the worst; a run's summary lists them in this order
STATUSES = (FRESH, NOISY, DIRTY, FAILED, STALE, MISSING)
# the units a collection for the paper measures again (``make paper-results``): every one that is not fresh
RERUN = frozenset({NOISY, DIRTY, FAILED, STALE, MISSING})
MIN_VERDICT_SEEDS = 3       # no verdict rests on fewer seeds; a run with fewer is exploratory
LEDGER_FORMAT = 1           # the version of the unit file's layout
UNITS = "units"
CODE = "code"
MAX_NAME = 180              # a unit file's name is cut (and a hash added) beyond this many characters
# what a collection writes into the tree while it runs; a change there does not make the tree dirty


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


# ------------------------------------------------------------------ what a run plans


@dataclass(frozen=True)
class RunPlan:
    """One run of an experiment: on one backend, in one mode, with the seeds and storage it asks for.
    Its units are the points ``Experiment.points`` plans for it."""

    experiment: str
    backend: str
    mode: str                                 # "quick" or "full"
    seeds: int | None = None                  # None: the experiment's default for the mode
    storage_profile: str | None = None        # None: the experiment's default for the backend

    def __post_init__(self) -> None:
        if self.mode not in ("quick", "full"):
            raise ExperimentError(f"a run's mode is quick or full, not {self.mode!r}")

    @property
    def label(self) -> str:
        return f"{self.experiment} on {self.backend}, {self.mode}"

    @property
    def folder(self) -> str:
        """The results folder's name: ``<backend>-<mode>`` (and ``-<storage>`` when one was named)."""
        return f"{self.backend}-{self.mode}" + (f"-{self.storage_profile}" if self.storage_profile else "")

    def context(self, **more: Any) -> RunContext:
        return RunContext(backend=self.backend, quick=self.mode == "quick", seeds=self.seeds,
                          storage_profile=self.storage_profile, **more)

    def points(self) -> list[Point]:
        """The planned points (every unit of the run), as the runner plans them."""
        from experiments.registry import get_experiment
        return planned_points(get_experiment(self.experiment), self.context())


def with_storage_profile(points: list[Point], name: str | None, *, default: str | None = None) -> list[Point]:
    """Every point with its checkpoint storage named (``extra["storage_profile"]``, which ``point_options``
    hands to the backend), so that a results file alone reproduces it: ``name`` (``--storage-profile``) for
    every point; else ``default`` (the experiment's, for the claim's conditions) for every point that does not
    choose its own (a point that sets ``storage_profile`` to None keeps the backend's local disk)."""
    if name is not None:
        return [replace(p, extra={**p.extra, "storage_profile": name}) for p in points]
    if default is None:
        return points
    return [p if "storage_profile" in p.extra else replace(p, extra={**p.extra, "storage_profile": default})
            for p in points]


def planned_points(experiment: Experiment, ctx: RunContext) -> list[Point]:
    """The points a run of ``experiment`` plans (its units): the definition's, with their checkpoint storage
    named; ``ExperimentError`` when two share an id."""
    points = with_storage_profile(experiment.points(ctx), ctx.storage_profile,
                                  default=experiment.storage_default.get(ctx.backend))
    ids = [p.id for p in points]
    if len(set(ids)) != len(ids):
        duplicate = next(i for i in ids if ids.count(i) > 1)
        raise ExperimentError(f"experiment {experiment.name} defines point {duplicate} more than once")
    return points


# ------------------------------------------------------------------ unit files


@dataclass(frozen=True)
class Provenance:
    """Where a unit came from: the commit and whether the tree was dirty, when it ran, on which machine, how busy
    the machine was (``Load.to_dict()``; None when it could not be read) and the key of the code it measured."""

    commit: str | None
    dirty: bool
    started_at: str
    finished_at: str
    host: str
    code_key: str
    load: dict[str, Any] | None = None

    @property
    def noisy(self) -> bool:
        return bool(self.load and self.load.get("noisy"))

    def to_dict(self) -> dict[str, Any]:
        return {"commit": self.commit, "dirty": self.dirty, "started_at": self.started_at,
                "finished_at": self.finished_at, "host": self.host, "code_key": self.code_key, "load": self.load}

    @staticmethod
    def from_dict(raw: Mapping[str, Any]) -> "Provenance":
        return Provenance(raw.get("commit"), bool(raw.get("dirty")), str(raw.get("started_at")),
                          str(raw.get("finished_at")), str(raw.get("host")), str(raw["code_key"]), raw.get("load"))


@dataclass(frozen=True)
class Unit:
    """A stored unit: its point's record (``experiments.execution`` records: ``id``, ``point``, ``metrics`` or
    ``error``, ``wall_s``, ``stopping``) and its provenance."""

    experiment: str
    version: str
    backend: str
    mode: str
    record: dict[str, Any]
    provenance: Provenance

    @property
    def point_id(self) -> str:
        return str(self.record["id"])

    @property
    def seed(self) -> int:
        return int(self.record["point"]["seed"])

    @property
    def failed(self) -> bool:
        return bool(self.record.get("error"))

    def to_dict(self) -> dict[str, Any]:
        return {"ledger": LEDGER_FORMAT, "experiment": self.experiment, "version": self.version,
                "backend": self.backend, "mode": self.mode, "unit": self.point_id,
                "provenance": self.provenance.to_dict(), "record": self.record}

    @staticmethod
    def from_dict(raw: Mapping[str, Any]) -> "Unit":
        if raw.get("ledger") != LEDGER_FORMAT:
            raise ValueError(f"ledger format {raw.get('ledger')!r}, expected {LEDGER_FORMAT}")
        record = raw["record"]
        if not isinstance(record, dict) or "id" not in record or "point" not in record:
            raise ValueError("its record has no id or point")
        return Unit(str(raw["experiment"]), str(raw["version"]), str(raw["backend"]), str(raw["mode"]), record,
                    Provenance.from_dict(raw["provenance"]))


def unit_file(results_dir: Path, point_id: str) -> Path:
    """Where a unit is kept: ``units/<point id>.json``, the id quoted so that it is one file name."""
    name = urllib.parse.quote(point_id, safe="=,+-.@_")
    if len(name) > MAX_NAME:
        name = name[:MAX_NAME - 13] + "~" + hashlib.sha256(point_id.encode()).hexdigest()[:12]
    return results_dir / UNITS / f"{name}.json"


CODE_KEY = re.compile(r"[0-9a-f]{64}")   # a code key as ``staleness.CodeKey.of`` makes it


def write_unit(results_dir: Path, unit: Unit, code: CodeKey) -> Path:
    """Write a unit (and, once, the parts of its code key) whole or not at all (``output_paths.write_text``); the
    unit file's path."""
    for folder in (results_dir / UNITS, results_dir / UNITS / CODE):
        if folder.is_symlink():   # the ledger's own folders: a link there would take its writes elsewhere
            raise OutputPathError(f"{folder}: is a symbolic link; the ledger writes its units only into folders "
                                  "of its own")
    code_file = results_dir / UNITS / CODE / f"{code.key}.json"
    if not code_file.exists():
        write_text(code_file, json.dumps(code.to_dict(), indent=0, sort_keys=True) + "\n", "a code key's parts")
    return write_text(unit_file(results_dir, unit.point_id),
                      json.dumps(json_ready(unit.to_dict()), indent=1, sort_keys=True) + "\n", "a measured unit")


@dataclass(frozen=True)
class Unreadable:
    """A unit file that cannot be read as one (it then counts as missing, and is measured again)."""

    path: Path
    reason: str


def read_units(results_dir: Path) -> dict[str, Unit | Unreadable]:
    """Every unit file of a results folder, by point id (an unreadable one by its file name)."""
    out: dict[str, Unit | Unreadable] = {}
    folder = results_dir / UNITS
    if not folder.is_dir():
        return out
    for path in sorted(folder.glob("*.json")):
        try:
            unit = Unit.from_dict(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            out[path.stem] = Unreadable(path, f"{type(exc).__name__}: {exc}")
            continue
        out[unit.point_id] = unit
    return out


def read_code(results_dir: Path, key: str) -> CodeKey | None:
    """The parts of a code key a unit names, when its file is there (a key that is not a SHA-256 in hex, as a
    tampered unit file may hold, names no file: it is never made a path)."""
    if not CODE_KEY.fullmatch(key):
        return None
    try:
        return CodeKey.from_dict(json.loads((results_dir / UNITS / CODE / f"{key}.json").read_text()))
    except (OSError, ValueError, StalenessError):
        return None


def comparable(point: Mapping[str, Any]) -> dict[str, Any]:
    """A point as JSON, without where it ran (``extra.master``): two points are the same measurement when these
    are equal."""
    out = json.loads(json.dumps(json_ready(dict(point))))
    out.pop("id", None)
    out["extra"] = {k: v for k, v in (out.get("extra") or {}).items() if k != "master"}
    return out


# ------------------------------------------------------------------ the code behind a run


class CodeKeys:
    """The code keys of runs in one source tree (HEAD, or the working tree), computed once per experiment and
    backend."""

    def __init__(self, tree: SourceTree):
        self.tree = tree
        self._keys: dict[tuple[str, tuple[str, ...]], CodeKey] = {}

    @staticmethod
    def at_head() -> "CodeKeys":
        """The keys at HEAD; the working tree's when this is not a git checkout (then every unit is dirty)."""
        try:
            return CodeKeys(GitCommit("HEAD"))
        except StalenessError:
            return CodeKeys(WorkTree())

    def key(self, experiment: str, backends: Iterable[str]) -> CodeKey:
        """The key of a run of ``experiment`` whose points run on ``backends``."""
        wanted = tuple(sorted(set(backends)))
        if (experiment, wanted) not in self._keys:
            from experiments.registry import DEFINITIONS
            if experiment not in DEFINITIONS:
                raise ExperimentError(f"unknown experiment {experiment!r}")
            self._keys[(experiment, wanted)] = measured_code(DEFINITIONS[experiment], wanted, backend_modules(),
                                                             self.tree)
        return self._keys[(experiment, wanted)]


def backend_modules() -> dict[str, str]:
    """Backend name -> the module that holds it (``experiments.backends.BACKENDS``)."""
    from experiments.backends import BACKENDS
    return {name: entry.module for name, entry in BACKENDS.items()}


def run_backends(backend: str, points: Iterable[Point]) -> tuple[str, ...]:
    """The backends a run's points run on: its own, and any other a point names (engine-vs-native)."""
    return tuple(sorted({backend, *(p.backend for p in points)}))


# ------------------------------------------------------------------ status


@dataclass(frozen=True)
class UnitStatus:
    """One planned unit's status (``STATUSES``) and why; its commit and end time when it was measured."""

    unit_id: str              # "<experiment>/<results folder>/<point id>"
    point_id: str
    seed: int
    status: str
    reason: str = ""
    commit: str | None = None
    finished_at: str | None = None


@dataclass(frozen=True)
class RunStatus:
    """Every planned unit of one run, and what may be said from them."""

    plan: RunPlan
    results_dir: Path
    units: dict[str, UnitStatus]
    seeds: tuple[int, ...]

    def counts(self) -> dict[str, int]:
        out = {s: 0 for s in STATUSES}
        for unit in self.units.values():
            out[unit.status] += 1
        return out

    @property
    def complete(self) -> bool:
        """Every unit fresh: measured at HEAD's code, from a clean tree, on a quiet machine."""
        return all(u.status == FRESH for u in self.units.values())

    @property
    def exploratory(self) -> bool:
        """Fewer than ``MIN_VERDICT_SEEDS`` seeds: its numbers are shown, no verdict rests on them."""
        return len(self.seeds) < MIN_VERDICT_SEEDS

    @property
    def verdicts_allowed(self) -> bool:
        return self.complete and not self.exploratory and bool(self.units)

    @property
    def commits(self) -> tuple[str, ...]:
        """The commits its measured units were made at, oldest first by their units' end times."""
        measured = sorted((u.finished_at or "", u.commit) for u in self.units.values() if u.commit)
        out: list[str] = []
        for _at, commit in measured:
            if commit not in out:
                out.append(commit)
        return tuple(out)

    def to_dict(self) -> dict[str, Any]:
        return {"experiment": self.plan.experiment, "backend": self.plan.backend, "mode": self.plan.mode,
                "results_dir": str(self.results_dir), "counts": self.counts(), "seeds": list(self.seeds),
                "complete": self.complete, "exploratory": self.exploratory,
                "verdicts_allowed": self.verdicts_allowed, "commits": list(self.commits),
                "units": {k: vars(v) for k, v in self.units.items()}}


def _stale_reason(results_dir: Path, unit: Unit, head: CodeKey) -> str:
    mine = read_code(results_dir, unit.provenance.code_key)
    if mine is None:
        return "its code changed (the parts of its code key are not recorded)"
    changed = mine.changed(head)
    shown = ", ".join(changed[:3]) + (f" and {len(changed) - 3} more" if len(changed) > 3 else "")
    return f"changed since: {shown}"


def unit_status(results_dir: Path, point: Point, stored: Unit | Unreadable | None, experiment: Experiment,
                head: CodeKey, unit_id: str) -> UnitStatus:
    """The status of one planned unit, given its stored file (if any) and the run's code key at HEAD."""
    if stored is None:
        return UnitStatus(unit_id, point.id, point.seed, MISSING, "not measured")
    if isinstance(stored, Unreadable):
        return UnitStatus(unit_id, point.id, point.seed, MISSING, f"unreadable unit file: {stored.reason}")
    seen = dict(commit=stored.provenance.commit, finished_at=stored.provenance.finished_at)
    if stored.version != experiment.version:
        return UnitStatus(unit_id, point.id, point.seed, STALE,
                          f"measured by version {stored.version} of the experiment; it is at {experiment.version}",
                          **seen)
    if comparable(stored.record["point"]) != comparable(point.to_dict()):
        return UnitStatus(unit_id, point.id, point.seed, STALE, "the planned point is no longer the one measured",
                          **seen)
    if stored.provenance.code_key != head.key:
        return UnitStatus(unit_id, point.id, point.seed, STALE, _stale_reason(results_dir, stored, head), **seen)
    if stored.failed:
        return UnitStatus(unit_id, point.id, point.seed, FAILED, str(stored.record.get("error")), **seen)
    if stored.provenance.dirty:
        return UnitStatus(unit_id, point.id, point.seed, DIRTY, "measured from a tree with uncommitted changes",
                          **seen)
    if stored.provenance.noisy:
        load = stored.provenance.load or {}
        return UnitStatus(unit_id, point.id, point.seed, NOISY,
                          f"other processes used {100 * float(load.get('other_share') or 0):.0f}% of the CPU "
                          f"(more than {100 * float(load.get('threshold') or 0):.0f}%)", **seen)
    return UnitStatus(unit_id, point.id, point.seed, FRESH, "", **seen)


def _legacy_reason(results_dir: Path) -> str | None:
    """Why the units of a run measured before the ledger are stale: it has a results.json and no unit files."""
    results = results_dir / "results.json"
    if (results_dir / UNITS).is_dir() or not results.exists():
        return None
    try:
        git = (json.loads(results.read_text()).get("environment") or {}).get("git") or {}
    except (OSError, ValueError):
        git = {}
    commit = (git.get("commit") or "?")[:10]
    return f"measured before the ledger (results.json only, commit {commit}{', dirty' if git.get('dirty') else ''})"


def run_status(results_dir: Path, plan: RunPlan | None = None, head: CodeKeys | None = None) -> RunStatus:
    """Every planned unit of the run stored in ``results_dir`` and its status. ``plan`` defaults to what the
    folder says (``<experiment>/<backend>-<mode>``); ``head`` to the code keys at HEAD."""
    from experiments.registry import get_experiment
    plan = plan or plan_of_folder(results_dir)
    head = head or CodeKeys.at_head()
    experiment = get_experiment(plan.experiment)
    points = plan.points()
    key = head.key(plan.experiment, run_backends(plan.backend, points))
    stored = read_units(results_dir)
    legacy = _legacy_reason(results_dir)
    out: dict[str, UnitStatus] = {}
    for point in points:
        unit_id = f"{plan.experiment}/{results_dir.name}/{point.id}"
        if legacy is not None:
            out[unit_id] = UnitStatus(unit_id, point.id, point.seed, STALE, legacy)
        else:
            out[unit_id] = unit_status(results_dir, point, stored.get(point.id), experiment, key, unit_id)
    seeds = tuple(sorted({u.seed for u in out.values()}))
    return RunStatus(plan, results_dir, out, seeds)


def status(results_dir: Path, plan: RunPlan | None = None, head: CodeKeys | None = None) -> dict[str, UnitStatus]:
    """Unit id -> status of every planned unit of the run stored in ``results_dir`` (``run_status``)."""
    return run_status(results_dir, plan, head).units


def plan_of_folder(results_dir: Path) -> RunPlan:
    """The run a results folder holds, from its path: ``.../<experiment>/<backend>-<mode>[-<storage>]``."""
    from experiments.backends import BACKEND_NAMES
    name = results_dir.name
    for backend in sorted(BACKEND_NAMES, key=len, reverse=True):
        for mode in ("quick", "full"):
            prefix = f"{backend}-{mode}"
            if name == prefix or name.startswith(prefix + "-"):
                storage = name[len(prefix) + 1:] or None
                return RunPlan(results_dir.parent.name, backend, mode, None, storage)
    raise ExperimentError(f"{results_dir}: not a run's results folder (<experiment>/<backend>-<mode>)")


# ------------------------------------------------------------------ the runner's side


@dataclass
class Ledger:
    """The units of one run being measured: which may be reused, and writing each new one as it ends.

    ``code`` is the key of the working tree's code for the run, taken when the run starts; ``revision`` the
    commit and dirtiness then (each unit checks the tree again when it ends, so a change made while the run goes
    on marks the later units dirty)."""

    results_dir: Path
    experiment: Experiment
    ctx: RunContext
    code: CodeKey
    revision: dict[str, Any] | None
    reused: list[str] = field(default_factory=list)

    @staticmethod
    def open(results_dir: Path, experiment: Experiment, ctx: RunContext, points: Iterable[Point],
             tree: SourceTree | None = None) -> "Ledger":
        """The ledger of a run about to measure ``points``, with the key of the working tree's code for them."""
        from experiments.provenance import git_revision
        code = CodeKeys(tree or WorkTree()).key(experiment.name, run_backends(ctx.backend, points))
        return Ledger(results_dir, experiment, ctx, code, git_revision(exclude=OUTPUTS))

    def reusable(self, points: Iterable[Point]) -> dict[str, dict[str, Any]]:
        """Point id -> the stored record of every planned point whose unit may be reused: the same point, the
        same experiment version and the same code as this run, neither failed nor noisy, and not measured from a
        dirty tree when this one is clean."""
        stored = read_units(self.results_dir)
        out: dict[str, dict[str, Any]] = {}
        for point in points:
            unit = stored.get(point.id)
            if not isinstance(unit, Unit) or unit.failed or unit.provenance.noisy:
                continue
            if unit.provenance.dirty and not self.tree_dirty:
                continue        # measured from uncommitted changes: a clean tree measures it again
            if unit.version != self.experiment.version or unit.provenance.code_key != self.code.key:
                continue
            if comparable(unit.record["point"]) != comparable(point.to_dict()):
                continue
            out[point.id] = unit.record
        self.reused = list(out)
        return out

    @property
    def tree_dirty(self) -> bool:
        """Whether this run's tree has uncommitted changes (or is no git checkout, so that nothing says it is
        clean)."""
        return self.revision is None or bool(self.revision.get("dirty"))

    def expected_unit_s(self) -> float | None:
        """The mean wall time of the run's units measured so far (None before the first): what the next unit is
        expected to take, for the budget."""
        walls = [float(u.record.get("wall_s") or 0.0) for u in read_units(self.results_dir).values()
                 if isinstance(u, Unit) and u.version == self.experiment.version]
        return sum(walls) / len(walls) if walls else None

    def summary(self, records: Iterable[dict[str, Any]]) -> dict[str, Any]:
        """What ``results.json`` says of the units it was assembled from: how many, how many were reused from
        earlier runs, the commits they were measured at (oldest first), and how many were dirty or noisy."""
        stored = read_units(self.results_dir)
        units = [u for r in records for u in [stored.get(str(r["id"]))] if isinstance(u, Unit)]
        commits: list[str] = []
        for unit in sorted(units, key=lambda u: u.provenance.finished_at):
            if unit.provenance.commit and unit.provenance.commit not in commits:
                commits.append(unit.provenance.commit)
        return {"units": len(units), "reused": len(self.reused), "commits": commits,
                "dirty": sum(u.provenance.dirty for u in units), "noisy": sum(u.provenance.noisy for u in units),
                "code_key": self.code.key}

    def write(self, record: dict[str, Any], started_at: str, load: "Load | None") -> Path:
        """The unit of a finished point, written atomically with its provenance."""
        from experiments.provenance import git_revision
        revision = git_revision(exclude=OUTPUTS) or {}
        moved = self.revision is not None and revision.get("commit") != self.revision.get("commit")
        provenance = Provenance(revision.get("commit"), bool(revision.get("dirty")) or moved or not revision,
                                started_at, _now(), platform.node(), self.code.key,
                                load.to_dict() if load is not None else None)
        unit = Unit(self.experiment.name, self.experiment.version, self.ctx.backend, self.ctx.mode,
                    dict(record), provenance)
        return write_unit(self.results_dir, unit, self.code)
