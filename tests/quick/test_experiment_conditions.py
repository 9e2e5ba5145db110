"""Issue 31: every experiment, run with its defaults, tests its claim under the claim's conditions and says so.

- conditions: the report's header says which published conditions a run meets; the engine's
  offset-management run uses the object store by default, and a backend that cannot meet a condition says so
  in the header and in every verdict;
- keep-up: the simulator's latency points get the one keep-up verdict (``reference.protocol.timing``), and a report
  row is "kept up" or "BACKLOGGED (x of y rows/s)", with no latency when backlogged;
- sanity checks know the noise: an inversion inside the spread over seeds, or seen with one seed, is within
  noise and fails nothing; one beyond the spread fails;
- one exit-code rule, stated in ``lightspeed experiment NAME --help`` with the claim, the defaults, the times
  and the paper's command.
No Spark runs here: the engine's defaults are read from its points and its conditions.
"""

from __future__ import annotations

from typing import Any

import pytest

from experiments import exit_codes, sweep
from experiments.cli import main
from experiments.conditions import Condition, header_lines, unmet
from experiments.experiment import Check, RunContext
from experiments.registry import experiment_names, get_experiment
from experiments.sanity import no_worse, spread_of
from experiments.stats import keep_up, keep_up_text, latency_over_seeds
from reference.protocol.timing import summarize_throughput, summarize_throughput_groups
from streamtest import run


