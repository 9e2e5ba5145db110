"""JSON read from outside the process: a file the user named, or a file of a checkpoint directory.

Python's ``json`` module accepts what no file of ours holds and what a hostile
file can use against the reader: a key given twice (the last one silently
wins), ``NaN`` and ``Infinity`` (not JSON at all), nesting deep enough to
exhaust the interpreter's stack, and an integer of more digits than Python
converts (4,300: a ``ValueError`` that was a traceback). ``loads`` refuses each, with a message that
says what and where, and never the document's content.
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any

from .size import MAX_JSON_DEPTH


class JsonInputError(ValueError):
    """A JSON text that is malformed, or well-formed but refused (a repeated key, NaN, too deep)."""


def _no_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise JsonInputError(f"key {json.dumps(key)[:80]} is given twice in one object")
        out[key] = value
    return out


def loads(text: str | bytes) -> Any:
    """The JSON value of ``text``; ``JsonInputError`` for malformed JSON, a repeated key, ``NaN`` or
    ``Infinity`` (naming where: ``progress[0].durationMs.walCommit``), or nesting deeper than
    ``MAX_JSON_DEPTH``."""
    constants: list[str] = []

    def constant(name: str) -> float:
        constants.append(name)
        return float(name.lower().replace("infinity", "inf"))
    try:
        value = json.loads(text, object_pairs_hook=_no_repeats, parse_constant=constant)
    except RecursionError:
        raise JsonInputError(f"nested deeper than the {MAX_JSON_DEPTH} levels this reads") from None
    except json.JSONDecodeError as exc:
        raise JsonInputError(f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except UnicodeDecodeError as exc:
        raise JsonInputError(f"not UTF-8 text (byte {exc.start})") from None
    except JsonInputError:
        raise
    except ValueError:   # an integer past Python's conversion limit (4,300 digits): no field holds one
        raise JsonInputError(f"holds an integer of more than {sys.get_int_max_str_digits():,} digits, more than "
                             "any field holds or this reads") from None
    depth = nesting(value)
    if depth > MAX_JSON_DEPTH:
        raise JsonInputError(f"nested {depth} levels deep, deeper than the {MAX_JSON_DEPTH} this reads")
    if constants:
        raise JsonInputError(f"{_where_not_finite(value)}: {constants[0]} is not a number JSON allows")
    return value


def _where_not_finite(value: Any) -> str:
    """The path (``a.b[2]``) of the first NaN or infinity in ``value``, which holds one."""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        item, path = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return path or "<document>"
        if isinstance(item, dict):
            stack.extend((v, f"{path}.{k}" if path else str(k)) for k, v in reversed(list(item.items())))
        elif isinstance(item, list):
            stack.extend((v, f"{path}[{i}]") for i, v in reversed(list(enumerate(item))))
    raise AssertionError("a constant was parsed, so the value holds one")


def nesting(value: Any) -> int:
    """How deep lists and objects nest in ``value`` (a scalar is 0), without recursion."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in children)
    return deepest
