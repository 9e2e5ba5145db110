"""Verdicts against the published claims (experiments/verdicts.py): each claim's target from its rule and the
post's words alone (experiments/publications.py), judged by the 95% confidence interval of the mean over at least
three seeds (every seed, for a bound); their folding into findings; and the profile fit's pieces
(experiments/fit_profile.py).

Every expected verdict is worked out by hand here. With three seeds the interval is the mean plus or minus
4.303 (Student's t, 2 degrees of freedom) times the standard deviation over the square root of 3: seeds
50, 51, 49 give 50 plus or minus 2.48; seeds 46, 50, 54 give 50 plus or minus 9.94.
"""

from __future__ import annotations

import math

import pytest

from experiments.claims import CLAIMS
from experiments.fit_profile import nelder_mead, residuals
from experiments.publications import rounding_half, target_of
from experiments.verdicts import (EXPLORATORY, FIRST_PRINCIPLES, FITTED, INCONCLUSIVE, MEASURED, NOT_MEASURED,
                                  NOT_REPRODUCED, REPRODUCED, Verdict, confidence_interval, findings, judge, overall,
                                  report_lines, t_quantile)


def verdict(claim_id: str, *samples: float | None) -> str:
    return judge(claim_id, list(samples)).verdict


def test_the_rules_read_the_target_from_the_posts_words_alone() -> None:
    """A range is that range; "approximately X" the values that round to X at its last non-zero digit; "up to X"
    is (0, X]; "below X" is < X; "at most" is <= X. No claim carries a tolerance."""
    assert [rounding_half(x) for x in (50, 65, 500, 1, 14, 0.5)] == [5.0, 0.5, 50.0, 0.5, 0.5, 0.05]
    assert CLAIMS["om_cut_purge"].target == target_of("range", 45.0, 55.0, 0.0)
    assert CLAIMS["om_cut_progress"].target == target_of("range", 64.5, 65.5, 0.0)
    assert CLAIMS["pipe_speedup"].target == target_of("range", 2.0, 3.0, 1.0)
    up_to = CLAIMS["asc_mean_cut"].target
    assert (up_to.low, up_to.high, up_to.low_open, up_to.high_open) == (0.0, 25.0, True, False)
    below = CLAIMS["om_both_below_ms"].target
    assert (below.high, below.high_open, math.isinf(below.low)) == (100.0, True, True)
    assert not any(hasattr(c, "tolerance") for c in CLAIMS.values())
    assert all(c.words in c.quote for c in CLAIMS.values())


def test_students_t_and_the_interval() -> None:
    assert (t_quantile(2), t_quantile(11), t_quantile(500)) == (4.303, 2.228, 1.960)   # df 11 takes df 10's
    mean, low, high = confidence_interval([50.0, 51.0, 49.0])
    assert mean == 50.0 and (low, high) == pytest.approx((50 - 4.303 / math.sqrt(3), 50 + 4.303 / math.sqrt(3)))


def test_an_interval_inside_the_target_reproduces_it_one_across_a_boundary_is_inconclusive() -> None:
    assert verdict("om_cut_purge", 50.0, 51.0, 49.0) == REPRODUCED            # 47.5 to 52.5, inside 45 to 55
    assert verdict("om_cut_purge", 46.0, 50.0, 54.0) == INCONCLUSIVE          # 40.1 to 59.9 straddles both ends
    assert verdict("om_cut_purge", 27.0, 26.0, 28.0) == NOT_REPRODUCED        # 24.5 to 29.5, all below 45
    assert verdict("pipe_speedup", 1.59, 1.60, 1.61) == NOT_REPRODUCED        # no longer "2-3x" within 0.5


def test_fewer_than_three_seeds_give_no_verdict() -> None:
    assert verdict("om_cut_purge", 50.0, 51.0) == EXPLORATORY
    assert verdict("om_cut_purge", 50.0, None, 51.0) == EXPLORATORY          # a seed with no value is no seed
    assert verdict("om_cut_purge", None, None, None) == NOT_MEASURED and verdict("om_cut_purge") == NOT_MEASURED
    v = judge("om_cut_purge", [50.0, None, 51.0])
    assert (v.missing, v.samples) == (1, (50.0, 51.0))


