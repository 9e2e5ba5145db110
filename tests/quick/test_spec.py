"""docs/spec.md against the code, both ways: every step, fault kind, scenario field, oracle, checkpoint rule and
failure way the code defines is in the spec, and everything the spec's tables and lists name is in the code.

What is read from the spec: the field table of section 1, the step table of section 2 and its fault-kind
table, the check headings of section 5 (### for an oracle, #### for a checkpoint rule) with each check's
``- **condition**: way; way`` lines, the bug table of section 6 and the outcome table of section 4. What is read
from the code: the step and fault vocabularies (``reference.language.steps``), the fields a scenario's reader
reads (every typed read of ``FieldReader`` in the modules that parse a scenario, and every dotted path read
while the catalogue's and the examples' scenarios are parsed), ``ORACLES`` and ``FAILURE_WAYS``, ``RULES`` and
``RULE_WAYS``, the catalogue's modes, the bug zoo's bugs and an outcome's fields.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from experiments.zoo import JIRAS
from reference.judge.checkpoint_rules import RULE_WAYS, RULES
from reference.judge.oracles import FAILURE_WAYS, ORACLES
from reference.language import field_reader
from reference.language.catalogue import MODES, OPERATORS, scenario_dict, supported_pairs
from reference.language.scenario import Scenario
from reference.language.steps import FAULT_KINDS, STEP_NAMES
from reference.protocol.run import run_scenario

ROOT = Path(__file__).resolve().parents[2]
SPEC = (ROOT / "docs" / "spec.md").read_text(encoding="utf-8")
SCENARIO_READERS = ("scenario", "source_spec", "operator_spec", "engine_config", "fault_spec", "executor_events")
TYPED_READS = ("get", "int", "num", "choice", "bool", "obj")


def section(number: int) -> str:
    found = re.search(rf"^## {number}\. .*?(?=^## \d+\. |\Z)", SPEC, re.M | re.S)
    assert found, f"docs/spec.md has no section {number}"
    return found.group(0)


def subsection(text: str, title: str) -> str:
    found = re.search(rf"^### {re.escape(title)}\n.*?(?=^### |\Z)", text, re.M | re.S)
    assert found, f"no subsection {title!r}"
    return found.group(0)


def first_cells(text: str) -> list[str]:
    """The backticked names in the first column of every table row of ``text``."""
    return re.findall(r"^\| `([^`|]+)`", text, re.M)


def checks(text: str, level: str) -> dict[str, dict[str, tuple[str, ...]]]:
    """Each ``level`` heading's check, with its ``- **condition**: way; way`` lines."""
    out: dict[str, dict[str, tuple[str, ...]]] = {}
    for name, body in re.findall(rf"^{level} `(\w+)`\n(.*?)(?=^#|\Z)", text, re.M | re.S):
        out[name] = {cond: tuple(way.strip() for way in ways.split(";"))
                     for cond, ways in re.findall(r"^- \*\*(.+?)\*\*: (.+)$", body, re.M)}
    return out


# ------------------------------------------------------------------ the code's vocabulary


def static_fields() -> set[str]:
    """Every field name the scenario's reader reads by name."""
    names = set()
    for module in SCENARIO_READERS:
        tree = ast.parse((ROOT / "reference" / "language" / f"{module}.py").read_text())
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and node.args):
                continue
            func, args = node.func, node.args
            if isinstance(func, ast.Attribute) and func.attr in TYPED_READS and isinstance(args[0], ast.Constant):
                names.add(args[0].value)
            if isinstance(func, ast.Name) and func.id == "_probability" and isinstance(args[1], ast.Constant):
                names.add(args[1].value)
    return {n for n in names if isinstance(n, str)}


def corpus() -> list[dict]:
    """Scenarios using every source kind, operator and mode: the catalogue's and the examples'."""
    out = [scenario_dict(op, mode) for op, mode in supported_pairs()]
    out += [json.loads(p.read_text()) for p in sorted((ROOT / "experiments" / "scenarios").glob("*.json"))]
    out.append({**scenario_dict("aggregate"), "executors": ["a", "b"],
                "events": [{"kind": "executor_join", "executor": "c", "before_batch": 2}]})
    return out


