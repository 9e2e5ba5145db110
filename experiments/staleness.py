"""The staleness rule: the code a measurement unit reached, as one key, in the working tree or at a commit.

A unit of the ledger (``experiments.ledger``) is *stale* when the code it
measured has changed since. Which code that is, is computed, never listed by
hand:

1. **In the experiment's definition module**, the parts its measurement
   reaches: the methods ``points`` and ``measure`` of the experiment's class
   (with the attributes the runner reads: ``storage_default``, ``stopping``,
   ``point_timeout_s`` and the seeds), and
   everything they name in turn, followed through the module's functions,
   constants and the class's own methods and attributes. A change to the
   definition's summary, checks, report or figures leaves its units fresh.
   A name the walk cannot follow (``getattr(self, name)`` with a computed
   name) takes the whole class.
2. **Every project module those parts import**, and everything those import
   in turn (``import`` and ``from ... import`` anywhere in a module, inside
   functions too, but not under ``if TYPE_CHECKING:``; importing ``a.b.c``
   runs ``a/__init__.py`` and ``a/b/__init__.py`` as well), whole.
3. **The modules of the backends its run's points run on**
   (``experiments.backends.BACKENDS``; engine-vs-native runs two), the runner's
   measurement (``experiments.measure``), and the module of every other
   backend the reached definition code runs by name (a literal first argument
   of ``run_backend``, ``get_backend`` or ``require_available``: the simulator
   run inside a Spark point), with their imports as in 2.
4. **The data beside that code**: every file other than Python and Markdown
   in a folder below a reached module's folder that is not itself a package
   (``sim/profiles/*.json``; ``spark_impl/native/java/**``, the Java sources of
   native runs).

Python code is hashed by its syntax tree without docstrings, so a change to a
comment, a docstring or the layout does not make a unit stale; data files are
hashed byte for byte. The key is a SHA-256 over the sorted parts (``path`` or
``path#name`` -> hash), and the parts are kept so that a stale unit can say
which files changed. A unit records the key of the working tree it ran in;
``experiments.ledger`` compares it with the key of the same code at HEAD.
"""

from __future__ import annotations

import ast
import copy
import functools
import hashlib
import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Protocol

ROOT = Path(__file__).resolve().parent.parent
PROJECT_PACKAGES = ("reference", "sim", "spark_impl", "experiments")
# where the walk of a definition module starts: what the runner calls or reads on the experiment
DEFINITION_ROOTS = ("points", "measure", "storage_default", "stopping", "point_timeout_s", "seeds_quick",
                    "seeds_full", "base_seed")
RUNNER_MODULES = ("experiments.measure",)
NOT_DATA = (".py", ".md", ".pyc")
# the calls of experiments.backends whose first argument, a literal, names a backend a measurement runs
BACKEND_CALLS = ("run_backend", "get_backend", "require_available")
GIT_TIMEOUT_S = 60.0


class StalenessError(RuntimeError):
    """The code of a unit cannot be read (a module of the registry is not in the tree, git fails)."""


class SourceTree(Protocol):
    """A tree of project files: the working tree, or a commit."""

    label: str

    def paths(self) -> frozenset[str]:
        """Every file of the tree, as POSIX paths relative to the repository root."""

    def read(self, path: str) -> bytes:
        """A file's bytes; ``KeyError`` when the tree has no such file."""


def _git(args: list[str], root: Path, input_bytes: bytes | None = None) -> bytes:
    try:
        proc = subprocess.run(["git", *args], cwd=root, input=input_bytes, capture_output=True,
                              timeout=GIT_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError) as exc:
        raise StalenessError(f"git {' '.join(args)} failed: {exc}") from None
    if proc.returncode != 0:
        raise StalenessError(f"git {' '.join(args)} failed: {proc.stderr.decode(errors='replace').strip()}")
    return proc.stdout


class WorkTree:
    """The files as they are on disk: the project's packages below ``root``."""

    def __init__(self, root: Path = ROOT):
        self.root = root
        self.label = "the working tree"

    @functools.cache
    def paths(self) -> frozenset[str]:
        out = set()
        for package in PROJECT_PACKAGES:
            for path in (self.root / package).rglob("*"):
                if path.is_file() and "__pycache__" not in path.parts:
                    out.add(path.relative_to(self.root).as_posix())
        return frozenset(out)

    def read(self, path: str) -> bytes:
        if path not in self.paths():
            raise KeyError(path)
        return (self.root / path).read_bytes()


