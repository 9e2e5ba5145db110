"""Statistics over an experiment's point records: grouping, medians over seeds, percentiles, relative cuts.

Percentiles here summarise batch and step durations; they interpolate
linearly between samples (numpy's default). End-to-end latency is summarised
by each backend with the one definition of ``reference/protocol/timing.py`` and read
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


def keep_up(records: Sequence[Record]) -> dict[str, Any]:
    """How a group's seeds fared against the keep-up rule (``reference.protocol.timing``; each point's metric
    ``kept_up``): how many seeds were judged and how many fell behind, with the median input and processed
    rates of those that did."""
    judged = [r["metrics"] for r in records if (r.get("metrics") or {}).get("kept_up") is not None]
    behind = [m for m in judged if not m["kept_up"]]
    out: dict[str, Any] = {"seeds": len(records), "judged": len(judged), "backlogged": len(behind)}
    if behind:
        out["input_rows_per_s"] = median_or_none([m.get("input_rows_per_s") for m in behind])
        out["processed_rows_per_s"] = median_or_none([m.get("processed_rows_per_s") for m in behind])
    return out


def keep_up_text(status: dict[str, Any] | None) -> str:
    """A report's keep-up cell: ``kept up``, ``BACKLOGGED (x of y rows/s)``, or why it cannot say."""
    if not status or not status.get("judged"):
        return "keep-up not judged"
    seeds, judged, behind = status.get("seeds", 0), status["judged"], status.get("backlogged", 0)
    if behind:
        processed, offered = status.get("processed_rows_per_s"), status.get("input_rows_per_s")
        rates = f"{processed:,.0f} of {offered:,.0f} rows/s" if processed is not None and offered else "rates unknown"
        return f"BACKLOGGED ({rates}" + (f"; {behind} of {seeds} seeds)" if seeds > 1 else ")")
    return "kept up" if judged == seeds else f"kept up ({judged} of {seeds} seeds judged)"


def latency_over_seeds(records: Sequence[Record], metric: str) -> dict[str, Any]:
    """``over_seeds`` of a latency metric, empty when any seed of the group fell behind its input: a
    backlogged row shows no latency (its latency measured a queue), not the median of the seeds that kept up."""
    if keep_up(records)["backlogged"]:
        return {"median": None, "min": None, "max": None, "n": 0}
    return over_seeds(records, metric)


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
