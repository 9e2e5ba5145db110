"""The published claims the parallel-store-commit experiment judges (and those it is the home of but
no experiment tests), each a quote from its source (``experiments.publications``)."""

from __future__ import annotations

from experiments.publications import Claim

CLAIMS: dict[str, Claim] = {
    "psc_latency": Claim(
        "rocksdb", "For such queries, we now support parallel commits of state stores for all instances associated "
        "with a partition, thereby improving latency.", "thereby improving latency",
        "the post's description (no benchmark)", "mean batch duration cut, parallel store commits", "more", 0.0, 0.0,
        "%", "derived", experiment="parallel-store-commit", sense="lower",
        checked_against="cb2a0901d70eb3badd267fc45baf8f19fcc23c8e48df3a89836b24c2c4b5344b"),
}
