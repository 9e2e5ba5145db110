"""A rule every subcommand's parser follows: an option that takes one value is given once.

``argparse`` keeps the last of an option given twice (``--backend sim --backend
spark`` runs on spark), so a command line that says two things does one of them
silently. ``once_only`` makes a parser refuse it, naming the option (exit 2, as
for any usage error). Options that collect values (``append``) and flags are
not affected.
"""

from __future__ import annotations

import argparse
from typing import Any, Sequence

_GIVEN = "_options_given"   # the namespace attribute listing the options given so far


class _Once(argparse._StoreAction):
    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: str | Sequence[Any] | None, option_string: str | None = None) -> None:
        if self.option_strings:
            given: set[str] = namespace.__dict__.setdefault(_GIVEN, set())
            if self.dest in given:
                parser.error(f"{'/'.join(self.option_strings)} is given twice; give it once")
            given.add(self.dest)
        super().__call__(parser, namespace, values, option_string)


def once_only(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Make every option of ``parser`` added from now on that stores one value refuse to be given twice."""
    parser.register("action", None, _Once)
    parser.register("action", "store", _Once)
    return parser
