"""The published claims the calibration experiment judges (and those it is the home of but
no experiment tests), each a quote from its source (``experiments.publications``)."""

from __future__ import annotations

from experiments.publications import Claim

CLAIMS: dict[str, Claim] = {
    "doppio_error": Claim(
        "doppio", "prediction error rate within 10%", "Doppio's Spark workloads",
        "largest prediction error on configurations the fit did not see", "ceiling", 10.0, 10.0, "%", 0.0,
        "the published bound as it stands", neutral=None, experiment="calibration"),
    "ernest_error": Claim(
        "ernest", "average prediction error is under 20%", "Ernest's workloads",
        "mean prediction error on configurations the fit did not see", "ceiling", 20.0, 20.0, "%", 0.0,
        "the published bound as it stands", neutral=None, experiment="calibration"),}
