"""Where the published claims come from and what a claim is: the sources (``SOURCES``), the ``Claim`` type, the
rules that read a claim's target from the post's own words, and the tallies claims are counted in. Each
experiment keeps the claims it judges in its own folder (``experiments/<name>/claims.py``); ``experiments.claims``
gathers them into the one table.

Each ``Claim`` carries the source it comes from, the exact sentence that states it (``tests/quick/test_claims.py``
finds it in the archived copy of the post), the post's own words for the number (``words``, a part of that
sentence) and the **rule** that reads a target from those words. The rule is the whole of the registration: no
claim carries a tolerance. A verdict (``experiments.verdicts``) widens the target by nothing but the noise it
measured, the 95% confidence interval over at least three seeds. The rules (``RULES``):

- ``range``: "2-3x", "85-86%", "200-250 ms" is that range, ends included;
- ``approximately``: "approximately 50%", "around 500 ms" is the values a writer rounds to that number at its
  last non-zero digit: 50 is 45 to 55, 65 is 64.5 to 65.5, 500 is 450 to 550, a whole millisecond of a table
  (1) is 0.5 to 1.5;
- ``up to``: "up to 25%" is any effect past no effect (``neutral``) up to it, (0, 25];
- ``below``: "below 100 ms", "under 20%" is strictly less, (-inf, 100);
- ``at most``: a bound every run must keep ("may need to re-process two micro-batches": at most 2; "within
  10%"): every seed's value, not their mean, is judged against it;
- ``more``, ``less``: a direction with no size ("even bigger improvements in peak"): past ``neutral`` on that
  side.

A claim's **category** says which tally it counts in (``TALLIES``): ``published``, a number one of the
Lightspeed posts publishes; every other category (a direction we ``derived`` from a post's description, an
``external`` figure such as Flink's or Young's formula, an ``anchor`` from the real-time benchmark, a
``calibration`` target from the performance-model literature) is counted in the other tally, never mixed with
the first.

The archived posts are not part of the repository: the quote check (``tests/quick/test_claims.py``) reads them from
``$LIGHTSPEED_SOURCES`` and is skipped, saying why, without it; ``.ci/run`` sets it and
``LIGHTSPEED_STRICT_SOURCES=1``, which makes their absence a failure. Each quote records the digest (sha256) of the
copy it was found in (``checked_against``): a quote that is not in its post is a wrong quote when the post is that
copy, and a changed post otherwise (``quote_problem``). Nothing else in the project keeps a copy of a published
number.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

RATE_SOURCE = "rate source to stat sink"
KAFKA = "Kafka source to Kafka sink"
HEADLINE = "overall headline"
RULES = ("range", "approximately", "up to", "below", "at most", "more", "less")
# how a measured value in percent reads, one convention everywhere: "lower" (a cut: 33 is "33% lower", -10 is
# "10% higher"), "higher" (an increase), "faster", and "points" (a difference of two percentages)
SENSES = ("", "lower", "higher", "faster", "points")
CATEGORIES = ("published", "derived", "external", "anchor", "calibration")
LIGHTSPEED, OTHER = "the Lightspeed posts' published numbers", "everything else"
TALLIES = {"published": LIGHTSPEED, "derived": OTHER, "external": OTHER, "anchor": OTHER, "calibration": OTHER}
LIGHTSPEED_SOURCES = ("subsecond", "update", "rocksdb", "asyncstate")
SOURCES_ENV = "LIGHTSPEED_SOURCES"      # the folder of the archived posts (not in the repository)
MINUS, TIMES, DASH = "\u2212", "\u00d7", "\u2013"
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
class Target:
    """The values a claim's rule admits: from ``low`` to ``high``, each end open or closed (an infinite end is
    open)."""

    low: float
    high: float
    low_open: bool = False
    high_open: bool = False

    def contains(self, value: float) -> bool:
        above = value > self.low if self.low_open else value >= self.low
        below = value < self.high if self.high_open else value <= self.high
        return above and below

    def holds_all(self, low: float, high: float) -> bool:
        """Every value from ``low`` to ``high`` is admitted."""
        return self.contains(low) and self.contains(high)

    def holds_none(self, low: float, high: float) -> bool:
        """No value from ``low`` to ``high`` is admitted."""
        return (high < self.low or (high == self.low and self.low_open)
                or low > self.high or (low == self.high and self.high_open))


def rounding_half(value: float) -> float:
    """Half the place value of ``value``'s last non-zero digit (50 -> 5, 65 -> 0.5, 500 -> 50, 1.5 -> 0.05): how
    far a number a writer rounds to ``value`` may lie from it."""
    if value == 0:
        return 0.5
    place = 10.0 ** math.floor(math.log10(abs(value)))
    while place > 1e-9 and not math.isclose(round(value / place) * place, value, rel_tol=1e-12, abs_tol=1e-12):
        place /= 10.0
    return place / 2.0


@dataclass(frozen=True)
class Claim:
    """One published number: the quote it comes from, the post's own words for it, the rule that reads its
    target from those words, its category, and which experiment judges it (or why none does)."""

    source: str                  # a key of SOURCES
    quote: str                   # the sentence as the post has it (or, for a source with no copy, its words)
    words: str                   # the part of the quote that states the number (what the rule reads)
    benchmark: str
    what: str                    # what the number is, in a few words (the paper's label)
    rule: str                    # one of RULES
    low: float                   # the published value, or the range's ends (more/less: the values are unused)
    high: float
    unit: str                    # "%", "x", "ms", "batches", "doublings"
    category: str                # one of CATEGORIES
    neutral: float | None = 0.0  # the value meaning no effect (None: the number has no direction)
    experiment: str | None = None   # the experiment that judges it (experiments.registry); None: none does
    untested: str = ""           # why no experiment judges it
    sense: str = ""              # how a measured value reads in words (SENSES); "": as a plain number
    checked_against: str = ""    # sha256 of the archived post the quote was found in ("": no archived copy)

    def __post_init__(self) -> None:
        assert self.sense in SENSES, f"claim sense {self.sense!r} is not one of {SENSES}"
        assert self.rule in RULES, f"claim rule {self.rule!r} is not one of {RULES}"
        assert self.category in CATEGORIES, f"claim category {self.category!r} is not one of {CATEGORIES}"
        assert (SOURCES[self.source].file is None) == (not self.checked_against), (
            "a quote from an archived post names the post's digest it was checked against, and only such a quote")
        assert not self.checked_against or re.fullmatch(r"[0-9a-f]{64}", self.checked_against), \
            f"checked_against is a sha256 in hex, not {self.checked_against!r}"
        assert self.low <= self.high, f"published range {self.low}..{self.high} is reversed"
        assert self.words and self.words in self.quote, f"the words {self.words!r} are not in the quote"
        assert self.rule in ("range",) or self.low == self.high, f"a {self.rule} claim states one number"
        assert self.rule not in ("up to", "more", "less") or self.neutral is not None, \
            f"a {self.rule} claim is measured from its neutral (no effect)"
        assert self.category != "published" or self.source in LIGHTSPEED_SOURCES, \
            "a published claim comes from a Lightspeed post"
        assert (self.experiment is None) == bool(self.untested), "a claim is judged by an experiment, or says why not"

    @property
    def tally(self) -> str:
        """The tally the claim counts in (``TALLIES``)."""
        return TALLIES[self.category]

    @property
    def target(self) -> Target:
        """The values the rule admits, read from the post's words and nothing else."""
        return target_of(self.rule, self.low, self.high, self.neutral)

    @property
    def published(self) -> str:
        """The published value as the paper and the reports show it."""
        return published_text(self.rule, self.low, self.high, self.unit, self.neutral)

    def registration(self) -> dict[str, object]:
        """What the claim registers before any result is judged against it: its rule, numbers, unit, neutral and
        category (the fields ``tests/quick/test_registration.py`` follows through the history)."""
        return {"rule": self.rule, "low": self.low, "high": self.high, "unit": self.unit, "neutral": self.neutral,
                "category": self.category, "words": self.words}


