"""The published claims: one table of every number the project tests, each a quote from its post.

Each experiment keeps its claims in its own folder (``experiments/<name>/claims.py``, a ``CLAIMS`` dict of
``experiments.publications.Claim``); this module gathers them, for every experiment of
``experiments.registry``, into ``CLAIMS``. An experiment judges the claims it tests
(``experiments.verdicts.judge``) once, where it measures them; the paper renders those verdicts and the claims'
own fields from here. Nothing else in the project keeps a copy of a published number.
"""

from __future__ import annotations

import importlib

from experiments.publications import Claim
from experiments.registry import EXPERIMENTS

# the order the claims were listed in before they moved into the experiments' folders (kept so the move changes
# no table)
_ORDER = ("om_headline", "om_cut_purge", "om_cut_progress", "om_cut_both", "om_both_below_ms",
          "om_saved_per_feature_ms", "om_saved_both_ms", "om_kafka_cut", "om_update_headline", "om_update_purge_ms",
          "pipe_speedup", "state_commit_share", "rb_spread", "asc_pending", "asc_rerun", "asc_mean_cut",
          "asc_millions", "asc_peak", "cl_faster", "psc_latency", "flink_ckpt_ratio", "flink_storage",
          "flink_recovery", "young_optimum", "rtm_stateless_p50", "rtm_stateless_p99", "rtm_stateful_p50",
          "rtm_stateful_p99", "doppio_error", "ernest_error")


def _gathered() -> dict[str, Claim]:
    out: dict[str, Claim] = {}
    for name in EXPERIMENTS:
        module = importlib.import_module(EXPERIMENTS[name].claims)
        for cid, c in module.CLAIMS.items():
            assert cid not in out, f"claim {cid!r} is defined by two experiments"
            out[cid] = c
    assert set(out) == set(_ORDER), set(out) ^ set(_ORDER)
    return {cid: out[cid] for cid in _ORDER}


CLAIMS: dict[str, Claim] = _gathered()


def claim(claim_id: str) -> Claim:
    """The claim named ``claim_id``; a ``KeyError`` that names the known ones for an unknown id."""
    if claim_id not in CLAIMS:
        raise KeyError(f"unknown claim {claim_id!r}; known claims: {', '.join(CLAIMS)}")
    return CLAIMS[claim_id]


def claims_of(experiment: str) -> list[str]:
    """The ids of the claims ``experiment`` judges, in the table's order."""
    return [cid for cid, c in CLAIMS.items() if c.experiment == experiment]


def describe(experiment: str) -> str:
    """The claims ``experiment`` judges, in one line (its ``claim`` for reports and --help)."""
    return "; ".join(f"{CLAIMS[cid].what} {CLAIMS[cid].published}" for cid in claims_of(experiment))
