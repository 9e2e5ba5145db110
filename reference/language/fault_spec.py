"""A scenario's faults (spec section 2, ``faults[]``): what goes wrong, and where or when.

A fault is placed at a named step of a batch (``before`` or ``after`` it, on a
partition for task steps) or at a time, optionally in one incarnation only
(``at.restart``). Which fault fires where, and what it does, is ``faults.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .field_reader import FieldReader, ScenarioError, drop_none
from .steps import FAULT_KINDS, STEP_NAMES, TASK_STEPS


@dataclass(frozen=True)
class FaultAt:
    step: str | None = None
    batch: int | None = None
    partition: int | None = None
    when: str = "before"
    time_ms: int | None = None
    restart: int | None = None  # fire only in this incarnation (0 = before any restart)

    def to_dict(self) -> dict[str, Any]:
        return drop_none({"step": self.step, "batch": self.batch, "partition": self.partition,
                           "when": self.when if self.step else None, "time_ms": self.time_ms,
                           "restart": self.restart})


@dataclass(frozen=True)
class Fault:
    at: FaultAt
    kind: str
    ms: int | None = None
    path: str | None = None

    @staticmethod
    def parse(o: FieldReader) -> "Fault":
        at = o.obj("at")
        step = at.get("step", None)
        if step is not None and step not in STEP_NAMES:
            raise ScenarioError(at.at("step"), f"expected one of {', '.join(STEP_NAMES)}; got {step!r}")
        fa = FaultAt(step, at.int("batch", None) if "batch" in at.raw else None,
                     at.int("partition", None) if "partition" in at.raw else None,
                     at.choice("when", ("before", "after"), "before"),
                     at.int("time_ms", None) if "time_ms" in at.raw else None,
                     at.int("restart", None) if "restart" in at.raw else None)
        at.done()
        if fa.step is None and fa.time_ms is None:
            raise ScenarioError(at.path, "a fault needs at.step (with at.batch) or at.time_ms")
        if fa.step is not None and fa.batch is None:
            raise ScenarioError(at.at("batch"), "a fault at a step needs the batch it happens in")
        kind = o.choice("kind", FAULT_KINDS)
        fault = Fault(fa, kind, o.int("ms", None) if "ms" in o.raw else None, o.get("path", None))
        if kind in ("corrupt_file", "delete_file") and not isinstance(fault.path, str):
            raise ScenarioError(o.at("path"), f"a {kind} fault needs the checkpoint-relative path of the file")
        if kind in ("storage_latency", "clock_skew") and fault.ms is None:
            raise ScenarioError(o.at("ms"), f"a {kind} fault needs ms")
        if kind in ("task_failure", "executor_loss", "zombie_write") and fa.step is not None \
                and fa.step not in TASK_STEPS:
            raise ScenarioError(at.at("step"), f"a {kind} happens inside a task; expected one of "
                                               f"{', '.join(TASK_STEPS)}")
        o.done()
        return fault

    @staticmethod
    def from_dict(raw: Any, path: str = "fault") -> "Fault":
        return Fault.parse(FieldReader(raw, path))

    def to_dict(self) -> dict[str, Any]:
        return drop_none({"at": self.at.to_dict(), "kind": self.kind, "ms": self.ms, "path": self.path})


def may_end_incarnation(fault: Fault) -> bool:
    """Whether a fault can end an incarnation, so that a later one exists."""
    if fault.kind in ("driver_crash", "storage_write_error", "executor_loss"):
        return True
    return fault.kind in ("task_failure", "zombie_write") and fault.at.step in ("changelog_write", "state_commit")


def check_checkpoint_path(path: str, field_path: str) -> None:
    parts = path.split("/")
    if not path or path.startswith("/") or "\\" in path or any(p in ("", ".", "..") for p in parts):
        raise ScenarioError(field_path, f"{path!r} must be a path relative to the checkpoint that stays inside it, "
                                        "e.g. \"commits/2\" or \"state/0/1/3_r0b2p1a0.changelog\"")
