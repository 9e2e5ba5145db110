"""The checkpoint-interval experiment's arithmetic on hand-made curves (no simulation): where the loss is least,
Young's optimum, the replay-aware one, and the verdicts, including an optimum at the grid's edge, which is only a
bound.

The curves: every snapshot costs C = 1,000 ms, batches come every d = 1,000 ms, a restart costs nothing and the
state load after a crash is L(T) = 100 + 10 T ms for a snapshot every T versions. The time lost is then

    lost(T) = C / (T d) + L(T) / M

with M the experiment's mean time between failures (600 s quick, 3,600 s full). By hand:

- full, M = 3.6e6 ms: Young's T = sqrt(2 C M) / d = sqrt(7.2e9) / 1000 = 84.85 versions; the replay-aware one
  sqrt(C M / (d * 10)) = sqrt(360,000) = 600. On the doubling grid 1..4096, lost(256) = 0.003906 + 0.000739,
  lost(512) = 0.001953 + 0.001450 = 0.003403 (least), lost(1024) = 0.000977 + 0.002872. 512 against 84.85 is
  log2(6.03) = 2.59 doublings: not reproduced.
- quick, M = 6e5 ms: Young's T = sqrt(1.2e9) / 1000 = 34.64. On the grid 1..256 the loss still falls at 256
  (0.00391 + 0.00443 against 0.00781 + 0.00230 at 128), so the optimum is past 128 (the point before the edge),
  already log2(128 / 34.64) = 1.89 doublings past Young's: not reproduced, from the bound alone. On the grid
  1..128 the bound is 64, log2(64 / 34.64) = 0.89 doublings past, within the tolerance: nothing measured.
- full, grid 1..64: 64 is the edge, on the near side of Young's 84.85: nothing measured.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from experiments.checkpoint_interval import definition as ci
from experiments.experiment import RunContext
from experiments.verdicts import NOT_MEASURED, NOT_REPRODUCED, REPRODUCED

DOUBLINGS = [2 ** i for i in range(13)]          # 1 .. 4096


def snapshot_records(grid: list[int]) -> list[dict[str, Any]]:
    return [{"point": {"task": "snapshot", "config": "changelog", "params": {"min_deltas": t}},
             "metrics": {"snapshot_ms_mean": 1000.0, "batch_ms_mean": 900.0, "interval_ms_mean": 1000.0,
                         "recovery_load_ms_mean": 100.0 + 10.0 * t, "restart_ms": 0.0}} for t in grid]


def snapshot_summary(grid: list[int], quick: bool) -> dict[str, Any]:
    return ci.EXPERIMENT.summarize(snapshot_records(grid), RunContext(backend="sim", quick=quick))


def verdict_on(summary: dict[str, Any], part: str) -> dict[str, Any]:
    return next(v for v in summary["verdicts"] if part in v["scope"])


def test_the_least_loss_youngs_optimum_and_the_replay_aware_one() -> None:
    s = snapshot_summary(DOUBLINGS, quick=False)["snapshot"]
    assert s["simulated_best_batches"] == 512 and not s["best_at_edge"]
    assert s["young_batches"] == pytest.approx(84.85, abs=0.01)
    assert s["load_ms_per_version"] == pytest.approx(10.0)
    assert s["replay_batches"] == pytest.approx(600.0)
    lost = {r["min_deltas"]: r["lost"] for r in s["curve"]}
    assert lost[512] == pytest.approx(1 / 512 + 5220 / 3.6e6)


def test_an_inside_optimum_far_from_youngs_is_not_reproduced() -> None:
    v = verdict_on(snapshot_summary(DOUBLINGS, quick=False), "snapshot")
    assert v["verdict"] == NOT_REPRODUCED and v["measured"] == pytest.approx(math.log2(512 / 84.853), abs=1e-3)
    assert "edge" not in v["scope"] and v["claim"] == "young_optimum"


def test_an_edge_optimum_past_youngs_refutes_it_as_a_bound() -> None:
    summary = snapshot_summary(DOUBLINGS[:9], quick=True)          # 1..256
    assert summary["snapshot"]["simulated_best_batches"] == 256 and summary["snapshot"]["best_at_edge"]
    v = verdict_on(summary, "snapshot")
    assert v["verdict"] == NOT_REPRODUCED and v["measured"] == pytest.approx(1.886, abs=1e-3)
    assert "bound" in v["scope"]


def test_an_edge_bound_within_the_tolerance_measures_nothing() -> None:
    summary = snapshot_summary(DOUBLINGS[:8], quick=True)          # 1..128: the bound is 64
    assert summary["snapshot"]["simulated_best_batches"] == 128
    assert verdict_on(summary, "snapshot")["verdict"] == NOT_MEASURED


def test_an_edge_optimum_short_of_youngs_measures_nothing() -> None:
    summary = snapshot_summary(DOUBLINGS[:7], quick=False)         # 1..64, Young's 84.85 beyond the edge
    assert summary["snapshot"]["simulated_best_batches"] == 64
    assert verdict_on(summary, "snapshot")["verdict"] == NOT_MEASURED


@pytest.mark.parametrize(("best", "predicted", "grid", "verdict"), [
    (500, 38_787, [250, 500, 1000], NOT_REPRODUCED),     # inside, 6.3 doublings short
    (500, 700, [250, 500, 1000], REPRODUCED),            # inside, half a doubling
    (250, 38_787, [250, 500, 1000], NOT_REPRODUCED),     # the short edge, the prediction far past the long one
    (1000, 700, [250, 500, 1000], NOT_MEASURED),         # the long edge: past 500, and 700 is past it
    (1000, 200, [250, 500, 1000], NOT_REPRODUCED),       # the long edge: past 500, 1.3 doublings past 200
    (250, 700, [250, 1000], NOT_MEASURED),               # two points: short of 1000, which 700 is
    (250, 400, [250, 1000, 250], NOT_MEASURED),          # a repeated grid point is one point
    (None, 700, [], NOT_MEASURED),
])
def test_optimum_verdicts(best: float | None, predicted: float, grid: list[float], verdict: str) -> None:
    assert ci._optimum_verdict("x", best, predicted, grid)["verdict"] == verdict


def test_a_load_that_does_not_grow_gives_no_replay_optimum() -> None:
    records = snapshot_records([1, 2, 4])
    for r in records:
        r["metrics"]["recovery_load_ms_mean"] = 300.0
    s = ci.EXPERIMENT.summarize(records, RunContext(backend="sim", quick=False))["snapshot"]
    assert s["load_ms_per_version"] is None and s["replay_batches"] is None
