"""A scenario's query (spec section 1, ``query.operator.kind``): the operators, each with Spark's semantics.

The semantics themselves are in ``operators.py``; this module is the
operator's specification as the scenario gives it: its kind and parameters,
and a chain's members in pipeline order.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from .field_reader import FieldReader, ScenarioError, drop_none

OPERATOR_KINDS = ("map", "aggregate", "window_aggregate", "dedup_within_watermark", "dedup", "join",
                  "stateful_function", "chain")
STATEFUL_KINDS = tuple(k for k in OPERATOR_KINDS if k not in ("map", "chain"))
AGGS = ("count", "sum")
FUNCTIONS = ("session_sum",)


@dataclass(frozen=True)
class OperatorSpec:
    kind: str
    agg: str | None = None
    window_ms: int | None = None
    watermark_delay_ms: int | None = None
    time_bound_ms: int | None = None
    function: str | None = None
    timeout_ms: int | None = None
    operators: tuple["OperatorSpec", ...] = ()

    @property
    def stateful(self) -> bool:
        if self.kind == "chain":
            return any(op.stateful for op in self.operators)
        return self.kind in STATEFUL_KINDS

    def flatten(self) -> tuple["OperatorSpec", ...]:
        """The operators in pipeline order (a chain is its members)."""
        return self.operators if self.kind == "chain" else (self,)

    @staticmethod
    def parse(o: FieldReader, *, in_chain: bool = False) -> "OperatorSpec":
        kind = o.choice("kind", OPERATOR_KINDS)
        if kind == "map":
            spec = OperatorSpec(kind)
        elif kind == "aggregate":
            spec = OperatorSpec(kind, agg=o.choice("agg", AGGS, "count"))
        elif kind == "window_aggregate":
            spec = OperatorSpec(kind, agg=o.choice("agg", AGGS, "count"), window_ms=o.int("window_ms", minimum=1),
                                watermark_delay_ms=o.int("watermark_delay_ms"))
        elif kind == "dedup_within_watermark":
            spec = OperatorSpec(kind, watermark_delay_ms=o.int("watermark_delay_ms"))
        elif kind == "dedup":   # the watermark is optional: without one the state is never evicted
            spec = OperatorSpec(kind, watermark_delay_ms=o.int("watermark_delay_ms") if "watermark_delay_ms" in o.raw
                                else None)
        elif kind == "join":
            if in_chain:
                raise ScenarioError(o.at("kind"), "a join takes two sources, so it cannot sit inside a chain")
            spec = OperatorSpec(kind, time_bound_ms=o.int("time_bound_ms"),
                                watermark_delay_ms=o.int("watermark_delay_ms"))
        elif kind == "stateful_function":
            spec = OperatorSpec(kind, function=o.choice("function", FUNCTIONS, "session_sum"),
                                timeout_ms=o.int("timeout_ms", minimum=1),
                                watermark_delay_ms=o.int("watermark_delay_ms"))
        else:
            if in_chain:
                raise ScenarioError(o.at("kind"), "chains do not nest")
            members = o.get("operators")
            if not isinstance(members, list) or len(members) < 2:
                raise ScenarioError(o.at("operators"), "a chain needs a list of at least two operators")
            spec = OperatorSpec(kind, operators=tuple(
                OperatorSpec.parse(FieldReader(m, f"{o.at('operators')}[{i}]"), in_chain=True)
                for i, m in enumerate(members)))
        o.done()
        return spec

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "operators"}
        if self.kind == "chain":
            out["operators"] = [op.to_dict() for op in self.operators]
        return drop_none(out)