def test_up_to_below_and_a_direction_are_open_where_the_words_are() -> None:
    # "up to 25%": (0, 25]; a cut of 30% is more than published, so not this claim; one around 0 cannot tell
    assert verdict("asc_mean_cut", 10.0, 11.0, 12.0) == REPRODUCED
    assert verdict("asc_mean_cut", 30.0, 30.0, 30.0) == NOT_REPRODUCED
    assert verdict("asc_mean_cut", 1.0, -1.0, 0.0) == INCONCLUSIVE
    # "below 100 ms"
    assert verdict("om_both_below_ms", 46.0, 47.0, 48.0) == REPRODUCED
    assert verdict("om_both_below_ms", 99.0, 100.0, 101.0) == INCONCLUSIVE
    assert verdict("om_both_below_ms", 110.0, 111.0, 112.0) == NOT_REPRODUCED
    # "even bigger improvements in peak": past zero
    assert verdict("asc_peak", 5.0, 6.0, 7.0) == REPRODUCED and verdict("asc_peak", -1.0, 0.0, 1.0) == INCONCLUSIVE


def test_a_bound_is_kept_by_every_seed_or_broken_by_one() -> None:
    """"may need to re-process two micro-batches": at most 2, for each run; the mean of 2, 3, 1 is 2, but the
    seed that re-ran 3 breaks it."""
    assert verdict("asc_rerun", 2.0, 2.0, 1.0) == REPRODUCED
    assert verdict("asc_rerun", 2.0, 3.0, 1.0) == NOT_REPRODUCED
    v = judge("asc_rerun", [2.0, 3.0, 1.0])
    assert (v.mean, v.ci_low, v.ci_high) == (2.0, 1.0, 3.0)


def test_a_verdict_survives_its_stored_form_and_says_which_conditions_were_not_met() -> None:
    v = judge("om_cut_purge", [27.0, 26.0, 28.0], scope="at 1K ev/s", basis=MEASURED)
    stored = {**v.to_dict(), "unmet": ["input rates", "cluster"]}
    back = Verdict.from_dict(stored)
    assert back.unmet == ("input rates", "cluster") and back.samples == (27.0, 26.0, 28.0)
    assert report_lines([stored])[1].strip() == (
        "[not reproduced] p50 cut, async log purge (at 1K ev/s): mean 27%, 95% CI 24.52..29.48% over 3 seeds; "
        "published about 50%, target [45, 55]%; conditions not met: input rates, cluster")
    assert report_lines([]) == []


def test_findings_fold_the_scopes_of_a_claim_per_basis() -> None:
    """A claim holds at every scope it is judged at: reproduced, reproduced, inconclusive is inconclusive; a
    fitted run is its own finding."""
    vs = [judge("om_cut_purge", samples, scope=f"rate {i}", basis=FIRST_PRINCIPLES).to_dict()
          for i, samples in enumerate(([50.0, 51.0, 49.0], [52.0, 53.0, 51.0], [46.0, 50.0, 54.0]))]
    vs.append(judge("om_cut_purge", [49.0, 50.0, 51.0], scope="rate 0", basis=FITTED).to_dict())
    first, fitted = findings(vs)
    assert (first["claim"], first["basis"], first["verdict"], first["scopes"], first["seeds"]) == \
        ("om_cut_purge", FIRST_PRINCIPLES, INCONCLUSIVE, 3, 3)
    assert (first["measured_min"], first["measured_max"]) == (50.0, 52.0)
    assert first["ci_min"] == pytest.approx(50 - 9.94, abs=0.01)
    assert first["counts"] == {REPRODUCED: 2, INCONCLUSIVE: 1}
    assert (fitted["basis"], fitted["verdict"]) == (FITTED, REPRODUCED)


