"""The bug zoo (``experiments.zoo``) as an experiment: one point per planted bug.

A point runs its bug's failing sequence on the store with the mistake planted and on the real store, both
judged by the same checks (``experiments.zoo.run_bug``), in a scratch directory of its own that it removes. The
RocksDB store runs in this process (rocksdict) and the reference's loader reads what it wrote: no JVM, no
backend run, so the points are filed under the reference model. The zoo is deterministic: one seed.
"""

from __future__ import annotations

import shutil
from typing import Any

from experiments.experiment import BackendRun, Check, Experiment, Point, RunContext
from experiments.zoo import JIRAS, run_bug, scratch_root


class BugZoo(Experiment):
    name = "bug-zoo"
    version = "1"
    title = "each real Spark state-store bug planted, and the check that catches it"
    claim = "every planted bug is caught, and the real store passes every sequence"
    runs = {"reference": BackendRun(1.0, 1.0)}      # seconds on this project's 2-core machine
    default_backend = "reference"
    seeds_quick = 1
    seeds_full = 1
    point_timeout_s = 300.0

    def points(self, ctx: RunContext) -> list[Point]:
        return [Point(self.name, "plant", jira, {}, seed, "reference", {}) for jira in JIRAS
                for seed in self.seed_list(ctx)]

    def measure(self, point: Point) -> dict[str, Any]:
        root = scratch_root()
        try:
            return run_bug(point.config, root).to_dict()
        finally:
            shutil.rmtree(root, ignore_errors=True)

    def summarize(self, records: list[dict[str, Any]], ctx: RunContext) -> dict[str, Any]:
        rows = [r["metrics"] for r in records if not r.get("error")]
        return {"rows": rows, "planted": len(rows), "caught": sum(1 for r in rows if r["checks_failed"]),
                "unplanted_pass": sum(1 for r in rows if r["unplanted_passes"])}

    def checks(self, summary: dict[str, Any], ctx: RunContext) -> list[Check]:
        missed = [r["jira"] for r in summary["rows"] if not r["checks_failed"]]
        broken = [r["jira"] for r in summary["rows"] if not r["unplanted_passes"]]
        return [Check("every planted bug is caught", not missed,
                      f"{summary['caught']} of {summary['planted']} caught" + (f"; missed {', '.join(missed)}"
                                                                                if missed else "")),
                Check("the real store passes every sequence", not broken,
                      f"{summary['unplanted_pass']} of {summary['planted']} pass" + (
                          f"; failed {', '.join(broken)}" if broken else ""))]

    def report(self, summary: dict[str, Any], ctx: RunContext) -> list[str]:
        return [f"{r['jira']}: caught by {r['caught_by'] or 'NOTHING'}; the real store "
                f"{'passes' if r['unplanted_passes'] else 'FAILS'}" for r in summary["rows"]]


EXPERIMENT = BugZoo()