class GitCommit:
    """The files of a commit (``HEAD`` by default), read with ``git ls-tree`` and ``git cat-file``."""

    def __init__(self, rev: str = "HEAD", root: Path = ROOT):
        self.root = root
        self.rev = _git(["rev-parse", "--verify", f"{rev}^{{commit}}"], root).decode().strip()
        self.label = f"commit {self.rev[:10]}"
        self._blobs: dict[str, str] = {}
        listing = _git(["ls-tree", "-r", "-z", self.rev, "--", *PROJECT_PACKAGES], root)
        for entry in listing.split(b"\0"):
            if entry:
                meta, path = entry.split(b"\t", 1)
                _mode, kind, blob = meta.split()
                if kind == b"blob":
                    self._blobs[path.decode()] = blob.decode()
        self._cache: dict[str, bytes] = {}

    def paths(self) -> frozenset[str]:
        return frozenset(self._blobs)

    def read(self, path: str) -> bytes:
        if not self._cache:
            self._read_all()
        return self._cache[path]

    def _read_all(self) -> None:
        """Every file of the project's packages in one ``git cat-file --batch`` (a few hundred small files)."""
        paths = sorted(self._blobs)
        out = _git(["cat-file", "--batch"], self.root, "".join(f"{self._blobs[p]}\n" for p in paths).encode())
        at = 0
        for path in paths:
            header_end = out.index(b"\n", at)
            _blob, _kind, size = out[at:header_end].split()
            start = header_end + 1
            self._cache[path] = out[start:start + int(size)]
            at = start + int(size) + 1       # the content is followed by a newline


# ------------------------------------------------------------------ modules and their imports


def module_path(module: str, tree: SourceTree) -> str | None:
    """``a.b`` -> ``a/b.py`` or ``a/b/__init__.py``, whichever the tree has; None outside the project."""
    if module.split(".")[0] not in PROJECT_PACKAGES:
        return None
    base = module.replace(".", "/")
    for candidate in (f"{base}.py", f"{base}/__init__.py"):
        if candidate in tree.paths():
            return candidate
    return None


def _package_of(path: str) -> tuple[str, ...]:
    parts = tuple(path[:-3].split("/"))
    return parts[:-1]


def _absolute(path: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = _package_of(path)
    return ".".join(package[:len(package) - node.level + 1] + ((node.module,) if node.module else ()))


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def import_names(node: ast.AST, path: str) -> set[str]:
    """The modules the import statements below ``node`` name (``from a import b`` names ``a`` and ``a.b``),
    leaving out those under ``if TYPE_CHECKING:``, which never run."""
    out: set[str] = set()
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, ast.If) and _is_type_checking(current.test):
            stack.extend(current.orelse)
            continue
        if isinstance(current, ast.Import):
            out.update(alias.name for alias in current.names)
        elif isinstance(current, ast.ImportFrom):
            base = _absolute(path, current)
            out.add(base)
            out.update(f"{base}.{alias.name}" for alias in current.names)
        stack.extend(ast.iter_child_nodes(current))
    return out


