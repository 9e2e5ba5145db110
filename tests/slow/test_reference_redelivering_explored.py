"""A redelivering source under the explorer: every crash cut and single fault finds nothing wrong, and a dedup
set that is not persisted is caught (moved from tests/quick/test_reference_redelivering.py: each explores a
whole scenario)."""

from __future__ import annotations

import pytest
from test_reference_redelivering import DedupNotPersisted, planted, redelivering

from reference.judge.oracles import check_outcome, failures
from reference.judge.explorer import explore


@pytest.mark.parametrize("operator,mode", [("aggregate", "sync"), ("map", "async_progress")])
def test_the_explorer_finds_no_violation_on_a_redelivering_source(operator, mode):
    """Every crash cut (``plan`` is a writing step here: it writes the fetch state) and every single fault; under
    asynchronous progress the offset log has gaps, so a restart resumes from an older fetch state and re-fetches."""
    report = explore(redelivering(operator, mode, batches=3), workers=1)
    assert report.violations == [] and report.distinct_checkpoints > 30, report.summary()


def test_a_dedup_set_that_is_not_persisted_passes_without_a_crash_and_the_explorer_catches_it():
    sc = redelivering("aggregate", "sync", batches=3)
    plain = planted(DedupNotPersisted).run(sc)
    assert failures(check_outcome(sc, plain.outcome(), plain.storage)) == []
    report = explore(sc, model=planted(DedupNotPersisted), workers=1)
    assert report.violations
    assert {"output_semantics", "state_equivalence"} <= {v.check for v in report.violations[0].verdicts}
    assert "driver_crash" in report.violations[0].schedule
