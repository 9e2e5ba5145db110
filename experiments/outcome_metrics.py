"""The numbers the experiments read out of a typed outcome (``reference.protocol.outcome.Outcome``, spec section 4):
end-to-end latency percentiles (the backend's ``timing`` block), batch durations from the ``progress`` events,
what a restart re-ran and how long it took, and step durations from a simulator trace.
"""

from __future__ import annotations

import re
import statistics
from typing import Any, Iterable, Sequence

from experiments.stats import percentile
from reference.protocol.outcome import Outcome, ProgressEvent
from reference.protocol.timing import reported_latency

# a traced step shorter than this did nothing (a maintenance round with no snapshot due); traces
# record start times to the microsecond, so an empty step can show up to half a microsecond
MIN_STEP_MS = 0.01
WARMUP_BATCHES = 2          # the first batches of a run pay for start-up; duration statistics skip them
_STEP = re.compile(r"^(?P<step>[a-z_]+) b(?P<batch>\d+)(?: p(?P<partition>\d+))?$")


# ------------------------------------------------------------ measurements


def check_outcome_ok(outcome: Outcome) -> None:
    """A run that stopped with an error measures nothing: raise so the point is reported as failed."""
    if outcome.error:
        raise RuntimeError(f"the run stopped with an error: {outcome.error}")


def latency_metrics(outcome: Outcome) -> dict[str, Any]:
    """End-to-end latency (creation to first visibility at the sink) percentiles of an outcome, in ms, and how
    many records they summarise; whether the run kept up with its input (``reference.protocol.timing``'s one rule).
    A run that did not keep up is ``backlogged``: its percentiles are None (its latency measured its queue),
    and its rates say how far behind it fell."""
    if outcome.timing is None:
        raise RuntimeError(f"backend {outcome.backend} reported no timing; this experiment needs a timed backend")
    latency, throughput = outcome.timing.latency_ms, outcome.timing.throughput
    reported = reported_latency(latency, throughput)
    out: dict[str, Any] = {"latency_p50": latency.p50, "latency_p90": latency.p90, "latency_p99": latency.p99,
                           "latency_max": latency.max, "latency_count": latency.count,
                           "kept_up": reported["kept_up"], "backlogged": reported["backlogged"]}
    # the rates behind the verdict, None when it cannot be told (fewer than two records, or all at once)
    out.update({k: getattr(throughput, k) if throughput else None
                for k in ("input_rows_per_s", "processed_rows_per_s", "latency_growth_ms_per_s")})
    if reported["backlogged"]:
        out.update({key: None for key in ("latency_p50", "latency_p90", "latency_p99", "latency_max")})
    return out


def batch_ms(entry: ProgressEvent) -> float:
    """A batch's duration from its planning to its output being committed (the part on the critical path).

    ``triggerExecution`` also counts, under asynchronous state checkpointing,
    the wait for the previous batch's state to be durable, which overlaps
    the next batch; this sum does not.
    """
    d = entry.duration_ms
    return float(sum(d.get(k, 0) or 0 for k in ("latestOffset", "queryPlanning", "walCommit", "addBatch")))


def _trigger_ms(entry: ProgressEvent) -> float:
    return float(entry.duration_ms.get("triggerExecution", 0) or 0)


def batch_metrics(progress: Sequence[ProgressEvent], skip: int = WARMUP_BATCHES) -> dict[str, Any]:
    """Mean, median, p99 and peak of batch duration, trigger time and start-to-start interval."""
    entries = [p for p in progress if p.timestamp_ms is not None] or list(progress)
    entries = entries[skip:] if len(entries) > skip + 1 else entries
    durations = [batch_ms(p) for p in entries]
    triggers = [_trigger_ms(p) for p in entries]
    starts = [float(p.timestamp_ms) for p in entries if p.timestamp_ms is not None]
    gaps = [b - a for a, b in zip(starts, starts[1:])]
    out: dict[str, Any] = {"batches": len(entries)}
    for label, values in (("batch_ms", durations), ("trigger_ms", triggers), ("interval_ms", gaps)):
        out[f"{label}_mean"] = statistics.fmean(values) if values else None
        out[f"{label}_p50"] = percentile(values, 50)
        out[f"{label}_p99"] = percentile(values, 99)
        out[f"{label}_max"] = max(values) if values else None
    rows = sum(p.num_input_rows for p in entries)
    span = (starts[-1] + triggers[-1] - starts[0]) if len(starts) >= 2 else None
    out["rows_per_s"] = rows / span * 1000.0 if span else None
    return out


# Where a batch's time goes, in disjoint parts (ms), from Spark's durationMs keys: ``planning`` is
# latestOffset + queryPlanning, ``offsetWrite`` the part of walCommit that is not the inline purge,
# ``other`` what triggerExecution holds beyond the named parts (waiting for a dependency, the sink's
# commit, the source commit).
BREAKDOWN_PARTS = ("planning", "offsetWrite", "purge", "addBatch", "commitOffsets", "other")


