"""A scenario's executors and their joins and leaves (state rebalancing, an addition to spec section 1).

``executors`` lists the executors present at the start; ``events`` lists
executors joining and leaving, each before a batch is planned. Not faults:
nothing fails; the state placement is recomputed (``placement.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .field_reader import FieldReader, ScenarioError

EVENT_KINDS = ("executor_join", "executor_leave")
DEFAULT_EXECUTORS = ("0", "1")   # the reference model's two executors: state partition p on executor p % 2


@dataclass(frozen=True)
class ExecutorEvent:
    """An executor joins or leaves the cluster before batch ``before_batch`` is planned (state rebalancing).

    Not a fault: nothing fails. At the batch's planning the state placement is recomputed
    (``placement.py``) and each moved partition's next task loads its state from the checkpoint.
    """

    kind: str
    executor: str
    before_batch: int

    @staticmethod
    def parse(o: FieldReader) -> "ExecutorEvent":
        kind = o.choice("kind", EVENT_KINDS)
        executor = o.get("executor")
        if not isinstance(executor, str) or not executor:
            raise ScenarioError(o.at("executor"), f"expected a non-empty executor id string, got {executor!r}")
        event = ExecutorEvent(kind, executor, o.int("before_batch", minimum=1))
        o.done()
        return event

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "executor": self.executor, "before_batch": self.before_batch}


def parse_executors(o: FieldReader) -> tuple[str, ...]:
    raw = o.get("executors", list(DEFAULT_EXECUTORS))
    if not isinstance(raw, list) or not raw:
        raise ScenarioError("executors", "expected a non-empty list of executor id strings")
    for i, e in enumerate(raw):
        if not isinstance(e, str) or not e:
            raise ScenarioError(f"executors[{i}]", f"expected a non-empty executor id string, got {e!r}")
        if e in raw[:i]:
            raise ScenarioError(f"executors[{i}]", f"executor {e!r} is listed twice")
    return tuple(raw)


def parse_events(o: FieldReader) -> tuple[ExecutorEvent, ...]:
    raw = o.get("events", [])
    if not isinstance(raw, list):
        raise ScenarioError("events", "expected a list of executor_join / executor_leave events")
    return tuple(ExecutorEvent.parse(FieldReader(e, f"events[{i}]")) for i, e in enumerate(raw))