def read_paths(monkeypatch: pytest.MonkeyPatch) -> set[str]:
    """Every dotted path read while the corpus is parsed, with list indices, chain members and join sides
    folded into the spec's names (``faults[].at.step``, ``query.operator.kind``, ``source.kind``)."""
    seen: set[str] = set()
    original = field_reader.FieldReader.get

    def get(self, name, default=...):
        seen.add(self.at(name))
        return original(self, name, default)
    monkeypatch.setattr(field_reader.FieldReader, "get", get)
    for raw in corpus():
        Scenario.from_dict(raw)
    folded = set()
    for path in seen:
        path = re.sub(r"\[\d+\]", "[]", path)
        path = re.sub(r"^query\.operator\.operators\[\]\.", "query.operator.", path)
        path = re.sub(r"^sources\.(left|right)\.", "source.", path)
        folded.add(path)
    return folded


SPEC_FIELDS = first_cells(subsection(section(1), "Fields"))


def leaf(path: str) -> str:
    return path.replace("[]", "").rsplit(".", 1)[-1]


# ------------------------------------------------------------------ both ways


def test_every_step_is_in_the_spec_and_every_step_the_spec_names_is_the_codes():
    steps = [name for name in first_cells(section(2).split("### Fault kinds")[0])]
    assert sorted(steps) == sorted(STEP_NAMES) and len(steps) == len(set(steps))
    assert steps == list(STEP_NAMES), "the spec lists the steps in the order a micro-batch runs them"


def test_every_fault_kind_is_in_the_spec_and_no_other():
    kinds = first_cells(subsection(section(2), "Fault kinds"))
    assert sorted(kinds) == sorted(FAULT_KINDS) and len(kinds) == len(set(kinds))


def test_every_scenario_field_the_code_reads_is_in_the_spec_and_every_field_there_is_read(monkeypatch):
    paths = read_paths(monkeypatch)
    assert len(SPEC_FIELDS) == len(set(SPEC_FIELDS)), "a field is listed twice"
    missing = sorted(paths - set(SPEC_FIELDS))
    assert not missing, f"fields the code reads that docs/spec.md does not list: {missing}"
    code_names = static_fields() | {leaf(p) for p in paths}
    assert {leaf(p) for p in SPEC_FIELDS} == code_names, (
        f"only in the spec: {sorted({leaf(p) for p in SPEC_FIELDS} - code_names)}; "
        f"only in the code: {sorted(code_names - {leaf(p) for p in SPEC_FIELDS})}")


def test_a_field_the_code_does_not_read_would_be_caught():
    """The comparison can fail: a made-up field is in neither the static reads nor the corpus."""
    assert "made_up_field" not in static_fields()
    with pytest.raises(field_reader.ScenarioError, match="unknown field"):
        Scenario.from_dict({**scenario_dict("aggregate"), "made_up_field": 1})


def test_every_oracle_and_its_failure_ways_are_the_codes():
    oracles = checks(section(5), "###")
    assert set(oracles) == set(ORACLES) | {"outcome_shape", "determinism"}
    for name, ways in FAILURE_WAYS.items():
        assert oracles[name] == ways, f"{name}: the spec says {oracles[name]}, the code {ways}"
    for name, ways in oracles.items():
        assert not ways or name in FAILURE_WAYS, f"{name}: the spec lists failure ways the code does not"


def test_every_checkpoint_rule_and_its_failure_ways_are_the_codes():
    rules = checks(section(5), "####")
    assert list(rules) == list(RULES)
    for name in RULES:
        assert rules[name] == RULE_WAYS.get(name, {}), f"{name}: the spec says {rules[name]}"


def test_the_modes_and_operators_the_catalogue_runs_are_in_the_spec():
    modes = section(7)
    for mode in MODES:
        assert f"`{mode}`" in modes, mode
    operators = subsection(section(1), "Operators")
    for op in OPERATORS:
        assert f"- `{op}`:" in operators, op


def test_the_bug_list_is_the_zoos():
    assert re.findall(r"^\| (SPARK-[-\d/SPARK]+) \|", section(6), re.M) == list(JIRAS)


def test_the_outcome_table_names_every_field_an_outcome_has():
    outcome = run_scenario(Scenario.from_dict(scenario_dict("aggregate"))).outcome()
    listed = {name for row in re.findall(r"^\| (`[^|]+`) \|", section(4), re.M)
              for name in re.findall(r"`(\w+)`", row)}
    written = set(outcome.to_dict()) | {"moves", "faults_not_fired", "timing", "details"}
    assert written <= listed and listed <= written, (written ^ listed)


def test_the_spec_points_nowhere_outside_the_repository():
    assert "../" not in SPEC and "SPEC.md" not in SPEC