def _with_parents(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def reached_files(modules: Iterable[str], tree: SourceTree) -> set[str]:
    """The files of ``modules`` and of every project module they import, transitively (parent packages
    included)."""
    seen: set[str] = set()
    stack = [m for module in modules for m in _with_parents(module)]
    while stack:
        path = module_path(stack.pop(), tree)
        if path is None or path in seen:
            continue
        seen.add(path)
        syntax = _parse(tree, path)
        stack.extend(m for module in import_names(syntax, path) for m in _with_parents(module))
    return seen


def data_files(py_files: Iterable[str], tree: SourceTree) -> set[str]:
    """The package data of ``py_files``: every file other than Python and Markdown whose nearest enclosing
    package (the deepest folder above it with an ``__init__.py``) is the folder of one of ``py_files`` (cost
    profiles, Java sources)."""
    folders = {path.rsplit("/", 1)[0] for path in py_files if "/" in path}
    packages = {path.rsplit("/", 1)[0] for path in tree.paths() if path.endswith("/__init__.py")}
    out = set()
    for path in tree.paths():
        if path.endswith(NOT_DATA):
            continue
        chain = path.split("/")[:-1]
        owner = next(("/".join(chain[:i]) for i in range(len(chain), 0, -1) if "/".join(chain[:i]) in packages),
                     None)
        if owner in folders:
            out.add(path)
    return out


@functools.lru_cache(maxsize=8192)
def _parse_bytes(content: bytes, path: str) -> ast.Module:
    try:
        return ast.parse(content, filename=path)
    except SyntaxError as exc:
        raise StalenessError(f"{path} does not parse: {exc}") from None


def _parse(tree: SourceTree, path: str) -> ast.Module:
    """The syntax tree of a file, shared between callers: read it, never change it."""
    return _parse_bytes(tree.read(path), path)


def _strip_docstrings(node: ast.AST) -> ast.AST:
    for current in ast.walk(node):
        if isinstance(current, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = current.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                current.body = body[1:] or [ast.Pass()]
    return node


def code_hash(node: ast.AST) -> str:
    """The hash of code as its syntax tree without docstrings: comments and layout do not change it."""
    text = ast.dump(_strip_docstrings(node), annotate_fields=False, include_attributes=False)
    return hashlib.sha256(text.encode()).hexdigest()


@functools.lru_cache(maxsize=8192)
def _content_hash(content: bytes, path: str) -> str:
    if path.endswith(".py"):
        return code_hash(copy.deepcopy(_parse_bytes(content, path)))
    return hashlib.sha256(content).hexdigest()


def file_hash(path: str, tree: SourceTree) -> str:
    """A file's hash: Python by its syntax tree without docstrings, anything else byte for byte."""
    return _content_hash(tree.read(path), path)


# ------------------------------------------------------------------ the definition module, by parts


@dataclass
class _Walk:
    """What a definition's measurement reaches in its own module: named parts, modules, backend names."""

    parts: dict[str, ast.AST] = field(default_factory=dict)
    modules: set[str] = field(default_factory=set)
    backends: set[str] = field(default_factory=set)


def _named(body: list[ast.stmt]) -> dict[str, ast.AST]:
    """The names a module's or a class's body defines: function, class or assigned name -> its node."""
    defs: dict[str, ast.AST] = {}
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defs[node.name] = node
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        defs[name.id] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            defs[node.target.id] = node
    return defs


def _imported_names(syntax: ast.Module, path: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for node in ast.walk(syntax):
        if isinstance(node, ast.Import):
            for alias in node.names:
                out[(alias.asname or alias.name).split(".")[0]] = alias.name if alias.asname else \
                    alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(path, node)
            for alias in node.names:
                out[alias.asname or alias.name] = f"{base}.{alias.name}"
    return out


def _called_name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) else None


def _experiment_classes(defs: dict[str, ast.AST]) -> list[ast.ClassDef]:
    """The classes whose instance is the module's ``EXPERIMENT`` (or, failing that, every class that defines
    ``measure``)."""
    assigned = defs.get("EXPERIMENT")
    if isinstance(assigned, ast.Assign) and isinstance(assigned.value, ast.Call) \
            and isinstance(assigned.value.func, ast.Name):
        cls = defs.get(assigned.value.func.id)
        if isinstance(cls, ast.ClassDef):
            return [cls]
    return [node for node in defs.values() if isinstance(node, ast.ClassDef)
            and any(isinstance(m, ast.FunctionDef) and m.name == "measure" for m in node.body)]


def _members(cls: ast.ClassDef) -> dict[str, ast.AST]:
    return _named(cls.body)


def walk_definition(syntax: ast.Module, path: str, roots: Iterable[str] = DEFINITION_ROOTS) -> _Walk:
    """Follow a definition module from the experiment class's ``roots`` through the names they use."""
    defs = _named(syntax.body)
    imported = _imported_names(syntax, path)
    walk = _Walk()
    classes = _experiment_classes(defs)
    if not classes:
        raise StalenessError(f"{path}: no experiment class (EXPERIMENT = SomeClass(), or a class with measure)")
    todo: list[tuple[str, ast.AST]] = []
    for cls in classes:
        members = _members(cls)
        walk.parts[f"{cls.name}(bases)"] = ast.Tuple(elts=list(cls.bases) + list(cls.decorator_list), ctx=ast.Load())
        todo.append((f"{cls.name}(bases)", walk.parts[f"{cls.name}(bases)"]))
        for root in roots:
            if root in members:
                todo.append((f"{cls.name}.{root}", members[root]))
    while todo:
        name, node = todo.pop()
        walk.parts[name] = node
        walk.modules |= import_names(node, path)
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call) and _called_name(sub.func) in BACKEND_CALLS and sub.args \
                    and isinstance(sub.args[0], ast.Constant) and isinstance(sub.args[0].value, str):
                walk.backends.add(sub.args[0].value)
            if isinstance(sub, ast.Name):
                if sub.id in defs and sub.id not in walk.parts:
                    target = defs[sub.id]
                    if isinstance(target, ast.ClassDef) and target in classes:
                        continue
                    todo.append((sub.id, target))
                elif sub.id in imported:
                    walk.modules.add(imported[sub.id])
            elif isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) \
                    and sub.value.id in ("self", "cls", "type"):
                for cls in classes:
                    member = _members(cls).get(sub.attr)
                    key = f"{cls.name}.{sub.attr}"
                    if member is not None and key not in walk.parts:
                        todo.append((key, member))
            elif isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and sub.func.id == "getattr" \
                    and sub.args and isinstance(sub.args[0], ast.Name) and sub.args[0].id == "self" \
                    and not (len(sub.args) > 1 and isinstance(sub.args[1], ast.Constant)):
                for cls in classes:    # a computed member name: every member may be reached
                    todo += [(f"{cls.name}.{m}", member) for m, member in _members(cls).items()
                             if f"{cls.name}.{m}" not in walk.parts]
    return walk