def seeds(*values: float) -> dict[str, Any]:
    return {"median": sorted(values)[len(values) // 2], "min": min(values), "max": max(values), "n": len(values)}


# ------------------------------------------------------------------ noise


def test_an_inversion_smaller_than_the_spread_over_seeds_is_within_noise_and_fails_nothing() -> None:
    """Baseline p50 over three seeds 230, 240, 262 ms (spread 32 ms); async purge 245, 250, 257 ms (spread 12):
    the purge's median is 10 ms above the baseline's, less than the 32 ms the seeds spread."""
    check = no_worse("async-purge p50 <= baseline p50", seeds(245.0, 250.0, 257.0), seeds(230.0, 240.0, 262.0))
    assert check.within_noise and check.ok is None
    assert "within noise" in check.describe() and check.describe().startswith("[NOISE]")
    assert "spread over 3 seeds 32.0 ms" in check.detail


def test_one_seed_cannot_tell_an_inversion_from_noise() -> None:
    """The case a newcomer met: 256.6 ms against 239.6 ms with one seed was a failure; it is within noise."""
    check = no_worse("async-purge p50 <= baseline p50", seeds(256.6), seeds(239.6))
    assert check.ok is None and check.within_noise and "one seed" in check.detail


def test_an_inversion_beyond_the_spread_is_real_and_fails() -> None:
    check = no_worse("x", seeds(300.0, 305.0, 310.0), seeds(230.0, 240.0, 250.0))   # 65 ms over a 20 ms spread
    assert check.ok is False and not check.within_noise and "real inversion" in check.detail


def test_an_order_that_holds_passes_and_higher_can_be_better() -> None:
    assert no_worse("x", seeds(100.0), seeds(200.0)).ok is True
    assert no_worse("rows", seeds(2000.0, 2100.0), seeds(1000.0, 1300.0), higher_is_better=True).ok is True
    assert no_worse("rows", seeds(900.0, 1000.0), seeds(1000.0, 1300.0), higher_is_better=True).within_noise
    assert no_worse("x", {}, seeds(1.0)).ok is None and not no_worse("x", {}, seeds(1.0)).within_noise
    assert spread_of(seeds(1.0), seeds(2.0)) is None and spread_of(seeds(1.0, 4.0), seeds(2.0)) == 3.0


def test_a_check_within_noise_leaves_the_exit_code_at_0() -> None:
    result = sweep.ExperimentResult(get_experiment("offset-management"), RunContext(), [], {"x": 1},
                                    [Check("a", True, ""), no_worse("b", seeds(256.6), seeds(239.6))],
                                    None, [], None)   # type: ignore[arg-type]
    assert result.exit_code == exit_codes.OK
    result.checks.append(no_worse("c", seeds(300.0, 305.0), seeds(230.0, 240.0)))
    assert result.exit_code == exit_codes.CHECK_FAILED


# ------------------------------------------------------------------ keep-up


def test_the_simulator_judges_whether_a_rate_run_kept_up_by_the_one_rule() -> None:
    """A rate source the simulated cluster sustains keeps up; one far past what a single slow executor can
    process is backlogged. Both through the outcome's timing block, as the engines report it."""
    def rate_run(rate: int, profile: Any) -> Any:
        scenario = {"name": "keep-up", "seed": 1,
                    "source": {"kind": "rate", "rows_per_second": rate, "duration_s": 20, "partitions": 2,
                               "keys": 100},
                    "query": {"operator": {"kind": "map"}, "state_partitions": 2}, "sink": {"mode": "at_least_once"},
                    "engine": {}, "faults": []}
        from reference.protocol.backend import RunOptions
        return run(scenario, on="sim", options=RunOptions(profile=profile, sim_mode="volume")).outcome
    from experiments.profiles import sim_profile
    fast = rate_run(1_000, sim_profile("local_spark"))
    assert fast.timing.throughput is not None and fast.timing.throughput.kept_up
    slow = sim_profile("local_spark", executors=1, cores_per_executor=1, per_record_us=2000.0)
    behind = rate_run(1_000, slow)
    assert behind.timing.throughput is not None and not behind.timing.throughput.kept_up
    assert behind.timing.throughput.processed_rows_per_s < 0.95 * behind.timing.throughput.input_rows_per_s


def test_groups_of_records_give_the_numbers_their_records_give() -> None:
    """Volume mode hands the rule whole ranges of offsets; by hand, 3 records created at 0, 5, 10 ms visible at
    100 ms and 2 at 20, 30 ms visible at 200 ms are the same run, record by record or in two groups."""
    each = summarize_throughput([0.0, 5.0, 10.0, 20.0, 30.0], [100.0, 100.0, 100.0, 200.0, 200.0])
    grouped = summarize_throughput_groups([(3, 0.0, 10.0, 100.0), (2, 20.0, 30.0, 200.0)])
    assert each == grouped and grouped is not None
    assert grouped.input_rows_per_s == pytest.approx(5 / 0.030, abs=1e-3)
    assert grouped.processed_rows_per_s == pytest.approx(5 / 0.100, abs=1e-3) and not grouped.kept_up
    assert summarize_throughput_groups([(5, 0.0, 0.0, 10.0)]) is None        # all created at once: no rate


def test_a_report_row_says_kept_up_or_backlogged_with_its_rates_and_shows_no_latency_when_behind() -> None:
    kept = {"metrics": {"kept_up": True, "latency_p50": 90.0, "input_rows_per_s": 200.0,
                        "processed_rows_per_s": 199.0}}
    behind = {"metrics": {"kept_up": False, "latency_p50": None, "input_rows_per_s": 200.0,
                          "processed_rows_per_s": 120.0}}
    unjudged = {"metrics": {"kept_up": None, "latency_p50": 80.0}}
    assert keep_up_text(keep_up([kept, kept])) == "kept up"
    assert keep_up_text(keep_up([behind])) == "BACKLOGGED (120 of 200 rows/s)"
    assert keep_up_text(keep_up([kept, behind, kept])) == "BACKLOGGED (120 of 200 rows/s; 1 of 3 seeds)"
    assert keep_up_text(keep_up([unjudged])) == "keep-up not judged"
    assert keep_up_text(keep_up([kept, unjudged])) == "kept up (1 of 2 seeds judged)"
    def seeds(*records: dict) -> list[dict]:   # each a record of its own seed, as a run's records are
        return [{**r, "point": {"seed": seed}} for seed, r in enumerate(records, 1)]
    assert latency_over_seeds(seeds(kept, behind, kept), "latency_p50")["median"] is None
    assert latency_over_seeds(seeds(kept, kept), "latency_p50")["median"] == 90.0


# ------------------------------------------------------------------ conditions and defaults


def test_the_engines_offset_management_run_uses_the_object_store_by_default_and_says_so() -> None:
    exp = get_experiment("offset-management")
    ctx = RunContext(backend="spark", quick=True)
    points = sweep.with_storage_profile(exp.points(ctx), ctx.storage_profile, default=exp.storage_default.get("spark"))
    assert {p.extra["storage_profile"] for p in points} == {"object_store"}
    header = "\n".join(header_lines(exp.conditions(ctx)))
    assert "checkpoint storage: object_store" in header and "input rates: 1K events/s" in header
    assert "NOT HONOURED" in header                      # the rates and the cluster: a 2-core machine
    assert unmet(exp.conditions(ctx)) == ("input rates", "cluster")
    explicit = sweep.with_storage_profile(exp.points(ctx), "local_disk", default="object_store")
    assert {p.extra["storage_profile"] for p in explicit} == {"local_disk"}
    assert "storage_profile" not in exp.points(RunContext(backend="sim", quick=True))[0].extra
    # native Spark writes its checkpoint through the latency filesystem, on the object store by default
    assert "checkpoint storage" not in unmet(exp.conditions(RunContext(backend="spark-native", quick=True)))
    assert "checkpoint storage" in unmet(exp.conditions(RunContext(backend="spark-native", quick=True,
                                                                   storage_profile="local_disk")))


def test_every_verdict_names_the_conditions_its_run_did_not_meet() -> None:
    exp = get_experiment("offset-management")
    ctx = RunContext(backend="spark", quick=True)
    p50 = {"baseline": 900.0, "async-purge": 500.0, "async-progress": 400.0, "both": 200.0}
    records = [{"point": p.to_dict(), "metrics": {"latency_p50": p50[p.config], "latency_p99": 2 * p50[p.config],
                                                  "kept_up": True, "batch_ms_mean": 100.0}}
               for p in exp.points(ctx)]
    summary, _checks = sweep.summarize_run(exp, records, ctx)
    assert summary["conditions"] and all(isinstance(c, dict) for c in summary["conditions"])
    assert summary["verdicts"] and all(v["unmet"] == ["input rates", "cluster"] for v in summary["verdicts"])
    assert Condition("x", "p", "u", False, "why").line() == "x: u (published: p) - NOT HONOURED: why"


@pytest.mark.parametrize("name", experiment_names())
def test_the_help_of_each_experiment_names_claim_defaults_backends_times_and_the_paper_command(
        name: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["experiment", name, "--help"]) == exit_codes.OK
    text = capsys.readouterr().out
    exp = get_experiment(name)
    assert exp.claim in text and "exit codes: 0 every point ran" in text and "whatever the verdicts" in text
    for backend in exp.backends:
        assert f"--backend {backend}: about" in text and "quick" in text and "full" in text
        assert exp.paper_command(backend) in text


def test_experiment_without_a_name_is_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["experiment"]) == exit_codes.BAD_INPUT
    assert "name an experiment" in capsys.readouterr().err
