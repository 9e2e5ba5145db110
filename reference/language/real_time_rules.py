"""What Spark's real-time mode accepts of a scenario's query, sources and sink (spec section 1, ``engine.real_time``).

The engine section's own rules (the 5 s minimum batch, no pipelining, the
logs and the state provider) are in ``engine_config.check_real_time_engine``;
these need the whole scenario. Each refusal names Spark's rule, as Spark 4.3
states it:

- operators: ``RealTimeModeAllowlist`` (sql/core, ``streaming/runtime``) lists
  the physical operators a real-time plan may hold. It allows projections and
  filters (``map``), the streamline aggregation (``aggregate``, and a windowed
  one with a watermark, ``window_aggregate``), ``dropDuplicates``
  (``StreamingDeduplicateExec``: ``dedup``, with or without a watermark, since
  ``EventTimeWatermarkExec`` is allowed too) and the JVM
  ``transformWithState``; it does not allow ``StreamingSymmetricHashJoinExec``
  (stream-stream joins), ``StreamingDeduplicateWithinWatermarkExec`` (until
  SPARK-59385, after 4.3) or ``FlatMapGroupsWithStateExec``;
- output mode: Update only (``UnsupportedOperationChecker``:
  ``STREAMING_REAL_TIME_MODE.OUTPUT_MODE_NOT_SUPPORTED``). The reference's
  stateful operators emit updated rows, as Update mode does;
- sources: only streams that implement ``SupportsRealTimeMode`` (Kafka, and
  the in-jar ``LowLatencyMemoryStream``) deliver records as they arrive. Of
  the scenario's sources, those with arrival times (``rate``, ``explicit``,
  ``redelivering``) stand for such a stream; ``generated`` has none;
- sink: ``RealTimeModeAllowlist.allowedSinks`` (ForeachWriter, Kafka, console)
  are at-least-once; foreachBatch and the memory sink are refused at start, so
  no real-time sink commits a batch exactly once.
"""

from __future__ import annotations

from .field_reader import ScenarioError
from .operator_spec import OperatorSpec

REAL_TIME_OPERATORS = ("map", "aggregate", "window_aggregate", "dedup")
REAL_TIME_SOURCES = ("rate", "explicit", "redelivering")

_REFUSED_OPERATORS = {
    "join": "stream-stream joins are not in real-time mode's operator allowlist "
            "(StreamingSymmetricHashJoinExec; RealTimeModeAllowlist, Spark 4.3)",
    "dedup_within_watermark": "dropDuplicatesWithinWatermark is not in real-time mode's operator allowlist "
                              "(StreamingDeduplicateWithinWatermarkExec; RealTimeModeAllowlist, Spark 4.3; "
                              "SPARK-59385 adds it after 4.3)",
    "stateful_function": "flatMapGroupsWithState is not in real-time mode's operator allowlist "
                         "(FlatMapGroupsWithStateExec; RealTimeModeAllowlist, Spark 4.3 allows only the JVM "
                         "transformWithState, which the reference does not model)",
}


def check_real_time(sources: dict[str, str], operator: OperatorSpec, sink_mode: str) -> None:
    """Refuse what real-time mode cannot run, naming the field and Spark's rule. ``sources`` maps each source
    name to its kind."""
    for index, op in enumerate(operator.flatten()):
        where = "query.operator" if operator.kind != "chain" else f"query.operator.operators[{index}]"
        if op.kind in _REFUSED_OPERATORS:
            raise ScenarioError(f"{where}.kind", f"real-time mode: {_REFUSED_OPERATORS[op.kind]}")
    if operator.kind == "chain" and sum(op.stateful for op in operator.operators) > 1:
        raise ScenarioError("query.operator", "real-time mode runs in Update output mode, where Spark refuses a "
                                              "second streaming aggregation (UnsupportedOperationChecker: "
                                              "\"Multiple streaming aggregations are not supported\" outside "
                                              "Append mode)")
    for side, kind in sorted(sources.items()):
        if kind not in REAL_TIME_SOURCES:
            where = "source.kind" if side == "main" else f"sources.{side}.kind"
            raise ScenarioError(where, f"real-time mode reads only streams that deliver records as they arrive "
                                       f"(SupportsRealTimeMode: Kafka in Spark 4.3); of the scenario's sources "
                                       f"that is {', '.join(REAL_TIME_SOURCES)}, not {kind!r}, which has no "
                                       "arrival times")
    if sink_mode == "exactly_once":
        raise ScenarioError("sink.mode", "real-time mode's sinks are at-least-once (RealTimeModeAllowlist."
                                         "allowedSinks: ForeachWriter, Kafka, console; foreachBatch and the memory "
                                         "sink are refused at start): use sink.mode = at_least_once")
