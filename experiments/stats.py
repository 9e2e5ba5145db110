"""Statistics over an experiment's point records: grouping, medians over seeds, percentiles, relative cuts.

Percentiles here summarise batch and step durations; they interpolate
linearly between samples (numpy's default). End-to-end latency is summarised
by each backend with the one definition of ``reference/timing.py`` and read
from the outcome, never recomputed here.
"""

from __future__ import annotations

import statistics
from typing import Any, Callable, Iterable, Sequence

import numpy as np

Record = dict[str, Any]


def group(records: Iterable[Record], *keys: str, task: str | None = None) -> dict[tuple[Any, ...], list[Record]]:
    """Records grouped by point fields (``config``) or params (``params.rate``), in first-seen order."""
    out: dict[tuple[Any, ...], list[Record]] = {}
    for record in records:
        point = record["point"]
        if task is not None and point["task"] != task:
            continue
        key = tuple(point["params"].get(k[len("params."):]) if k.startswith("params.") else point.get(k)
                    for k in keys)
        out.setdefault(key, []).append(record)
    return out


def over_seeds(records: Sequence[Record], metric: str | Callable[[dict[str, Any]], Any]) -> dict[str, Any]:
    """Median, min and max of one metric over a group's seeds (None values skipped)."""
    values = []
    for r in records:
        v = metric(r["metrics"]) if callable(metric) else r["metrics"].get(metric)
        if v is not None:
            values.append(float(v))
    if not values:
        return {"median": None, "min": None, "max": None, "n": 0}
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def config_median(entry: dict[str, Any], config: str, metric: str) -> float | None:
    """The median over seeds of ``metric`` for one config of a summary entry (``over_seeds`` results by config)."""
    return entry.get(config, {}).get(metric, {}).get("median")


def median_or_none(values: Iterable[float | None]) -> float | None:
    """The median of the values present; None when there are none."""
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def mean_or_none(values: Sequence[float]) -> float | None:
    return statistics.fmean(values) if values else None


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0..100), interpolated linearly between samples; None for no values."""
    if not values:
        return None
    return float(np.percentile(np.asarray(values, dtype=float), q))


def reduction(before: float | None, after: float | None) -> float | None:
    """Relative reduction from ``before`` to ``after`` (0.5 = halved); None when undefined."""
    if before is None or after is None or before <= 0:
        return None
    return 1.0 - after / before


def fmt_ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f} ms"


def fmt_pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:+.0f}%"