def test_one_overall_verdict_for_several_scopes() -> None:
    assert overall([REPRODUCED, REPRODUCED]) == REPRODUCED
    assert overall([REPRODUCED, NOT_REPRODUCED]) == NOT_REPRODUCED
    assert overall([REPRODUCED, INCONCLUSIVE]) == INCONCLUSIVE
    assert overall([REPRODUCED, NOT_MEASURED]) == INCONCLUSIVE
    assert overall([NOT_REPRODUCED, EXPLORATORY]) == EXPLORATORY
    assert overall([NOT_MEASURED]) == NOT_MEASURED


def test_nelder_mead_finds_the_minimum_of_a_shifted_quadratic() -> None:
    best, value, evaluations = nelder_mead(lambda x: (x[0] - 3) ** 2 + 2 * (x[1] + 1) ** 2, [0.0, 0.0], 1.0, 200)
    assert best == pytest.approx([3.0, -1.0], abs=1e-3)
    assert value == pytest.approx(0.0, abs=1e-5)
    assert evaluations <= 210


def test_fit_residuals_are_the_rate_source_figures_only() -> None:
    """Baseline 450 ms; purge 225 ms is a 50% cut (0 pp) saving 225 ms (the middle of 200-250: 0 pp); progress
    157.5 ms is a 65% cut (0 pp) saving 292.5 ms (+30 pp of 225); both 40 ms is a 91.1% cut (+5.6 pp against
    85.5) and below 100 ms (0). No residual compares the baseline with the headline's 700-900 ms."""
    rows = residuals({(1000, "baseline"): 450.0, (1000, "async-purge"): 225.0, (1000, "async-progress"): 157.5,
                      (1000, "both"): 40.0})
    by = {r["figure"]: r["residual_pp"] for r in rows}
    assert by == pytest.approx({"async-purge p50 cut": 0.0, "async-progress p50 cut": 0.0,
                                "both p50 cut": 100 * (1 - 40 / 450) - 85.5, "async-purge p50 saved": 0.0,
                                "async-progress p50 saved": 30.0, "both p50 (bound)": 0.0})
    over = residuals({(1000, "baseline"): 900.0, (1000, "async-purge"): 450.0, (1000, "async-progress"): 315.0,
                      (1000, "both"): 130.0})
    assert next(r for r in over if r["figure"] == "both p50 (bound)")["residual_pp"] == pytest.approx(30.0)


def test_flinks_changelog_figures_and_the_rocksdb_posts_direction_each_get_a_verdict() -> None:
    """Flink: checkpoint p50 5 s over 311 ms, each as rounded (14.45 to 17.71x), storage about 30% more (25 to
    35), recovery 66% to 225% more; the RocksDB post: changelog checkpointing is faster. Per seed, the changelog's
    commit p50 300, 301, 299 ms against 4,800, 4,810, 4,790 ms without changelog is 16x (reproduced); storage
    +30%, +31%, +29%; recovery +100% each seed."""
    from experiments.changelog_checkpointing.definition import _flink_verdicts

    def stats(*values: float) -> dict[str, object]:
        return {"by_seed": {str(i + 1): v for i, v in enumerate(values)}}
    changelog = {"min_deltas": 10, "commit_ms_p50": stats(300.0, 301.0, 299.0),
                 "state_bytes_retained": stats(130.0, 131.0, 129.0), "recovery_load_ms_mean": stats(20.0, 20.0, 20.0)}
    snapshot = {"commit_ms_p50": stats(4800.0, 4810.0, 4790.0), "state_bytes_retained": stats(100.0, 100.0, 100.0),
                "recovery_load_ms_mean": stats(10.0, 10.0, 10.0)}
    assert [v["verdict"] for v in _flink_verdicts(changelog, snapshot)] == [REPRODUCED] * 4
    slow = dict(changelog, commit_ms_p50=stats(4900.0, 4910.0, 4890.0))     # the changelog is slower
    assert [v["verdict"] for v in _flink_verdicts(slow, snapshot)][:2] == [NOT_REPRODUCED, NOT_REPRODUCED]
    assert [v["verdict"] for v in _flink_verdicts({}, {})] == [NOT_MEASURED] * 4
