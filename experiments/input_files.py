"""Reading a file the user named on the command line, with one error for every way it cannot be read."""

from __future__ import annotations

from pathlib import Path


class InputFileError(ValueError):
    """A file the user named cannot be read; the message names it and says what was expected."""


def read_text(path: str | Path, expected: str) -> str:
    """The UTF-8 text of ``path``; ``InputFileError`` naming the path and ``expected`` (e.g. "an outcome JSON file")
    when it is missing, a directory, not UTF-8, or unreadable."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputFileError(f"{path}: no such file, expected {expected}") from None
    except IsADirectoryError:
        raise InputFileError(f"{path}: is a directory, expected {expected}") from None
    except UnicodeDecodeError as exc:
        raise InputFileError(f"{path}: not UTF-8 text (byte {exc.start}), expected {expected}") from None
    except OSError as exc:
        raise InputFileError(f"{path}: cannot be read ({exc.strerror or exc}), expected {expected}") from None