def target_of(rule: str, low: float, high: float, neutral: float | None) -> Target:
    """The values ``rule`` admits for a claim stating ``low``..``high`` (one number: both the same)."""
    inf = math.inf
    if rule == "range":
        return Target(low, high)
    if rule == "approximately":
        half = rounding_half(low)
        return Target(low - half, low + half)
    if rule == "up to":
        assert neutral is not None
        return Target(neutral, high, low_open=True) if high > neutral else Target(low, neutral, high_open=True)
    if rule == "below":
        return Target(-inf, high, True, True)
    if rule == "at most":
        return Target(-inf, high, low_open=True)
    if rule in ("more", "less"):
        assert neutral is not None
        return Target(neutral, inf, True, True) if rule == "more" else Target(-inf, neutral, True, True)
    raise ValueError(f"unknown claim rule {rule!r}; expected one of {', '.join(RULES)}")


def plain_number(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() or abs(value) >= 100 else f"{value:,.2f}".rstrip("0").rstrip(".")


def published_text(rule: str, low: float, high: float, unit: str, neutral: float | None) -> str:
    """A claim's published value as every report and the paper show it: "2\u20133\u00d7", "about 50%", "up to
    25%", "below 100 ms", "at most 2 batches", "more"."""
    if rule in ("more", "less"):
        return rule
    text = plain_number(low) if low == high else f"{plain_number(low)}{DASH}{plain_number(high)}"
    prefix = {"approximately": "about ", "up to": "up to ", "below": "below ", "at most": "at most "}.get(rule, "")
    if unit == "batches" and low == high == 1:
        unit = "batch"
    return prefix + text + ("" if not unit else {"%": "%", "x": TIMES}.get(unit, f" {unit}"))


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
