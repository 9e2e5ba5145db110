"""The named experiments: a name to its definition module under ``experiments/defs``."""

from __future__ import annotations

import difflib
import importlib

from experiments.experiment import Experiment, ExperimentError

# experiment name -> module under experiments/defs (one module per experiment)
DEFINITIONS: dict[str, str] = {
    "offset-management": "experiments.defs.offset_management",
    "pipelining": "experiments.defs.pipelining",
    "async-state-checkpoint": "experiments.defs.async_state_checkpoint",
    "changelog-checkpointing": "experiments.defs.changelog_checkpointing",
    "checkpoint-interval": "experiments.defs.checkpoint_interval",
    "calibration": "experiments.defs.calibration",
    "fault-matrix": "experiments.defs.fault_matrix",
    "state-rebalancing": "experiments.defs.state_rebalancing",
    "parallel-store-commit": "experiments.defs.parallel_store_commit",
    "engine-vs-native": "experiments.defs.engine_vs_native",
}


def experiment_names() -> list[str]:
    return list(DEFINITIONS)


def get_experiment(name: str) -> Experiment:
    """The definition named ``name``; an unknown name is an ``ExperimentError`` naming the nearest and the known ones."""
    if name not in DEFINITIONS:
        close = difflib.get_close_matches(name.replace("_", "-"), list(DEFINITIONS), n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise ExperimentError(f"unknown experiment {name!r}{hint}; known experiments: {', '.join(DEFINITIONS)}")
    module = importlib.import_module(DEFINITIONS[name])
    experiment = getattr(module, "EXPERIMENT", None)
    if not isinstance(experiment, Experiment) or experiment.name != name:
        raise ExperimentError(f"{DEFINITIONS[name]} does not define EXPERIMENT for {name!r}")
    return experiment
