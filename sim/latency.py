"""End-to-end latency per record (creation to sink commit), summarised as percentiles (SPEC section 4).

Latencies arrive as segments ``(count, low_ms, high_ms)``: ``count`` records
whose latencies are spread evenly over ``[low_ms, high_ms]``. Data mode gives
one exact segment per record (low == high); volume mode one segment per source
partition and batch. Percentiles are exact for exact segments and linearly
interpolated inside spread ones.
"""

from __future__ import annotations

from typing import Iterable

PERCENTILES = (50, 90, 99)
BISECTION_STEPS = 60
Segment = tuple[int, float, float]


def summarize_latency(segments: Iterable[Segment]) -> dict[str, float | int]:
    """``{"count", "p50", "p90", "p99", "max"}`` in ms (all 0 when nothing was delivered)."""
    segs = sorted((lo, hi, n) for n, lo, hi in segments if n > 0)
    total = sum(n for _lo, _hi, n in segs)
    out: dict[str, float | int] = {"count": total}
    if total == 0:
        out.update({f"p{q}": 0.0 for q in PERCENTILES})
        out["max"] = 0.0
        return out
    for q in PERCENTILES:
        out[f"p{q}"] = round(_quantile(segs, total, q / 100.0), 3)
    out["max"] = round(max(hi for _lo, hi, _n in segs), 3)
    return out


def _quantile(segs: list[tuple[float, float, int]], total: int, q: float) -> float:
    """The smallest latency x with CDF(x) >= q (bisection; segments may overlap)."""
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
