"""The published claims the explorer judges: none (it checks every oracle on every schedule it reaches; the
bounds it checks are the protocol's, ``reference/judge/bounds.py``)."""

from __future__ import annotations

from experiments.publications import Claim

CLAIMS: dict[str, Claim] = {}
