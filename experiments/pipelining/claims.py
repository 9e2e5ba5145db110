"""The published claims the pipelining experiment judges (and those it is the home of but
no experiment tests), each a quote from its source (``experiments.publications``)."""

from __future__ import annotations

from experiments.publications import Claim

CLAIMS: dict[str, Claim] = {
    "pipe_speedup": Claim(
        "update", "In the benchmarks we have run so far to quantify the performance uplift pipelined execution "
        "gives, we have noticed a 2-3x improvement in throughput and cost reduction.",
        "the update post's pipelining benchmarks (not described)", "throughput speed-up from pipelining", "range",
        2.0, 3.0, "x", 0.5, "the post gives neither its pipeline depth nor its stragglers; half a unit of "
        "speed-up either way", neutral=1.0, experiment="pipelining",
        checked_against="49c2f9413fcf991f01cf370b01c6038b745ca2fa4d2f6aa464f36f0b20d32c10"),
}
