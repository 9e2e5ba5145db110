"""The timing block of an outcome (spec section 4): one latency summary for every timed backend.

End-to-end latency is measured per record, from its creation (``arrival_ms``)
to the moment it first becomes visible at the sink. A timed backend hands the
latencies it measured to ``summarize_latency`` and puts the result in the
outcome's ``timing``; every timed backend therefore reports the same keys with
the same percentile definition, and the same empty value.

The percentile definition is the inverted CDF: ``p_q`` is the smallest latency
``x`` such that at least ``q`` percent of the records have a latency ``<= x``
(numpy's ``method="inverted_cdf"``; a test checks the two agree). It extends
to spread segments, which the simulator's volume mode produces: ``n`` records
whose latencies are spread evenly over ``[low_ms, high_ms]``, where the CDF is
interpolated linearly inside the segment. The reference is standard-library
only, which is why this is written out here and not taken from numpy.
"""

from __future__ import annotations


from dataclasses import dataclass
from typing import Any, Iterable, Sequence

KEPT_UP_RATE_FRACTION = 0.95     # processed rows/s must reach this share of the input rows/s
LATENCY_GROWTH_LIMIT_MS_PER_S = 50.0   # latency may grow by at most 50 ms per second of run (5% of elapsed time)

PERCENTILES = (50, 90, 99)
BISECTION_STEPS = 60
Segment = tuple[int, float, float]   # (records, low_ms, high_ms)


class TimingError(ValueError):
    """A timing block does not have the shape of spec section 4. ``field`` names where."""

    def __init__(self, field_path: str, message: str):
        super().__init__(f"{field_path}: {message}")
        self.field = field_path


@dataclass(frozen=True)
class LatencySummary:
    """End-to-end latency percentiles in ms; ``count`` records, and None everywhere else when there are none."""

    count: int = 0
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None
    max: float | None = None

    def __post_init__(self) -> None:
        assert self.count >= 0, "a latency count is never negative"
        assert (self.count == 0) == (self.p50 is None), "percentiles exist exactly when records do"

    def to_dict(self) -> dict[str, Any]:
        return {"count": self.count, "p50": self.p50, "p90": self.p90, "p99": self.p99, "max": self.max}

    @staticmethod
    def from_dict(raw: Any, path: str = "timing.latency_ms") -> "LatencySummary":
        if not isinstance(raw, dict):
            raise TimingError(path, "expected {\"count\": int, \"p50\": ms, \"p90\": ms, \"p99\": ms, \"max\": ms}")
        count = raw.get("count")
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise TimingError(f"{path}.count", f"expected an integer >= 0, got {count!r}")
        values = {}
        for key in ("p50", "p90", "p99", "max"):
            value = raw.get(key)
            if count == 0 and value is not None:
                raise TimingError(f"{path}.{key}", "must be null when count is 0")
            if count > 0 and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise TimingError(f"{path}.{key}", f"expected a number of ms, got {value!r}")
            values[key] = None if value is None else float(value)
        unknown = sorted(set(raw) - {"count", "p50", "p90", "p99", "max"})
        if unknown:
            raise TimingError(f"{path}.{unknown[0]}", "unknown field")
        return LatencySummary(count, values["p50"], values["p90"], values["p99"], values["max"])


def summarize_latency(samples_ms: Iterable[float]) -> LatencySummary:
    """The summary of exact per-record latencies."""
    ordered = sorted(float(x) for x in samples_ms)
    if not ordered:
        return LatencySummary()
    out = {q: _round(_exact_quantile(ordered, q / 100.0)) for q in PERCENTILES}
    return LatencySummary(len(ordered), out[50], out[90], out[99], _round(ordered[-1]))


def summarize_segments(segments: Iterable[Segment]) -> LatencySummary:
    """The summary of latency segments ``(records, low_ms, high_ms)``; exact where ``low == high``."""
    segs = sorted((float(lo), float(hi), int(n)) for n, lo, hi in segments if n > 0)
    for lo, hi, _n in segs:
        assert hi >= lo, f"a latency segment [{lo}, {hi}] must not end before it starts"
    if all(lo == hi for lo, hi, _n in segs):
        return summarize_latency(lo for lo, _hi, n in segs for _ in range(n))
    total = sum(n for _lo, _hi, n in segs)
    out = {q: _round(_spread_quantile(segs, total, q / 100.0)) for q in PERCENTILES}
    return LatencySummary(total, out[50], out[90], out[99], _round(max(hi for _lo, hi, _n in segs)))


