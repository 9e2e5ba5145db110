"""The offset-management experiment's walCommit checks on native Spark follow what Spark's source times as walCommit.

``MicroBatchExecution.constructNextBatch`` times ``markMicroBatchStart`` and the log purge together as walCommit.
Under asynchronous progress tracking ``markMicroBatchStart`` only queues the offset write, but the purge stays on
the query's thread unless asynchronous purge is on (``AsyncProgressTrackingMicroBatchExecution.purge``), and a
full writer queue blocks the query thread. So: async progress alone removes the write (walCommit below the
profile's offset write, 40 + 60 ms on ``object_store``), both features remove everything (near zero), and a
backlogged row is not judged. A busy-machine native run measured 39 ms for async progress alone (purge deletes
of 30 ms each, only some batches purging): the old rule, near zero for every async-progress configuration,
failed the command on it.
"""

from __future__ import annotations

from typing import Any

from experiments.experiment import RunContext
from experiments.native_runs import NATIVE, wal_checks

OFFSET_WRITE_MS = 40.0 + 60.0   # object_store: small write + rename (reference/protocol/storage_profiles.py)


def _row(wal: float, backlogged: int = 0) -> dict[str, Any]:
    return {"durations_ms": {"walCommit": wal}, "backlogged": backlogged}


def _verdicts(rows: dict[str, dict[str, Any]]) -> dict[str, bool | None]:
    checks = wal_checks({"1000": rows}, RunContext(backend=NATIVE), "object_store", baseline="baseline",
                        async_progress=("async-progress", "both"), async_purge=("both",))
    return {c.name.split(" walCommit")[0]: c.ok for c in checks}


def test_async_progress_alone_keeps_the_purge_and_loses_only_the_write() -> None:
    assert _verdicts({"baseline": _row(364.0), "async-progress": _row(39.0), "both": _row(1.0)}) == {
        "baseline": True, "async-progress": True, "both": True}
    # the write still on the path: async progress did not take it out
    assert _verdicts({"baseline": _row(364.0), "async-progress": _row(OFFSET_WRITE_MS), "both": _row(1.0)})[
        "async-progress"] is False


def test_both_features_leave_walcommit_near_zero() -> None:
    assert _verdicts({"baseline": _row(364.0), "async-progress": _row(39.0), "both": _row(39.0)})["both"] is False
    assert _verdicts({"baseline": _row(364.0), "async-progress": _row(39.0), "both": _row(5.0)})["both"] is True


def test_a_backlogged_row_is_not_judged_on_walcommit() -> None:
    verdicts = _verdicts({"baseline": _row(364.0), "async-progress": _row(250.0, backlogged=1),
                          "both": _row(80.0, backlogged=1)})
    assert verdicts["async-progress"] is None and verdicts["both"] is None


def test_the_baseline_pays_the_offset_write() -> None:
    assert _verdicts({"baseline": _row(OFFSET_WRITE_MS - 1)})["baseline"] is False
    assert _verdicts({"baseline": _row(OFFSET_WRITE_MS)})["baseline"] is True


def test_only_native_spark_is_judged() -> None:
    assert wal_checks({"1000": {"baseline": _row(0.0)}}, RunContext(backend="spark"), "object_store",
                      baseline="baseline", async_progress=(), async_purge=()) == []


def test_a_row_without_walcommit_is_not_judged() -> None:
    verdicts = _verdicts({"baseline": _row(364.0), "async-progress": {"durations_ms": {}}, "both": {}})
    assert verdicts["async-progress"] is None and verdicts["both"] is None
