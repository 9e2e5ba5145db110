"""The published claims the checkpoint-interval experiment judges (and those it is the home of but
no experiment tests), each a quote from its source (``experiments.publications``)."""

from __future__ import annotations

from experiments.publications import Claim

CLAIMS: dict[str, Claim] = {
    "young_optimum": Claim(
        "young", "T = sqrt(2 C M)", "Young's first-order model", "simulated best interval, in doublings from "
        "Young's", "absolute", 0.0, 0.0, "doublings", 1.0,
        "a first-order approximation: a factor of two either way", neutral=None, experiment="checkpoint-interval"),
}
