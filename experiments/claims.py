"""The published claims: one table of every number the project tests, each a quote from its post.

Each ``Claim`` carries the post it comes from (``SOURCES``), the exact
sentence that states it (``tests/test_claims.py`` finds it in the archived
copy of the post), the benchmark it belongs to, its kind, the published value
or range, and the tolerance a verdict allows, with the reason for it. An
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

Benchmarks of the sub-second post (``subsecond``): its "rate source to stat
sink" benchmark gives the per-feature cuts (about 50%, 65%, 85-86% together,
below 100 ms); its "Kafka source to Kafka sink" benchmark gives 65-75%; the
post's headline (700-900 ms to 150-250 ms, 68-75%) matches the Kafka figure
and not the rate source's (an 85% cut cannot take 700-900 ms to 150-250 ms).
The summary's "200-250 ms for each config, around 500 ms together" is read
with the rate-source figures, whose baseline it implies (a 50% cut saving
200-250 ms is a 400-500 ms baseline). The offset-management experiment models
the rate-source benchmark, so it judges those figures only; the headline and
the Kafka figures are listed with the reason no experiment tests them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

RATE_SOURCE = "rate source to stat sink"
KAFKA = "Kafka source to Kafka sink"
HEADLINE = "overall headline"
KINDS = ("range", "ceiling", "direction", "absolute")
SOURCES_ENV = "LIGHTSPEED_SOURCES"      # where the archived posts are, when not beside the repository


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

    def __post_init__(self) -> None:
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

_APPROX = ("the post says 'approximately' and gives its charts' values only as bars; 10 points allow that "
           "rounding and the few points a cut moves between seeds")
_STATE_DIRECTION = ("twice the spread of the mean cut over seeds in the simulator's full run (32.7-33.9% at "
                    "100,000 keys, 35.5-36.7% at 50,000,000)")
# sentences that state two claims each
_SAVINGS = ("The charts also show that the amount of time saved is usually a constant amount of time (200 – 250 ms "
            "for each config) and together they can shave off around 500 ms across the board (leaving enough time "
            "for batch planning and query processing).")
_ASC_MEAN = ("Through testing a combination of in-house and customer workloads on both file and message bus sources, "
             "we’ve found average micro-batch duration can improve by up to 25% for streams that have large state "
             "sizes with millions of entries.")
_BOTH = "Combined together, the latency reduces by 85-86% and the latency goes below 100 ms."
_HEADLINE_UNTESTED = ("the headline summarises the Kafka-to-Kafka benchmark (its 68-75% is that benchmark's "
                      "65-75%, not the rate source's 85-86%), which needs a Kafka source and sink no backend has")

# Databricks' real-time mode benchmark (databricks-solutions/latency-benchmarks, README "Benchmark Results", at
# commit cd9382ab): Kafka to Kafka, 10,000 rows/s, p50/p90/p95/p99 after a 5-minute warmup, the worst run for Spark.
_RTM_A = "Query A, stateless transformation, Kafka to Kafka at 10,000 rows/s (Databricks)"
_RTM_B = "Query B, GroupBy + Count, Kafka to Kafka at 10,000 rows/s (Databricks)"
_RTM_TOLERANCE = ("half the value: an anchor, not a target. The published figures are whole milliseconds, the worst "
                  "of several runs; the simulator's cost model is not fitted to this benchmark (Kafka to Kafka on a "
                  "Databricks cluster, 40 partitions, ~1,200-byte records), so the verdict says only whether "
                  "first-principles costs land near it")

CLAIMS: dict[str, Claim] = {
    # ------------------------------------------------ sub-second latency: offset management
    "om_headline": Claim(
        "subsecond", "Extensive evaluation of these enhancements indicates that the latency has improved by 68-75% "
        "– or as much as 3Xfrom 700-900 ms to 150-250 ms for throughputs of 100K events/sec, 500K events/sec and "
        "1M events/sec.", HEADLINE, "latency cut, both features (700-900 ms to 150-250 ms)", "range", 68.0, 75.0,
        "%", 10.0, _APPROX, untested=_HEADLINE_UNTESTED),
    "om_cut_purge": Claim(
        "subsecond", "As you can see, async log purging consistently reduces the latency approximately by 50%.",
        RATE_SOURCE, "p50 cut, async log purge", "range", 50.0, 50.0, "%", 10.0, _APPROX,
        experiment="offset-management"),
    "om_cut_progress": Claim(
        "subsecond", "Similarly, async progress tracking alone improves latency by approximately 65%.",
        RATE_SOURCE, "p50 cut, async progress tracking", "range", 65.0, 65.0, "%", 10.0, _APPROX,
        experiment="offset-management"),
    "om_cut_both": Claim(
        "subsecond", _BOTH,
        RATE_SOURCE, "p50 cut, both features", "range", 85.0, 86.0, "%", 10.0,
        "the same 10 points as the single features' approximate cuts, so the three are judged alike",
        experiment="offset-management"),
    "om_both_below_ms": Claim(
        "subsecond", _BOTH,
        RATE_SOURCE, "p50 latency, both features", "ceiling", 100.0, 100.0, "ms", 0.0,
        "a bound the post states as such; absolute latencies compare only on the published cluster's shape",
        neutral=None, experiment="offset-management"),
    "om_saved_per_feature_ms": Claim(
        "subsecond", _SAVINGS, RATE_SOURCE,
        "p50 saved by one feature", "range", 200.0, 250.0, "ms", 50.0,
        "'usually': the post's own range is 50 ms wide, and another 50 ms either way allow its charts' spread",
        experiment="offset-management"),
    "om_saved_both_ms": Claim(
        "subsecond", _SAVINGS, RATE_SOURCE, "p50 saved by both features",
        "range", 500.0, 500.0, "ms", 100.0, "'around': a fifth of the value", experiment="offset-management"),
    "om_kafka_cut": Claim(
        "subsecond", "As one can see, after applying async progress and async log purging, the latency reduces by "
        "65-75% or 3-3.5X across different throughputs.", KAFKA, "latency cut, both features", "range", 65.0, 75.0,
        "%", 10.0, _APPROX, untested="no backend has a Kafka source and sink"),
    "om_update_headline": Claim(
        "update", "Performance experiments show a consistent reduction of as much as 3X from 700-900 ms to 150-250 "
        "ms in latency for throughputs of 100K, 500K and 1M events/sec.", HEADLINE,
        "latency with async progress tracking (700-900 ms to 150-250 ms)", "range", 150.0, 250.0, "ms", 100.0,
        "the headline's own range width", neutral=None, untested=_HEADLINE_UNTESTED),
    "om_update_purge_ms": Claim(
        "update", "Our performance evaluation indicates that it reduces latency by 200-300 ms for throughputs of "
        "100K, 500K and 1M events/sec.", HEADLINE, "latency saved by async log purge", "range", 200.0, 300.0, "ms",
        50.0, "as the sub-second post's saving per feature",
        untested="the update post restates the benchmarks without saying which; the experiment judges the "
                 "sub-second post's own rate-source figures (200-250 ms per feature)"),
    # ------------------------------------------------ the update post: pipelining, state
    "pipe_speedup": Claim(
        "update", "In the benchmarks we have run so far to quantify the performance uplift pipelined execution "
        "gives, we have noticed a 2-3x improvement in throughput and cost reduction.",
        "the update post's pipelining benchmarks (not described)", "throughput speed-up from pipelining", "range",
        2.0, 3.0, "x", 0.5, "the post gives neither its pipeline depth nor its stragglers; half a unit of "
        "speed-up either way", neutral=1.0, experiment="pipelining"),
    "state_commit_share": Claim(
        "update", "During a detailed investigation, we identified that commit operations related to the state store "
        "contributed to 50-80% of task duration and also accounted for the high, variable latency.",
        "Databricks' investigation of the RocksDB store before the changes", "state store commits, share of task "
        "time", "range", 50.0, 80.0, "%", 10.0, "context only",
        untested="it describes the RocksDB store before the post's changes; async-state-checkpoint reports its own "
                 "commits' share of a batch beside it"),
    "rb_spread": Claim(
        "update", "In order to efficiently utilize the resources, we implemented a state rebalancing algorithm in "
        "the task scheduler that ensures the tasks associated with the state are evenly spread across the available "
        "executors when new executors are added or removed – even if it involves loading the state in a new "
        "executor from a distributed file system.", "the update post's description (no benchmark)",
        "throughput once balanced, against never moving state", "direction", 0.0, 1.0, "%", 5.0,
        "a smaller gain is within the batch-to-batch jitter of the settled window (about 15% a batch, halved by its "
        "median)", experiment="state-rebalancing"),
    # ------------------------------------------------ asynchronous state checkpointing
    "asc_pending": Claim(
        "asyncstate", "As of current, the feature allows for up to one micro-batch to be pending checkpoint "
        "completion.", "the post's description", "micro-batches pending their state checkpoint", "ceiling", 1.0,
        1.0, "batches", 0.0, "a rule, not a measurement", neutral=None,
        untested="a rule of the protocol: the step graph holds it, and the explorer and the fault matrix check the "
                 "replay bound it implies"),
    "asc_rerun": Claim(
        "asyncstate", "The tradeoff for lower data latency is that, on failure, the query may need to re-process "
        "two micro-batches to give the same fault-tolerance guarantees: the current micro-batch undergoing "
        "computation and the prior micro-batch whose state checkpoint was in process.", "the post's description",
        "micro-batches re-processed after a failure", "ceiling", 2.0, 2.0, "batches", 0.0,
        "'may need': a bound; none of it is slack", neutral=None, experiment="async-state-checkpoint"),
    "asc_mean_cut": Claim(
        "asyncstate", _ASC_MEAN, "in-house and customer workloads (not described)",
        "mean batch duration cut, largest state", "ceiling", 25.0, 25.0, "%", 10.0,
        "'up to': any cut from none to 25% keeps it; 10 points past it for workloads the post does not describe",
        experiment="async-state-checkpoint"),
    "asc_millions": Claim(
        "asyncstate", _ASC_MEAN, "in-house and customer workloads (not described)",
        "mean cut, largest state over smallest", "direction", 0.0, 1.0, "%", 2.0, _STATE_DIRECTION,
        experiment="async-state-checkpoint"),
    "asc_peak": Claim(
        "asyncstate", "Anecdotally, we’ve seen even bigger improvements in peak micro-batch duration (the longest "
        "time it takes for the stream to process a micro-batch).", "in-house and customer workloads (anecdotal)",
        "peak batch cut over the mean batch cut", "direction", 0.0, 1.0, "%", 2.0, _STATE_DIRECTION,
        experiment="async-state-checkpoint"),
    # ------------------------------------------------ the RocksDB state store
    "cl_faster": Claim(
        "rocksdb", "This allows for faster state checkpointing with the RocksDB state store provider.",
        "the post's description (no benchmark)", "changelog commit against RocksDB without changelog, faster by",
        "direction", 0.0, 1.0, "%", 10.0, "a commit faster by less than a tenth is not called faster",
        experiment="changelog-checkpointing"),
    "psc_latency": Claim(
        "rocksdb", "For such queries, we now support parallel commits of state stores for all instances associated "
        "with a partition, thereby improving latency.", "the post's description (no benchmark)",
        "mean batch duration cut, parallel store commits", "direction", 0.0, 1.0, "%", 5.0,
        "the engine's batch durations on a shared 2-core machine vary by more than that between runs",
        experiment="parallel-store-commit"),
    # ------------------------------------------------ Flink's changelog state backend (context for changelog)
    "flink_ckpt_ratio": Claim(
        "flink", "311ms / 5s", "Flink, ValueState workload, parallelism 50, 50K events/s",
        "no-changelog commit p50 over the changelog's (Flink: checkpoint p50, incremental over changelog)",
        "range", 5000.0 / 311.0, 5000.0 / 311.0, "x", 4.0,
        "the measures differ: a task's commit here, a checkpoint barrier over 50 tasks there",
        neutral=1.0, experiment="changelog-checkpointing"),
    "flink_storage": Claim(
        "flink", "space usage increases by 30%", "Flink, ValueState workload, parallelism 50, 50K events/s",
        "state kept by the changelog, against RocksDB without changelog (Flink: against incremental checkpoints)",
        "range", 30.0, 30.0, "%", 10.0,
        "both baselines share files between checkpoints, but the workloads differ (Flink's ValueState job, our "
        "running count)", experiment="changelog-checkpointing"),
    "flink_recovery": Claim(
        "flink", "recovery time increases by 66%-225%", "Flink, ValueState workload, parallelism 50, 50K events/s",
        "recovery time of the changelog, against RocksDB without changelog", "range", 66.0, 225.0, "%", 10.0,
        "as for the storage: 10 points", experiment="changelog-checkpointing"),
    # ------------------------------------------------ Young's optimum (checkpoint interval)
    "young_optimum": Claim(
        "young", "T = sqrt(2 C M)", "Young's first-order model", "simulated best interval, in doublings from "
        "Young's", "absolute", 0.0, 0.0, "doublings", 1.0,
        "a first-order approximation: a factor of two either way", neutral=None, experiment="checkpoint-interval"),
    # ------------------------------------------------ Spark's real-time mode (anchors, not fitted)
    "rtm_stateless_p50": Claim(
        "rtmbench", "| Spark RTM | 1 | 1 | 2 | 3 |", _RTM_A, "real-time p50, stateless", "range", 1.0, 1.0, "ms",
        0.5, _RTM_TOLERANCE, neutral=None, experiment="real-time-mode"),
    "rtm_stateless_p99": Claim(
        "rtmbench", "| Spark RTM | 1 | 1 | 2 | 3 |", _RTM_A, "real-time p99, stateless", "range", 3.0, 3.0, "ms",
        1.5, _RTM_TOLERANCE, neutral=None, experiment="real-time-mode"),
    "rtm_stateful_p50": Claim(
        "rtmbench", "| Spark RTM | 7 | 11 | 11 | 14 |", _RTM_B, "real-time p50, stateful count", "range", 7.0, 7.0,
        "ms", 3.5, _RTM_TOLERANCE, neutral=None, experiment="real-time-mode"),
    "rtm_stateful_p99": Claim(
        "rtmbench", "| Spark RTM | 7 | 11 | 11 | 14 |", _RTM_B, "real-time p99, stateful count", "range", 14.0,
        14.0, "ms", 7.0, _RTM_TOLERANCE, neutral=None, experiment="real-time-mode"),
    # ------------------------------------------------ performance models (context for calibration)
    "doppio_error": Claim(
        "doppio", "prediction error rate within 10%", "Doppio's Spark workloads",
        "largest prediction error on configurations the fit did not see", "ceiling", 10.0, 10.0, "%", 0.0,
        "the published bound as it stands", neutral=None, experiment="calibration"),
    "ernest_error": Claim(
        "ernest", "average prediction error is under 20%", "Ernest's workloads",
        "mean prediction error on configurations the fit did not see", "ceiling", 20.0, 20.0, "%", 0.0,
        "the published bound as it stands", neutral=None, experiment="calibration"),
}


def claim(claim_id: str) -> Claim:
    """The claim named ``claim_id``; a ``KeyError`` that names the known ones for an unknown id."""
    if claim_id not in CLAIMS:
        raise KeyError(f"unknown claim {claim_id!r}; known claims: {', '.join(CLAIMS)}")
    return CLAIMS[claim_id]


def claims_of(experiment: str) -> list[str]:
    """The ids of the claims ``experiment`` judges, in the table's order."""
    return [cid for cid, c in CLAIMS.items() if c.experiment == experiment]


def describe(experiment: str) -> str:
    """The claims ``experiment`` judges, in one line (its ``claim`` for reports and --help)."""
    return "; ".join(f"{CLAIMS[cid].what} {CLAIMS[cid].published}" for cid in claims_of(experiment))


def sources_dir() -> Path | None:
    """The directory holding the archived posts: ``$LIGHTSPEED_SOURCES``, else ``shared/sources`` beside the
    repository or one level further up (a worktree); None when none exists."""
    if os.environ.get(SOURCES_ENV):
        return Path(os.environ[SOURCES_ENV])
    root = Path(__file__).resolve().parent.parent
    for candidate in (root.parent / "shared" / "sources", root.parent.parent / "shared" / "sources"):
        if candidate.is_dir():
            return candidate
    return None