def duration_breakdown(progress: Sequence[ProgressEvent], skip: int = WARMUP_BATCHES) -> dict[str, float] | None:
    """The mean of each part of ``BREAKDOWN_PARTS`` over the batches after the warm-up."""
    entries = list(progress)
    entries = entries[skip:] if len(entries) > skip + 1 else entries
    if not entries:
        return None
    parts: dict[str, list[float]] = {name: [] for name in BREAKDOWN_PARTS}
    for entry in entries:
        d = {k: float(v) for k, v in entry.duration_ms.items()}
        purge = d.get("purge", 0.0)
        named = {"planning": d.get("latestOffset", 0.0) + d.get("queryPlanning", 0.0),
                 "offsetWrite": max(0.0, d.get("walCommit", 0.0) - purge), "purge": purge,
                 "addBatch": d.get("addBatch", 0.0), "commitOffsets": d.get("commitOffsets", 0.0)}
        named["other"] = max(0.0, d.get("triggerExecution", 0.0) - sum(named.values()))
        for name, value in named.items():
            parts[name].append(value)
    return {name: round(statistics.fmean(values), 3) for name, values in parts.items()}


def commit_time_ms(progress: Sequence[ProgressEvent], skip: int = WARMUP_BATCHES) -> float | None:
    """Mean over the batches after the warm-up of their ``commitTimeMs``, summed over state operators (the
    tasks' state commits; Spark's post picks the queries async state checkpointing helps by it)."""
    entries = list(progress)
    entries = entries[skip:] if len(entries) > skip + 1 else entries
    values = [sum(op.commit_time_ms for op in p.state_operators) for p in entries]
    return statistics.fmean(values) if values else None


def log_write_ms(progress: Sequence[ProgressEvent]) -> float | None:
    """Mean time a batch spent writing its offset and commit log entries (synchronous progress)."""
    values = [float(p.duration_ms.get("walCommit", 0)) + float(p.duration_ms.get("commitOffsets", 0))
              for p in progress]
    return statistics.fmean(values) if values else None


def _started_ms(entry: ProgressEvent) -> float:
    return float(entry.timestamp_ms) if entry.timestamp_ms is not None else -1.0


def recovery_metrics(outcome: Outcome, crash_ms: float, plan_starts: dict[int, float] | None = None,
                     origin_ms: float = 0.0) -> dict[str, Any]:
    """What a crash at ``crash_ms`` cost.

    - ``rerun_batches``: batches the restart re-ran (the outcome's ``recoveries``);
    - ``lost_ms``: the work the crash threw away, from the planning of the
      oldest batch the restart redoes to the crash (0 when the crash fell
      between batches). ``plan_starts`` (batch -> planning time before the
      crash, from a trace) makes it exact for batches that never finished;
      without it only finished batches are seen;
    - ``recovery_ms``: from the crash until the last re-run batch is finished
      again (restart included), and ``rerun_ms`` the part after the restart;
      ``rerun_rows`` the rows of the re-run batches. On a rate source these
      also count the input that arrived while the query was down.

    ``origin_ms``: the progress timestamp of the run's start, so that progress stamped on another clock (a
    timed engine's epoch milliseconds) is compared with ``crash_ms``, which counts from the run's start.
    """
    if not outcome.recoveries:
        return {"crashed": False, "rerun_batches": 0, "rerun_rows": 0, "lost_ms": 0.0, "recovery_ms": None,
                "rerun_ms": None}
    def started(p: ProgressEvent) -> float:
        return _started_ms(p) - origin_ms

    resumed = outcome.recoveries[0].resumed_at
    rerun = set(outcome.recoveries[0].rerun_batches)
    starts = dict(plan_starts or {})
    for p in outcome.progress:
        t = started(p)
        if 0 <= t < crash_ms:
            starts.setdefault(p.batch_id, t)
    lost_from = min((t for b, t in starts.items() if b >= resumed and t < crash_ms), default=None)
    lost_ms = crash_ms - lost_from if lost_from is not None else 0.0
    after = [p for p in outcome.progress if started(p) >= crash_ms]
    if not after:
        return {"crashed": True, "rerun_batches": len(rerun), "rerun_rows": 0, "lost_ms": lost_ms,
                "recovery_ms": None, "rerun_ms": None}
    restart_ms = min(started(p) for p in after)
    top = max(rerun) if rerun else -1
    redone = [p for p in after if p.batch_id <= top]
    end = max((started(p) + _trigger_ms(p) for p in redone), default=restart_ms)
    return {"crashed": True, "rerun_batches": len(rerun), "rerun_rows": sum(p.num_input_rows for p in redone),
            "lost_ms": lost_ms, "recovery_ms": end - crash_ms, "rerun_ms": end - restart_ms}


def plan_starts_before(trace: Iterable[Any], crash_ms: float) -> dict[int, float]:
    """Batch -> planning time of every batch planned before ``crash_ms`` (from a simulator trace)."""
    return {b: start for b, _p, start, _ms in step_durations(trace, ("plan",))["plan"] if start < crash_ms}


def step_durations(trace: Iterable[Any], steps: Sequence[str], *, since_ms: float = -1.0
                   ) -> dict[str, list[tuple[int, int, float, float]]]:
    """(batch, partition, start_ms, duration_ms) of every traced step named in ``steps`` starting after ``since_ms``."""
    wanted = set(steps)
    out: dict[str, list[tuple[int, int, float, float]]] = {s: [] for s in steps}
    for event in trace:
        match = _STEP.match(event.action)
        if match is None or match.group("step") not in wanted or not event.detail.startswith("start="):
            continue
        start = float(event.detail[len("start="):].split()[0])
        if start < since_ms:
            continue
        part = int(match.group("partition")) if match.group("partition") is not None else -1
        out[match.group("step")].append((int(match.group("batch")), part, start, event.time_ms - start))
    return out
