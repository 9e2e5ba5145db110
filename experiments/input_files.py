"""Reading a file the user named on the command line, with one error for every way it cannot be read.

A named file is read only when it is a regular file (a FIFO, a device or a
socket is refused without being opened, so nothing blocks and ``/dev/zero``
is never read), no larger than ``reference.language.size.MAX_INPUT_FILE_BYTES`` (a
scenario: ``MAX_SCENARIO_FILE_BYTES``), and UTF-8. JSON is read by ``reference.language.json_input.loads``: a
repeated key, NaN or Infinity, or nesting deeper than ``reference.language.size.MAX_JSON_DEPTH`` is refused.
Every refusal is an ``InputFileError`` (or, for a scenario, a ``ScenarioError``)
naming the file and saying what was expected.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

from reference.language.json_input import JsonInputError, loads
from reference.language.scenario import Scenario, ScenarioError
from reference.language.size import MAX_INPUT_FILE_BYTES, MAX_SCENARIO_FILE_BYTES, file_too_large
from reference.protocol.storage import entry_kind


class InputFileError(ValueError):
    """A file the user named cannot be read; the message names it and says what was expected."""


def check_regular(path: str | Path, expected: str, limit: int = MAX_INPUT_FILE_BYTES) -> os.stat_result:
    """The file's status when ``path`` names a regular file of a size this reads; ``InputFileError`` naming it
    otherwise (missing, a directory, a FIFO or a device, too large), without opening it."""
    try:
        status = os.stat(path)
    except FileNotFoundError:
        raise InputFileError(f"{path}: no such file, expected {expected}") from None
    except OSError as exc:   # a link loop, a component that is a file, no permission
        raise InputFileError(f"{path}: cannot be read ({exc.strerror or exc}), expected {expected}") from None
    if stat.S_ISDIR(status.st_mode):
        raise InputFileError(f"{path}: is a directory, expected {expected}")
    if not stat.S_ISREG(status.st_mode):
        raise InputFileError(f"{path}: is a {entry_kind(status.st_mode)}, not a regular file (not opened), "
                             f"expected {expected}")
    why = file_too_large(status.st_size, limit)
    if why is not None:
        raise InputFileError(f"{path}: {why}, expected {expected}")
    return status


def read_text(path: str | Path, expected: str, limit: int = MAX_INPUT_FILE_BYTES) -> str:
    """The UTF-8 text of ``path``; ``InputFileError`` naming the path and ``expected`` (e.g. "an outcome JSON file")
    when it is missing, a directory or special file, larger than ``limit``, not UTF-8, or unreadable."""
    size = check_regular(path, expected, limit).st_size
    try:
        with open(path, "rb") as handle:
            data = handle.read(size + 1)   # one byte more shows a file that grew since it was looked at
    except OSError as exc:
        raise InputFileError(f"{path}: cannot be read ({exc.strerror or exc}), expected {expected}") from None
    why = file_too_large(len(data), limit)
    if why is not None:
        raise InputFileError(f"{path}: {why}, expected {expected}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputFileError(f"{path}: not UTF-8 text (byte {exc.start}), expected {expected}") from None


def read_json(path: str | Path, expected: str, limit: int = MAX_INPUT_FILE_BYTES) -> Any:
    """The JSON value in ``path`` (``read_text``, then ``reference.language.json_input.loads``); ``InputFileError``
    naming the file and what is wrong with its JSON."""
    text = read_text(path, expected, limit)
    try:
        return loads(text)
    except JsonInputError as exc:
        raise InputFileError(f"{path}: {exc}; expected {expected}") from None


def load_scenario(path: str) -> Scenario:
    """Read and validate a scenario file (``read_json``, then ``Scenario.from_dict``); a ``ScenarioError`` names
    the file and the field."""
    raw = read_json(path, "a scenario JSON file", MAX_SCENARIO_FILE_BYTES)
    try:
        return Scenario.from_dict(raw)
    except ScenarioError as exc:   # the file first, then the field
        exc.args = (f"{path}: {exc}",)
        raise
