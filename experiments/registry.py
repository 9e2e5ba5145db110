"""The one registry of experiments: a name to its definition module and its paper section.

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
    """An experiment's definition module (``EXPERIMENT``) and its paper section module (``write``)."""

    definition: str
    section: str


def _entry(module: str) -> Entry:
    return Entry(f"experiments.defs.{module}", f"experiments.sections.{module}")


EXPERIMENTS: dict[str, Entry] = {
    "offset-management": _entry("offset_management"),
    "pipelining": _entry("pipelining"),
    "async-state-checkpoint": _entry("async_state_checkpoint"),
    "changelog-checkpointing": _entry("changelog_checkpointing"),
    "checkpoint-interval": _entry("checkpoint_interval"),
    "calibration": _entry("calibration"),
    "fault-matrix": _entry("fault_matrix"),
    "state-rebalancing": _entry("state_rebalancing"),
    "parallel-store-commit": _entry("parallel_store_commit"),
    "engine-vs-native": _entry("engine_vs_native"),
    "real-time-mode": _entry("real_time_mode"),
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