def _exact_quantile(ordered: Sequence[float], q: float) -> float:
    """The smallest x with at least q * n samples <= x (inverted CDF)."""
    rank = q * len(ordered)
    index = max(0, _ceil(rank) - 1)
    return ordered[min(index, len(ordered) - 1)]


def _ceil(x: float) -> int:
    whole = int(x)
    return whole if whole == x else whole + 1


def _spread_quantile(segs: list[tuple[float, float, int]], total: int, q: float) -> float:
    """The smallest x with CDF(x) >= q * total, by bisection (segments may overlap)."""
    rank = q * total
    lo, hi = segs[0][0], max(h for _l, h, _n in segs)
    for _ in range(BISECTION_STEPS):
        mid = (lo + hi) / 2.0
        if _cdf(segs, mid) >= rank:
            hi = mid
        else:
            lo = mid
    return hi


def _cdf(segs: list[tuple[float, float, int]], x: float) -> float:
    count = 0.0
    for lo, hi, n in segs:
        if x >= hi:
            count += n
        elif x > lo:
            count += n * (x - lo) / (hi - lo)
    return count


def _round(value: float) -> float:
    return round(value, 3)


def first_visible_ms(deliveries: Iterable[tuple[Any, float]]) -> dict[Any, float]:
    """Record -> the time it first became visible, from (record, time) deliveries in any order.

    A record re-delivered after a crash keeps its first visibility: end-to-end
    latency ends when the output could first be read, not at a later replay.
    """
    first: dict[Any, float] = {}
    for record, seen_ms in deliveries:
        known = first.get(record)
        if known is None or seen_ms < known:
            first[record] = seen_ms
    return first


