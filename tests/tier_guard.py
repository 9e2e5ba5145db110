"""The tier guard: a test that needs pyspark, a JVM or typst says so with its marker, and lives in its tier.

The tests are tiered by cost in folders: ``tests/quick/`` (pure Python), ``tests/spark/`` (PySpark, a JVM or
typst) and ``tests/slow/`` (soak and exhaustive forms). A machine without Java must be able to run the quick
tier, so a test that imports pyspark (or py4j), starts or talks to a JVM, or calls typst without the marker
that names it (``spark`` for pyspark, py4j and the JVM; ``typst`` for typst) fails, saying what it did, where,
and the marker it lacks. What the guard watches, while an unmarked test is set up, run and torn down:

- imports: a finder on ``sys.meta_path`` notes the first import of pyspark, py4j or typst and the line that
  caused it, during the collection of a test module (charged to the module's unmarked tests) or during a test.
  A package is imported once per process, so an import an earlier test already made is not seen again; the
  quick tier runs alone (``make test-quick``), where nothing imports them first, so there every import is seen;
- a JVM this process already runs: every command py4j sends to it;
- processes: ``subprocess.Popen`` of java, javac, spark-submit, spark-class or typst (a ``-version`` probe
  aside);
- Java itself: a test without the ``spark`` marker runs as on a machine without Java. ``shutil.which`` finds no
  java or javac, so what a test does when Java is absent is what the quick tier checks; and its child processes
  see ``JAVA_HOME`` naming a folder that does not exist (its name says why), so a JVM a child starts fails
  instead of passing unseen;
- typst: every call of the typst package's entry points.

The folders are checked too: every test lives in a tier folder, and one in ``tests/quick/`` carries none of
``spark``, ``typst`` and ``soak``. The hooks here are re-exported by ``tests/conftest.py``.
"""

from __future__ import annotations

import importlib.abc
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent

# each guarded package, and the marker a test that uses it must carry
PACKAGE_MARKER = {"pyspark": "spark", "py4j": "spark", "typst": "typst"}
# each guarded executable, and its marker
EXECUTABLE_MARKER = {"java": "spark", "javac": "spark", "spark-submit": "spark", "spark-class": "spark",
                     "typst": "typst"}
JVM_EXECUTABLES = frozenset(name for name, marker in EXECUTABLE_MARKER.items() if marker == "spark")
TYPST_ENTRY_POINTS = ("compile", "compile_with_warnings", "query", "eval", "Compiler")
PY4J_CONNECTIONS = (("py4j.clientserver", "ClientServerConnection"), ("py4j.java_gateway", "GatewayConnection"))
# where an unmarked test's child processes find Java: nowhere, and the path says why
NO_JAVA_HOME = "/nonexistent/JAVA_HOME-of-a-test-without-the-spark-marker"

# the tier folders (and the benchmarks'), and the markers a test in each may not carry
TIERS = {"quick": frozenset({"spark", "typst", "soak"}), "spark": frozenset(), "slow": frozenset(),
         "bench": frozenset()}


def _markers(item: pytest.Item) -> set[str]:
    return {mark.name for mark in item.iter_markers()}


def _where() -> str:
    """The line outside the import machinery and this file that is running now."""
    frame = sys._getframe(1)
    while frame is not None:
        name = frame.f_code.co_filename
        if not (name.startswith("<frozen") or name in (__file__, subprocess.__file__) or "importlib" in name):
            path = Path(name)
            shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
            return f"{shown}:{frame.f_lineno}"
        frame = frame.f_back  # type: ignore[assignment]
    return "?"


