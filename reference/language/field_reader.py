"""Reading a scenario's JSON field by field (spec section 1): every error names the field and what was expected.

``FieldReader`` gives typed access to one JSON object and names the dotted
path of each field it reads (``engine.progress.mode``); ``done`` refuses a
field nobody read, so a misspelt one is never silently ignored.
``ScenarioError`` is the one error a malformed scenario raises.
"""

from __future__ import annotations

import math
from typing import Any


MAX_INTEGER = 2**63 - 1   # every integer of a scenario fits a Spark long (offsets, ms, counts, seeds)


def _said(value: Any) -> str:
    """A value for an error message: an integer too long to print whole is said by its length."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 10**30:
        return f"an integer of about {int(abs(value).bit_length() * 0.30103) + 1:,} digits"
    return repr(value)[:200]


class ScenarioError(ValueError):
    """A scenario is malformed or asks for something unsupported. ``field`` names where."""

    def __init__(self, field_path: str, message: str):
        super().__init__(f"{field_path}: {message}")
        self.field = field_path


class FieldReader:
    """Typed access to one JSON object, naming the path of every field it reads."""

    def __init__(self, raw: Any, path: str):
        if not isinstance(raw, dict):
            raise ScenarioError(path or "<scenario>", f"expected an object, got {type(raw).__name__}")
        self.raw, self.path = raw, path
        self.used: set[str] = set()

    def at(self, name: str) -> str:
        return f"{self.path}.{name}" if self.path else name

    def get(self, name: str, default: Any = ...) -> Any:
        self.used.add(name)
        if name not in self.raw:
            if default is ...:
                raise ScenarioError(self.at(name), "required field is missing")
            return default
        return self.raw[name]

    def int(self, name: str, default: Any = ..., *, minimum: int | None = 0) -> int:
        value = self.get(name, default)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ScenarioError(self.at(name), f"expected an integer, got {_said(value)}")
        if minimum is not None and value < minimum:
            raise ScenarioError(self.at(name), f"expected an integer >= {minimum}, got {_said(value)}")
        if abs(value) > MAX_INTEGER:
            raise ScenarioError(self.at(name), f"expected an integer of at most {MAX_INTEGER:,} (a Spark long), got "
                                               f"{_said(value)}")
        return value

    def num(self, name: str, default: Any = ..., *, minimum: float = 0) -> float:
        value = self.get(name, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ScenarioError(self.at(name), f"expected a number, got {_said(value)}")
        if abs(value) > MAX_INTEGER:   # also before ``isfinite``, which cannot take an integer past a float
            raise ScenarioError(self.at(name), f"expected a number of at most {MAX_INTEGER:,}, got {_said(value)}")
        if not math.isfinite(value):
            raise ScenarioError(self.at(name), f"expected a finite number, got {value!r}")
        if value < minimum:
            raise ScenarioError(self.at(name), f"expected a number >= {minimum}, got {value}")
        return value

    def choice(self, name: str, options: tuple[str, ...], default: Any = ...) -> str:
        value = self.get(name, default)
        if value not in options:
            raise ScenarioError(self.at(name), f"expected one of {', '.join(options)}; got {value!r}")
        return value

    def bool(self, name: str, default: Any = ...) -> bool:
        value = self.get(name, default)
        if not isinstance(value, bool):
            raise ScenarioError(self.at(name), f"expected true or false, got {value!r}")
        return value

    def obj(self, name: str, default: Any = ...) -> "FieldReader":
        return FieldReader(self.get(name, default), self.at(name))

    def done(self) -> None:
        extra = sorted(set(self.raw) - self.used)
        if extra:
            raise ScenarioError(self.at(extra[0]), "unknown field (check the spelling against docs/spec.md)")


def drop_none(d: dict[str, Any]) -> dict[str, Any]:
    """``d`` without its None values: the canonical JSON leaves unset optional fields out."""
    return {k: v for k, v in d.items() if v is not None}
