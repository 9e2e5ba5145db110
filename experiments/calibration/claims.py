"""The published claims the calibration experiment judges (and those it is the home of but
no experiment tests), each a quote from its source (``experiments.publications``)."""

from __future__ import annotations

from experiments.publications import Claim

CLAIMS: dict[str, Claim] = {
    "doppio_error": Claim(
        "doppio", "prediction error rate within 10%", "within 10%", "Doppio's Spark workloads",
        "largest prediction error on configurations no fit saw", "at most", 10.0, 10.0, "%", "calibration",
        neutral=None, experiment="calibration"),
    "ernest_error": Claim(
        "ernest", "average prediction error is under 20%", "under 20%", "Ernest's workloads",
        "mean prediction error on configurations no fit saw", "below", 20.0, 20.0, "%", "calibration",
        neutral=None, experiment="calibration"),
}
