"""The published claims the parallel-store-commit experiment judges (and those it is the home of but
no experiment tests), each a quote from its source (``experiments.publications``)."""

from __future__ import annotations

from experiments.publications import Claim

CLAIMS: dict[str, Claim] = {
    "psc_latency": Claim(
        "rocksdb", "For such queries, we now support parallel commits of state stores for all instances associated "
        "with a partition, thereby improving latency.", "the post's description (no benchmark)",
        "mean batch duration cut, parallel store commits", "direction", 0.0, 1.0, "%", 5.0,
        "the engine's batch durations on a shared 2-core machine vary by more than that between runs",
        experiment="parallel-store-commit",
        checked_against="cb2a0901d70eb3badd267fc45baf8f19fcc23c8e48df3a89836b24c2c4b5344b"),
}
