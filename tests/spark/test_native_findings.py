"""The findings about Spark (``experiments/native_findings.py``), pinned: each minimal scenario still shows, on
Spark's own Structured Streaming, the departure from the spec that ``spark_impl/native/README.md`` writes up,
and the reference still does what the spec expects there. If Spark (or the adapter) changes, a test fails.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments.native_findings import FINDINGS, SPARK_VERSION, finding_of
from reference.judge.oracles import check_outcome, failures
from reference.protocol.run import run_scenario
from reference.language.scenario import Scenario

README = Path(__file__).resolve().parents[2] / "spark_impl" / "native" / "README.md"


@pytest.mark.spark
@pytest.mark.parametrize("finding", FINDINGS, ids=[f.key for f in FINDINGS])
def test_spark_still_departs_from_the_spec_as_written_up(finding, tmp_path):
    import pyspark
    from spark_impl.native import run_native
    sc = Scenario.from_dict(finding.scenario)
    outcome = run_native(sc, workdir=str(tmp_path)).outcome
    assert pyspark.__version__ == SPARK_VERSION, "a finding names the Spark version it was found on"
    assert finding.shows(outcome, str(tmp_path)), (outcome.error, outcome.details["native"]["notes"])
    if not finding.reference_recovers:
        return
    reference = run_scenario(sc)
    assert reference.outcome().error is None   # where Spark stops or leaks, the reference's run finishes
    assert not any(path.endswith(".tmp") for path in reference.storage.files)
    if finding.matrix:
        # and the reference's checkpoint oracle names the damaged entry that Spark could not get past
        bad = failures(check_outcome(sc, reference.outcome(), reference.storage))
        assert [v.check for v in bad] == ["checkpoint"] and "offsets/0" in bad[0].describe()


def test_every_finding_is_written_up_and_names_its_spark_class():
    text = README.read_text()
    for finding in FINDINGS:
        assert f"`{finding.key}`" in text, finding.key
        assert finding.spark_class.split()[0].rsplit(".", 1)[-1] in text
        assert finding.spec_expects.startswith("spec section ")


def test_a_failing_matrix_cell_is_named_by_the_finding_it_shows_and_only_by_its_signature():
    found = finding_of("map", "corrupt_file", "the run stopped: ... Unexpected end-of-input in field name")
    assert found is not None and found.key == "unnamed-corrupt-offset-entry"
    assert finding_of("map", "corrupt_file", "the run stopped: some other error") is None
    assert finding_of("aggregate", "corrupt_file", "Unexpected end-of-input") is None
