"""Judging an outcome on the command line: reading an outcome file and summarising the oracles' verdicts.

The oracles are the reference's (``reference.judge.oracles``, spec section 5); an
outcome file is read as the typed ``Outcome``, so a malformed one is refused
with an ``OutcomeError`` naming the file and the field, never judged.
"""

from __future__ import annotations

from collections.abc import Mapping

from experiments.input_files import read_json
from reference.judge.fault_effects import describe
from reference.judge.oracles import Verdict
from reference.protocol.outcome import Outcome, OutcomeError
from reference.language.scenario import Scenario


def load_outcome(path: str) -> Outcome:
    """The outcome in the file at ``path``; ``InputFileError`` when the file cannot be read or is not JSON we
    read (``input_files.read_json``), ``OutcomeError`` naming the file and the field when it is not an outcome."""
    raw = read_json(path, "an outcome JSON file")
    try:
        return Outcome.from_dict(raw)
    except OutcomeError as exc:
        error = OutcomeError(exc.field, str(exc))
        error.args = (f"{path}: not an outcome: {exc}",)
        raise error from None


def tally(verdicts: list[Verdict]) -> str:
    """``8 of 10 oracles hold (2 not applicable: no checkpoint)``."""
    held = sum(v.status == "pass" for v in verdicts)
    na = sum(v.status == "n/a" for v in verdicts)
    text = f"{held} of {len(verdicts)} oracles hold"
    return text + (f" ({na} not applicable: no checkpoint)" if na else "")


def unfired_lines(scenario: Scenario, outcome: Outcome) -> list[str]:
    """A line for each of the scenario's faults the run never fired (``outcome.faults_not_fired``): what the run
    did not test, said on screen, not only in the outcome file."""
    return [f"note: {describe(i, scenario.faults[i])} never fired: no step of this run matched it, so the run "
            "did not test it" for i in outcome.faults_not_fired if i < len(scenario.faults)]


def fired_lines(scenario: Scenario, outcome: Outcome) -> list[str]:
    """Where each fault fired, for a backend that reports it (native Spark: ``details.native.faults_fired``):
    the file operation and path inside Spark's own checkpoint code, or the executor and task that halted. The
    ``details`` of an outcome are free-form, so anything malformed there is skipped, never trusted."""
    native = outcome.details.get("native") if isinstance(outcome.details, Mapping) else None
    fired = native.get("faults_fired") if isinstance(native, Mapping) else None
    lines = []
    for entry in fired if isinstance(fired, list) else []:
        index = entry.get("fault") if isinstance(entry, Mapping) else None
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(scenario.faults):
            continue
        where = []
        if entry.get("op") is not None:
            where.append(f"{entry.get('when')} the {entry.get('op')} of {entry.get('path')}")
        if entry.get("executor") is not None:
            where.append(f"in executor {entry.get('executor')}")
        if entry.get("partitionId") is not None:
            where.append(f"in the task of partition {entry.get('partitionId')}, attempt {entry.get('attemptNumber')}")
        if entry.get("incarnation") is not None:
            where.append(f"in incarnation {entry.get('incarnation')}")
        lines.append(f"{describe(index, scenario.faults[index])} fired " + (", ".join(where) or "(no place reported)"))
    return lines


def verdict_lines(verdicts: list[Verdict], indent: str = "  ") -> list[str]:
    return [indent + verdict.describe().replace("\n", "\n" + indent) for verdict in verdicts]
