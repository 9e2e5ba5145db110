"""The architecture, read from the imports: the spec in the middle, backends behind it, experiments on top.

- ``reference/`` imports no project package and no third-party library (standard library only);
- ``sim/`` and ``spark_impl/`` import ``reference/`` and their own libraries, never each other or ``experiments/``;
- no package imports the command-line module ``experiments.cli``.

Every ``import`` and ``from ... import`` statement is read with ``ast``, including those inside functions.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PROJECT = ("reference", "sim", "spark_impl", "experiments")
# what each package may import beyond the standard library and itself
ALLOWED: dict[str, set[str]] = {
    "reference": set(),
    "sim": {"reference", "simpy", "numpy"},
    "spark_impl": {"reference", "pyspark", "py4j", "rocksdict", "numpy", "pandas", "pyarrow"},
}


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
