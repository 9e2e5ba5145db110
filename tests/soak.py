"""Soak runs: what ``make test`` runs in a short form and ``make soak`` runs whole.

A test marked ``soak`` covers a space exhaustively (every operator under every
mode, say). ``make test`` runs it over a short list that still touches every
part of that space once; ``make soak`` (``LIGHTSPEED_SOAK=1 pytest -m soak``)
runs the whole list. (Many more Hypothesis examples: ``HYPOTHESIS_PROFILE=thorough``.)
"""

from __future__ import annotations

import os
from typing import Sequence, TypeVar

T = TypeVar("T")

SOAK = os.environ.get("LIGHTSPEED_SOAK") == "1"


def soak_or_short(whole: Sequence[T], short: Sequence[T]) -> list[T]:
    """``whole`` under ``make soak``, else ``short`` (which must be part of ``whole``)."""
    missing = [case for case in short if case not in whole]
    assert not missing, f"the short form runs cases the soak run does not: {missing}"
    return list(whole if SOAK else short)