# ------------------------------------------------------------------ the key


@dataclass(frozen=True)
class CodeKey:
    """The code a unit measured: ``key`` over ``parts`` (a file's path, or ``path#name`` for a part of the
    definition module, -> its hash)."""

    key: str
    parts: dict[str, str]

    @staticmethod
    def of(parts: dict[str, str]) -> "CodeKey":
        text = json.dumps(sorted(parts.items()))
        return CodeKey(hashlib.sha256(text.encode()).hexdigest(), dict(sorted(parts.items())))

    def changed(self, other: "CodeKey") -> list[str]:
        """The parts (files, or parts of the definition) that differ between the two keys, or that one lacks."""
        names = set(self.parts) | set(other.parts)
        return sorted(n for n in names if self.parts.get(n) != other.parts.get(n))

    def to_dict(self) -> dict[str, object]:
        return {"key": self.key, "parts": self.parts}

    @staticmethod
    def from_dict(raw: dict[str, object]) -> "CodeKey":
        parts = raw.get("parts")
        if not isinstance(raw.get("key"), str) or not isinstance(parts, dict):
            raise StalenessError("a code key needs 'key' (text) and 'parts' (path -> hash)")
        return CodeKey(str(raw["key"]), {str(k): str(v) for k, v in parts.items()})


def measured_code(definition: str, backends: Iterable[str], backend_modules: dict[str, str],
                  tree: SourceTree) -> CodeKey:
    """The key of what a unit of the experiment defined in module ``definition`` reaches when its points run on
    ``backends`` (their modules from ``backend_modules``, backend name -> module, which also says which other
    backends a literal in the definition's reached code names)."""
    path = module_path(definition, tree)
    if path is None:
        raise StalenessError(f"the definition module {definition} is not in {tree.label}")
    walk = walk_definition(copy.deepcopy(_parse(tree, path)), path)
    named = [module for name, module in backend_modules.items() if name in walk.backends or name in backends]
    # the definition's packages run when it is imported; the definition itself counts by its reached parts
    entries = set(_with_parents(definition)[:-1]) | {*named, *RUNNER_MODULES}
    files = reached_files(sorted(entries | {m for m in walk.modules if m != definition}), tree)
    assert path not in files or definition in walk.modules or any(
        m.startswith(definition + ".") for m in walk.modules), "only an import of itself reaches the definition"
    files.discard(path)
    files |= data_files(files | {path}, tree)
    parts = {p: file_hash(p, tree) for p in files}
    parts.update({f"{path}#{name}": code_hash(node) for name, node in walk.parts.items()})
    return CodeKey.of(parts)
