"""The architecture, read from the imports: the spec in the middle, backends behind it, experiments on top.

- ``reference/`` imports no project package and no third-party library (standard library only);
- inside ``reference/``, three layers: ``language`` (the scenario language), ``protocol`` (what a query does)
  and ``judge`` (what an outcome must be); the judge reads the protocol, the protocol reads the language,
  never back;
- ``sim/`` and ``spark_impl/`` import ``reference/`` and their own libraries, never each other or ``experiments/``;
- no package imports the command-line module ``experiments.cli``;
- no module imports itself through others: the project's imports have no cycle.

Every ``import`` and ``from ... import`` statement is read with ``ast``, including those inside functions and
under ``TYPE_CHECKING``: a cycle only type checkers follow is still a cycle in the design.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROJECT = ("reference", "sim", "spark_impl", "experiments")
# what each package may import beyond the standard library and itself
ALLOWED: dict[str, set[str]] = {
    "reference": set(),
    "sim": {"reference", "simpy", "numpy"},
    "spark_impl": {"reference", "pyspark", "py4j", "rocksdict", "numpy", "pandas", "pyarrow"},
}

# reference/'s layers, lowest first: a module imports its own layer or one below it
REFERENCE_LAYERS = ("language", "protocol", "judge")
# arrows that still run upwards, each to be removed (issue 37 step 2): (importer, imported)
UPWARD_EXCEPTIONS = {("reference.protocol.real_time", "reference.judge.bounds")}


def imports_of(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module) for every import in a file; relative imports resolve inside its package."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = path.relative_to(ROOT).with_suffix("").parts[:-1]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1]
                out.append((node.lineno, ".".join(base + ((node.module,) if node.module else ()))))
            elif node.module:
                out.append((node.lineno, node.module))
    return out


def files_of(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def module_of(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_imports() -> dict[str, set[str]]:
    """Module -> the project modules it imports (``from package import module`` counts as that module)."""
    paths = [path for package in PROJECT for path in files_of(package)]
    known = {module_of(path) for path in paths}
    out: dict[str, set[str]] = {}
    for path in paths:
        tree = ast.parse(path.read_text(), filename=str(path))
        named = {f"{module}.{alias.name}" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                 for module in [_absolute(path, node)] for alias in node.names}
        imported = {module for _line, module in imports_of(path)} | named
        out[module_of(path)] = {m for m in imported if m in known and m != module_of(path)}
    return out


def _absolute(path: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = path.relative_to(ROOT).with_suffix("").parts[:-1]
    return ".".join(package[:len(package) - node.level + 1] + ((node.module,) if node.module else ()))


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_imports_have_no_cycle():
    assert cycles(project_imports()) == []


def test_the_cycle_reader_finds_a_cycle_through_a_module_named_in_a_from_import():
    graph = {"p": set(), "p.a": {"p.b"}, "p.b": {"p.c"}, "p.c": {"p.a"}, "p.d": {"p.a"}}
    assert cycles(graph) == [["p.a", "p.b", "p.c"]]
    pkg = ROOT / "sim"
    probe = pkg / "_layering_probe.py"
    probe.write_text("from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from sim import simulation\n")
    try:
        assert "sim.simulation" in project_imports()["sim._layering_probe"]
    finally:
        probe.unlink()


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_a_package_imports_only_what_its_layer_allows(package):
    stdlib = set(sys.stdlib_module_names)
    bad = []
    for path in files_of(package):
        for line, module in imports_of(path):
            top = module.split(".")[0]
            if top == package or top in stdlib or top == "__future__" or top in ALLOWED[package]:
                continue
            bad.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    assert bad == [], "\n".join(bad)


def layer_of(module: str) -> int:
    parts = module.split(".")
    assert parts[0] == "reference" and len(parts) >= 3 and parts[1] in REFERENCE_LAYERS, \
        f"{module} is in none of reference/'s layers {REFERENCE_LAYERS}"
    return REFERENCE_LAYERS.index(parts[1])


def test_every_module_of_the_reference_is_in_one_layer():
    loose = [module_of(path) for path in files_of("reference") if module_of(path) != "reference"
             and module_of(path).split(".")[1] not in REFERENCE_LAYERS]
    assert loose == [], f"modules outside reference/'s layers {REFERENCE_LAYERS}: {loose}"


def test_the_reference_layers_import_downwards():
    graph = project_imports()
    upward = sorted((module, target) for module, targets in graph.items() if module.startswith("reference.")
                    and module.count(".") >= 2 for target in targets if target.startswith("reference.")
                    and target.count(".") >= 2 and layer_of(target) > layer_of(module))
    assert [arrow for arrow in upward if arrow not in UPWARD_EXCEPTIONS] == [], "an upward import in reference/"
    assert set(UPWARD_EXCEPTIONS) <= set(upward), "an exception no longer needed: remove it from UPWARD_EXCEPTIONS"


def test_the_layer_reader_sees_an_upward_import():
    probe = ROOT / "reference" / "language" / "_layering_probe.py"
    probe.write_text("from ..judge import oracles\n")
    try:
        graph = project_imports()
        assert "reference.judge.oracles" in graph["reference.language._layering_probe"]
        assert layer_of("reference.judge.oracles") > layer_of("reference.language._layering_probe")
    finally:
        probe.unlink()


def test_no_package_imports_the_command_line_module():
    bad = [f"{path.relative_to(ROOT)}:{line}" for package in PROJECT for path in files_of(package)
           if path.name != "cli.py" for line, module in imports_of(path) if module == "experiments.cli"]
    assert bad == [], "\n".join(bad)


def test_the_import_reader_sees_relative_and_nested_imports(tmp_path):
    """The reader itself: a relative import resolves to its package, an import inside a function is seen."""
    pkg = ROOT / "reference"
    probe = pkg / "_layering_probe.py"
    probe.write_text("from .engine import Incarnation\n\ndef f():\n    import numpy\n")
    try:
        assert imports_of(probe) == [(1, "reference.engine"), (4, "numpy")]
    finally:
        probe.unlink()
