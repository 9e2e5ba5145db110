"""Where the published claims come from and what a claim is: the sources (``SOURCES``), the ``Claim`` type and
its kinds. Each experiment keeps the claims it judges in its own folder (``experiments/<name>/claims.py``);
``experiments.claims`` gathers them into the one table.

Each ``Claim`` carries the post it comes from (``SOURCES``), the exact
sentence that states it (``tests/quick/test_claims.py`` finds it in the archived
copy of the post), the digest (sha256) of the copy it was found in, the
benchmark it belongs to, its kind, the published value or range, and the
tolerance a verdict allows, with the reason for it.

The archived posts are not part of the repository: the quote check reads them
from ``$LIGHTSPEED_SOURCES`` and is skipped, saying why, without it; ``.ci/run``
sets it and ``LIGHTSPEED_STRICT_SOURCES=1``, which makes their absence a
failure. A quote that is not in its post is a wrong quote when the post is the
copy the quote was checked against, and a changed post otherwise
(``quote_problem``). An
experiment judges the claims it tests (``experiments.verdicts.judge``) once,
where it measures them; the paper renders those verdicts and the claims'
own fields from here. Nothing else in the project keeps a copy of a
published number.

Kinds (how ``judge`` reads a claim):

- ``range``: a value or range with a direction (a cut, a speed-up, a
  saving): within the tolerance of it is reproduced; further away but on the
  same side of ``neutral`` (no effect) is direction only;
- ``ceiling``: "up to" or "below" a value: with a ``neutral``, any effect
  from just past it up to the ceiling (plus the tolerance) reproduces it, a
  larger one is direction only; without one (an absolute bound such as a
  latency or a count of batches), anything up to the ceiling plus the
  tolerance does;
- ``direction``: more or less, with no size ("even bigger at the peak"): the
  measured difference must lie past zero, on the claimed side, by more than
  the tolerance;
- ``absolute``: a number with no direction (an optimum, in doublings from a
  formula's): within the tolerance, or not reproduced.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

RATE_SOURCE = "rate source to stat sink"
KAFKA = "Kafka source to Kafka sink"
HEADLINE = "overall headline"
KINDS = ("range", "ceiling", "direction", "absolute")
SOURCES_ENV = "LIGHTSPEED_SOURCES"      # the folder of the archived posts (not in the repository)
STRICT_SOURCES_ENV = "LIGHTSPEED_STRICT_SOURCES"   # "1": without the posts the quote check fails, not skips


@dataclass(frozen=True)
class Source:
    """A publication claims are quoted from: its bibliography key, title, archived file (under the shared
    sources directory; None for a source the project keeps no copy of) and address."""

    bib: str
    title: str
    file: str | None
    url: str


@dataclass(frozen=True)
class Claim:
    """One published number: its quote, benchmark, kind, value, unit, tolerance and why that tolerance."""

    source: str                  # a key of SOURCES
    quote: str                   # the sentence as the post has it (or, for a source with no copy, its words)
    benchmark: str
    what: str                    # what the number is, in a few words (the paper's label)
    kind: str                    # one of KINDS
    low: float                   # the published value, or the range's ends (direction: +1 more, -1 less)
    high: float
    unit: str                    # "%", "x", "ms", "batches", "doublings"
    tolerance: float             # in ``unit`` (percentage points for "%")
    tolerance_reason: str
    neutral: float | None = 0.0  # the value meaning no effect (None: the number has no direction)
    experiment: str | None = None   # the experiment that judges it (experiments.registry); None: none does
    untested: str = ""           # why no experiment judges it
    checked_against: str = ""    # sha256 of the archived post the quote was found in ("": no archived copy)

    def __post_init__(self) -> None:
        assert (SOURCES[self.source].file is None) == (not self.checked_against), (
            "a quote from an archived post names the post's digest it was checked against, and only such a quote")
        assert not self.checked_against or re.fullmatch(r"[0-9a-f]{64}", self.checked_against), \
            f"checked_against is a sha256 in hex, not {self.checked_against!r}"
        assert self.kind in KINDS, f"claim kind {self.kind!r} is not one of {KINDS}"
        assert self.low <= self.high, f"published range {self.low}..{self.high} is reversed"
        assert self.tolerance >= 0 and self.tolerance_reason, "every tolerance has a reason"
        assert (self.experiment is None) == bool(self.untested), "a claim is judged by an experiment, or says why not"

    @property
    def published(self) -> str:
        """The published value as the paper and the reports show it."""
        if self.kind == "direction":
            return "more" if self.high > 0 else "less"
        text = _num(self.low) if self.low == self.high else f"{_num(self.low)}-{_num(self.high)}"
        prefix = {"ceiling": "up to " if self.neutral is not None else "at most "}.get(self.kind, "")
        unit = "batch" if self.unit == "batches" and self.low == self.high == 1 else self.unit
        return prefix + text + ("" if not unit else unit if unit in ("%", "x") else f" {unit}")


def _num(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.2f}".rstrip("0")


SOURCES: dict[str, Source] = {
    "subsecond": Source("peng2023subsecond", "Latency goes subsecond in Apache Spark Structured Streaming",
                        "subsecond-latency-offset-management.txt",
                        "https://www.databricks.com/blog/latency-goes-subsecond-apache-spark-structured-streaming"),
    "update": Source("databricks2023update",
                     "Project Lightspeed Update: Advancing Apache Spark Structured Streaming", "lightspeed-update.txt",
                     "https://www.databricks.com/blog/project-lightspeed-update-advancing-apache-spark-structured-"
                     "streaming"),
    "rocksdb": Source("mazouchi2023deepdive", "A Deep Dive into the Latest Performance Improvements of Stateful "
                      "Pipelines in Apache Spark Structured Streaming", "rocksdb-state-store-deep-dive.txt",
                      "https://www.databricks.com/blog/deep-dive-latest-performance-improvements-stateful-pipelines-"
                      "apache-spark-structured-streaming"),
    "asyncstate": Source("databricks2022asyncstate", "Speed Up Streaming Queries With Asynchronous State "
                         "Checkpointing", "async-state-checkpointing.txt",
                         "https://www.databricks.com/blog/2022/05/02/speed-up-streaming-queries-with-asynchronous-"
                         "state-checkpointing.html"),
    "flink": Source("khachatryan2022changelog", "Improving speed and stability of checkpointing with generic "
                    "log-based incremental checkpoints", None,
                    "https://flink.apache.org/2022/05/30/improving-speed-and-stability-of-checkpointing-with-"
                    "generic-log-based-incremental-checkpoints/"),
    "young": Source("young1974", "A first order approximation to the optimum checkpoint interval", None,
                    "https://doi.org/10.1145/361147.361115"),
    "doppio": Source("zhou2018doppio", "Doppio: I/O-Aware Performance Analysis, Modeling and Optimization for "
                     "In-Memory Computing Framework", None,
                     "https://peipeizhou-eecs.github.io/publication/2018_ispass/"),
    "ernest": Source("venkataraman2016ernest", "Ernest: Efficient Performance Prediction for Large-Scale Advanced "
                     "Analytics", None,
                     "https://www.usenix.org/conference/nsdi16/technical-sessions/presentation/venkataraman"),
    "rtmbench": Source("databricksrtmbench", "Streaming Latency Benchmark Suite (Spark Real-Time Mode and Flink)",
                       None, "https://github.com/databricks-solutions/latency-benchmarks"),
}


def sources_dir() -> Path | None:
    """The folder of the archived posts, ``$LIGHTSPEED_SOURCES``; None when it is not set. The repository holds
    no copy of the posts and looks for them nowhere else."""
    folder = os.environ.get(SOURCES_ENV)
    return Path(folder) if folder else None


def post_digest(post: bytes) -> str:
    """The digest a claim records of the post its quote was checked against."""
    return hashlib.sha256(post).hexdigest()


def quote_problem(claim: Claim, folder: Path) -> str | None:
    """What is wrong with ``claim``'s quote against its archived post in ``folder``: None when the quote is in the
    post it was checked against; otherwise whether the quote is wrong (the post is that copy) or the post changed
    (its digest is not the one the claim records)."""
    name = SOURCES[claim.source].file
    assert name is not None, f"source {claim.source!r} has no archived copy"
    post = (folder / name).read_bytes()
    digest = post_digest(post)
    found = claim.quote in post.decode("utf-8")
    if found and digest == claim.checked_against:
        return None
    if digest != claim.checked_against:
        return (f"{name} changed since the quote was checked (sha256 {digest}, the claim records "
                f"{claim.checked_against}): " + ("the quote is still in it; record the new digest" if found else
                                                  "the quote is not in it; check the quote against the new post"))
    return f"the quote is not in {name}, the copy it was checked against (sha256 {digest}): the quote is wrong"
