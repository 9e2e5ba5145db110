"""The published claims the bug zoo judges: none (each bug's JIRA report is its source; the zoo checks that the
project's checks catch it)."""

from __future__ import annotations

from experiments.publications import Claim

CLAIMS: dict[str, Claim] = {}
