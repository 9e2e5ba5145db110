"""The conditions a published claim was measured under, and whether one run of an experiment honours each.

A claim holds under the conditions of the benchmark that made it: its
checkpoint storage, its sink, its input rates, its retention, its cluster.
Each experiment declares them (``Experiment.conditions``) with what a run on a
given backend uses instead, and whether that honours the published one. A run
uses the published conditions by default wherever its backend can; where it
cannot, the report's header says so, and every verdict of the run carries the
names of the conditions it did not honour (``unmet``), so that no verdict reads
as if it had been reached under the post's conditions when it was not.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Iterable


@dataclass(frozen=True)
class Condition:
    """One published condition and what a run uses for it. ``note``: why it is not honoured, or how it is."""

    name: str
    published: str
    used: str
    honoured: bool
    note: str = ""

    def line(self) -> str:
        state = "honoured" if self.honoured else "NOT HONOURED"
        return (f"{self.name}: {self.used} (published: {self.published}) - {state}"
                + (f": {self.note}" if self.note else ""))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def header_lines(conditions: Iterable[Condition]) -> list[str]:
    """The report header's lines: every condition of the claim and whether this run honours it."""
    listed = list(conditions)
    if not listed:
        return []
    return ["conditions of the published claim, as this run meets them:"] + ["  " + c.line() for c in listed]


def unmet(conditions: Iterable[Condition | dict[str, Any]]) -> tuple[str, ...]:
    """The names of the conditions a run did not honour (conditions as values or as stored dicts)."""
    out = []
    for c in conditions:
        honoured, name = (c.honoured, c.name) if isinstance(c, Condition) else (c.get("honoured"), c.get("name"))
        if not honoured:
            out.append(str(name))
    return tuple(out)