def _importing() -> bool:
    """Whether an import statement is running, not a probe (``importlib.util.find_spec`` imports nothing)."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "_find_and_load":
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


class _Watch:
    """What the guard has seen: who is running (a module being collected, or a test), and each use."""

    def __init__(self) -> None:
        self.module: Path | None = None          # the test module being collected
        self.item: pytest.Item | None = None     # the unmarked-for-something test running now
        self.module_uses: dict[Path, list[tuple[str, str]]] = {}
        self.item_uses: list[tuple[str, str]] = []
        # threads alive before the running test was set up, its own aside: an earlier test's (a py4j callback
        # or a query's feeder winding down); what they do is not this test's doing
        self.earlier_threads: frozenset[threading.Thread] = frozenset()

    def note(self, marker: str, what: str) -> None:
        if threading.current_thread() in self.earlier_threads:
            return
        if self.module is not None:
            self.module_uses.setdefault(self.module, []).append((marker, what))
        elif self.item is not None and marker not in _markers(self.item):
            self.item_uses.append((marker, what))


WATCH = _Watch()


class _ImportWatch(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Any, target: Any = None) -> None:
        marker = PACKAGE_MARKER.get(fullname)
        if marker is not None and fullname not in sys.modules and _importing():
            where = _where()
            if f"{os.sep}pyspark{os.sep}" not in where:   # py4j, as pyspark imports it, is pyspark's import
                WATCH.note(marker, f"imports {fullname} ({where})")
        return None  # the import goes on as usual: the guard only notes it


sys.meta_path.insert(0, _ImportWatch())


def _executable(args: Any) -> str:
    first = args.split()[0] if isinstance(args, str) and args.split() else (
        args[0] if isinstance(args, (list, tuple)) and args else args)
    return os.path.basename(os.fspath(first)) if isinstance(first, (str, bytes, os.PathLike)) else ""


def _patched(owner: Any, name: str, wrap: Callable[[Callable[..., Any]], Callable[..., Any]]) -> Iterator[None]:
    original = getattr(owner, name)
    setattr(owner, name, wrap(original))
    try:
        yield
    finally:
        setattr(owner, name, original)


def _watch_popen(original: Callable[..., Any]) -> Callable[..., Any]:
    def popen_init(self: Any, args: Any, *rest: Any, **kwargs: Any) -> Any:
        name = _executable(args)
        marker = EXECUTABLE_MARKER.get(name)
        probe = isinstance(args, (list, tuple)) and list(args[1:]) in (["-version"], ["--version"])
        if marker is not None and not probe:   # asking a version starts nothing a test could need
            WATCH.note(marker, f"starts {name} ({_where()})")
        return original(self, args, *rest, **kwargs)
    return popen_init


def _watch_call(marker: str, what: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            WATCH.note(marker, f"{what} ({_where()}, thread {threading.current_thread().name})")
            return original(*args, **kwargs)
        return call
    return wrap


def _without_java(original: Callable[..., Any]) -> Callable[..., Any]:
    def which(cmd: Any, *args: Any, **kwargs: Any) -> Any:
        if os.path.basename(os.fspath(cmd)) in JVM_EXECUTABLES:
            return None   # as on a machine without Java: what a test needs of Java, its marker says
        return original(cmd, *args, **kwargs)
    return which


class _Guarded:
    """The patches and the environment an unmarked test runs under, from its set-up to its tear-down."""

    def __init__(self) -> None:
        self._undo: list[Iterator[None]] = []
        self._java_home: str | None = None

    def enter(self, item: pytest.Item) -> None:
        WATCH.item = item
        WATCH.item_uses = []
        WATCH.earlier_threads = frozenset(threading.enumerate()) - {threading.current_thread()}
        marks = _markers(item)
        patches = [_patched(subprocess.Popen, "__init__", _watch_popen)]
        if "spark" not in marks:
            self._java_home = os.environ.get("JAVA_HOME")
            os.environ["JAVA_HOME"] = NO_JAVA_HOME
            patches.append(_patched(shutil, "which", _without_java))
            for module_name, cls in PY4J_CONNECTIONS:
                module = sys.modules.get(module_name)
                if module is not None and hasattr(module, cls):
                    patches.append(_patched(getattr(module, cls), "send_command",
                                            _watch_call("spark", "sends a command to the JVM through py4j")))
        if "typst" not in marks and "typst" in sys.modules:
            for entry in TYPST_ENTRY_POINTS:
                if hasattr(sys.modules["typst"], entry):
                    patches.append(_patched(sys.modules["typst"], entry, _watch_call("typst", f"calls typst.{entry}")))
        for patch in patches:
            next(patch)
            self._undo.append(patch)

    def leave(self) -> None:
        while self._undo:
            next(self._undo.pop(), None)
        if WATCH.item is not None and "spark" not in _markers(WATCH.item):
            if self._java_home is None:
                os.environ.pop("JAVA_HOME", None)
            else:
                os.environ["JAVA_HOME"] = self._java_home
        self._java_home = None
        WATCH.item = None
        WATCH.earlier_threads = frozenset()


GUARD = _Guarded()


def _complaints(item: pytest.Item) -> list[str]:
    marks = _markers(item)
    said = [f"{what}: it needs the {marker!r} marker"
            for marker, what in WATCH.module_uses.get(item.path, []) + WATCH.item_uses if marker not in marks]
    parts = item.path.relative_to(TESTS).parts if item.path.is_relative_to(TESTS) else ()
    if parts and (len(parts) == 1 or parts[0] not in TIERS):
        said.append(f"it lives in tests/{'/'.join(parts[:-1])} and no tier folder: move it to tests/quick/, "
                    "tests/spark/ or tests/slow/")
    elif parts and marks & TIERS[parts[0]]:
        said.append(f"it lives in tests/{parts[0]}/ but is marked {sorted(marks & TIERS[parts[0]])}: it belongs in "
                    "tests/spark/ (spark, typst) or tests/slow/ (soak)")
    return list(dict.fromkeys(said))


_JUDGED: set[str] = set()  # the tests already failed by the guard (once each, not again at tear-down)


def _judge(item: pytest.Item) -> None:
    said = [] if item.nodeid in _JUDGED else _complaints(item)
    WATCH.item_uses = []
    if said:
        _JUDGED.add(item.nodeid)
        pytest.fail("tier guard (tests/tier_guard.py): " + "; ".join(said), pytrace=False)


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Any:
    if isinstance(collector, pytest.Module):
        WATCH.module = collector.path
    try:
        return (yield)
    finally:
        WATCH.module = None


def _phase(item: pytest.Item) -> Any:
    """Run one phase of ``item``; a complaint of the guard replaces the phase's own error (the marker, or the
    tier, is what to fix first)."""
    try:
        result = yield
    except BaseException:
        _judge(item)
        raise
    _judge(item)
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Any:
    GUARD.enter(item)
    return (yield from _phase(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    return (yield from _phase(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    try:
        return (yield from _phase(item))
    finally:
        GUARD.leave()
