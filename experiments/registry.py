"""The one registry of experiments: one line per experiment, its name and its folder under ``experiments/``.

An experiment is one unit, as a FoundationDB workload is: its folder ``experiments/<package>/`` holds its
definition (``definition.py``, ``EXPERIMENT``), the published claims it judges (``claims.py``, ``CLAIMS``) and its
part of the paper (``section.py``, ``write``); adding an experiment is that folder plus its line here.

The command line (``lightspeed experiment``), the paper's runs
(``paper/collect_results.py``, whose ``RUNS`` come from each definition's
``runs``) and the paper itself (``paper/build.py``, which writes every
registered section) all derive from ``EXPERIMENTS``; ``SECTIONS`` adds the
paper's sections that no experiment owns (correctness beyond the fault
matrix, the engine's speed report, the storage profiles).
"""

from __future__ import annotations

import difflib
import importlib
from dataclasses import dataclass
from types import ModuleType

from experiments.experiment import Experiment, ExperimentError


@dataclass(frozen=True)
class Entry:
    """An experiment's folder: the package ``experiments.<package>`` and the modules in it."""

    package: str

    @property
    def definition(self) -> str:
        """The module defining ``EXPERIMENT``."""
        return f"experiments.{self.package}.definition"

    @property
    def claims(self) -> str:
        """The module defining ``CLAIMS``, the published claims the experiment judges."""
        return f"experiments.{self.package}.claims"

    @property
    def section(self) -> str:
        """The module defining ``write(writeup)``, the experiment's part of the paper."""
        return f"experiments.{self.package}.section"




EXPERIMENTS: dict[str, Entry] = {
    "offset-management": Entry("offset_management"),
    "pipelining": Entry("pipelining"),
    "async-state-checkpoint": Entry("async_state_checkpoint"),
    "changelog-checkpointing": Entry("changelog_checkpointing"),
    "checkpoint-interval": Entry("checkpoint_interval"),
    "calibration": Entry("calibration"),
    "fault-matrix": Entry("fault_matrix"),
    "state-rebalancing": Entry("state_rebalancing"),
    "parallel-store-commit": Entry("parallel_store_commit"),
    "engine-vs-native": Entry("engine_vs_native"),
    "real-time-mode": Entry("real_time_mode"),
}
# experiment name -> definition module (one module per experiment)
DEFINITIONS: dict[str, str] = {name: entry.definition for name, entry in EXPERIMENTS.items()}
# the paper's sections in the order they are written: every experiment's, then the ones no experiment owns
SECTIONS: dict[str, str] = {**{name: entry.section for name, entry in EXPERIMENTS.items()},
                            "correctness": "experiments.sections.correctness",
                            "speed": "experiments.sections.speed",
                            "profiles": "experiments.sections.profiles"}


def experiment_names() -> list[str]:
    return list(EXPERIMENTS)


def get_experiment(name: str) -> Experiment:
    """The definition named ``name``; an unknown name is an ``ExperimentError`` naming the nearest and the known ones."""
    if name not in EXPERIMENTS:
        close = difflib.get_close_matches(name.replace("_", "-"), list(EXPERIMENTS), n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise ExperimentError(f"unknown experiment {name!r}{hint}; known experiments: {', '.join(EXPERIMENTS)}")
    module = importlib.import_module(EXPERIMENTS[name].definition)
    experiment = getattr(module, "EXPERIMENT", None)
    if not isinstance(experiment, Experiment) or experiment.name != name:
        raise ExperimentError(f"{EXPERIMENTS[name].definition} does not define EXPERIMENT for {name!r}")
    return experiment


def get_section(name: str) -> ModuleType:
    """The paper section module named ``name`` (an experiment's, or one of ``SECTIONS``'s others); it defines
    ``write(writeup)``."""
    if name not in SECTIONS:
        raise ExperimentError(f"unknown paper section {name!r}; known sections: {', '.join(SECTIONS)}")
    module = importlib.import_module(SECTIONS[name])
    if not callable(getattr(module, "write", None)):
        raise ExperimentError(f"{SECTIONS[name]} defines no write(writeup)")
    return module
