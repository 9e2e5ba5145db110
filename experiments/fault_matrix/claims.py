"""The published claims the fault-matrix experiment judges: none (it checks the project against itself, not against
a published number)."""

from __future__ import annotations

from experiments.publications import Claim

CLAIMS: dict[str, Claim] = {}