@dataclass(frozen=True)
class Throughput:
    """Whether a run kept up with its input (spec section 4's timing block).

    ``input_rows_per_s``: records over the span of their creation times; ``processed_rows_per_s``: records
    over the span of their first visibility; ``latency_growth_ms_per_s``: the least-squares slope of each
    record's latency against its creation time. A system that keeps up has a stationary latency; one that
    falls behind accumulates a backlog, and its latency grows with the run (at ``input/processed - 1`` ms per
    ms). A run kept up when it processed at least ``KEPT_UP_RATE_FRACTION`` of the input rate and its latency
    grew by at most ``LATENCY_GROWTH_LIMIT_MS_PER_S``. A run that did not keep up is reported as
    backlogged: its latency measures its queue, not the system.
    """

    records: int
    input_rows_per_s: float
    processed_rows_per_s: float
    latency_growth_ms_per_s: float
    kept_up: bool

    def to_dict(self) -> dict[str, Any]:
        return {"records": self.records, "input_rows_per_s": self.input_rows_per_s,
                "processed_rows_per_s": self.processed_rows_per_s,
                "latency_growth_ms_per_s": self.latency_growth_ms_per_s, "kept_up": self.kept_up}

    @staticmethod
    def from_dict(raw: Any, path: str = "timing.throughput") -> "Throughput":
        if not isinstance(raw, dict):
            raise TimingError(path, "expected an object")
        try:
            return Throughput(int(raw["records"]), float(raw["input_rows_per_s"]), float(raw["processed_rows_per_s"]),
                              float(raw["latency_growth_ms_per_s"]), bool(raw["kept_up"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise TimingError(path, f"expected records, input_rows_per_s, processed_rows_per_s, "
                                    f"latency_growth_ms_per_s and kept_up: {exc}") from None


def summarize_throughput(created_ms: Sequence[float], visible_ms: Sequence[float]) -> Throughput | None:
    """Throughput of one run from each record's creation and first visibility (in the same order).

    None when fewer than two records were delivered, or all were created at once, or all became visible at
    once (one batch delivered everything): there is no rate to measure.
    """
    assert len(created_ms) == len(visible_ms), "one visibility time per created record"
    return summarize_throughput_groups((1, c, c, v) for c, v in zip(created_ms, visible_ms))


# (records, created_first_ms, created_last_ms, visible_ms): records created evenly from the first creation time
# to the last, all first visible at one time (the simulator's volume mode delivers ranges of offsets this way)
DeliveryGroup = tuple[int, float, float, float]


def summarize_throughput_groups(groups: Iterable[DeliveryGroup]) -> Throughput | None:
    """``summarize_throughput`` over groups of records (``DeliveryGroup``) instead of single records: the same
    rule and, for groups of one record, the same numbers. The latency slope comes from the groups' exact sums
    (records evenly spaced inside a group), so a run of a hundred million records costs one term per group."""
    n, sums = 0, [0.0, 0.0, 0.0, 0.0]          # sum x, x^2, y, x*y with x = creation, y = latency
    created_lo = created_hi = visible_lo = visible_hi = None
    rows = [(int(k), float(a), float(b), float(v)) for k, a, b, v in groups if k > 0]
    origin = min((a for _k, a, _b, _v in rows), default=0.0)   # sums taken about the first creation: precision
    for k, a, b, v in rows:
        assert b >= a, f"a delivery group's records are created from {a} to {b}: backwards"
        created_lo = a if created_lo is None else min(created_lo, a)
        created_hi = b if created_hi is None else max(created_hi, b)
        visible_lo = v if visible_lo is None else min(visible_lo, v)
        visible_hi = v if visible_hi is None else max(visible_hi, v)
        for i, term in enumerate(_group_sums(k, a - origin, b - origin, v - origin)):
            sums[i] += term
        n += k
    if n < 2 or created_lo is None or created_hi == created_lo or visible_hi == visible_lo:
        return None
    assert created_hi is not None and visible_lo is not None and visible_hi is not None
    sx, sxx, sy, sxy = sums
    var = n * sxx - sx * sx
    growth = (n * sxy - sx * sy) / var * 1000.0 if var > 0 else 0.0
    input_rate = n / ((created_hi - created_lo) / 1000.0)
    processed_rate = n / max((visible_hi - visible_lo) / 1000.0, 1e-9)
    kept_up = processed_rate >= KEPT_UP_RATE_FRACTION * input_rate and growth <= LATENCY_GROWTH_LIMIT_MS_PER_S
    return Throughput(n, round(input_rate, 3), round(processed_rate, 3), round(growth, 3), kept_up)


def _group_sums(k: int, a: float, b: float, v: float) -> tuple[float, float, float, float]:
    """Sum of x, x^2, y and x*y over ``k`` records created at x = a, a + h, ..., b (h = (b - a) / (k - 1)),
    each with latency y = v - x."""
    h = (b - a) / (k - 1) if k > 1 else 0.0
    ones, squares = k * (k - 1) / 2.0, (k - 1) * k * (2 * k - 1) / 6.0   # sums of i and i^2, i = 0 .. k-1
    sx = k * a + h * ones
    sxx = k * a * a + 2.0 * a * h * ones + h * h * squares
    return sx, sxx, k * v - sx, v * sx - sxx


def reported_latency(latency: LatencySummary, throughput: Throughput | None) -> dict[str, Any]:
    """What a report may say of one run's latency, by the one rule above.

    A run that kept up (or whose rate cannot be judged: ``throughput`` None) reports its percentiles,
    ``latency_ms``. A run that did not keep up is ``backlogged``: its latency measured its queue, so it
    reports no percentiles, only the throughput numbers that say it fell behind.
    """
    kept_up = None if throughput is None else throughput.kept_up
    out: dict[str, Any] = {"kept_up": kept_up, "throughput": throughput.to_dict() if throughput else None}
    if kept_up is False:
        out["backlogged"] = True
        return out
    out["backlogged"] = False
    out["latency_ms"] = latency.to_dict()
    return out


def describe_reported(name: str, reported: dict[str, Any]) -> str:
    """One line of a report: the percentiles of a run that kept up, or BACKLOGGED with its rates."""
    if reported.get("backlogged"):
        t = reported["throughput"]
        return (f"{name}: BACKLOGGED (did not keep up: processed {t['processed_rows_per_s']:,.1f} of "
                f"{t['input_rows_per_s']:,.1f} rows/s, latency grew {t['latency_growth_ms_per_s']:,.1f} ms "
                f"per s); no latency is reported")
    latency = reported.get("latency_ms") or {}
    kept = {True: "kept up", None: "rate not judged"}[reported.get("kept_up")]
    return f"{name}: p50 {latency.get('p50')} ms, p99 {latency.get('p99')} ms ({kept})"
