"""Open-ended planning (``engine.batch_cuts: trigger`` on a timed backend): each batch's end is decided when
its ``plan`` runs, from what has arrived, and the next batch opens then.

A timed backend gives the clock (``cut_now``); here a scripted clock stands in for it, and the sequential
scheduler runs the growing graph.
"""

from __future__ import annotations

from reference.protocol.incarnation import Incarnation
from reference.protocol.graph import Node
from reference.protocol.recovery import fresh_plan
from reference.judge.oracles import check_outcome, failures
from reference.protocol.observer import Observer, build_outcome
from reference.language.scenario import Scenario
from reference.protocol.sources import SourceData
from reference.protocol.storage import DurableStorage


class ScriptedCuts(Incarnation):
    """Cuts as a trigger on a clock would make them: here, a script of end offsets, one per plan."""

    script: list[tuple[int, ...]] = []

    def cut_now(self, b: int) -> tuple[int, ...]:
        return self.script[b]

    def nodes_added(self, nodes: list[Node]) -> None:
        self.added = getattr(self, "added", []) + [n.id for n in nodes]


def open_scenario(rows_per_partition: int) -> Scenario:
    records = [[p, f"k{i}", 1, i * 10, i * 10] for p in range(2) for i in range(rows_per_partition)]
    return Scenario.from_dict({"name": "open", "seed": 1,
                               "source": {"kind": "explicit", "batch_ms": 1000, "records": records},
                               "query": {"operator": {"kind": "aggregate", "agg": "count"}, "state_partitions": 2}})


def test_an_open_batch_is_cut_when_it_plans_and_the_next_one_opens_until_the_input_ends():
    scenario = open_scenario(6)
    ScriptedCuts.script = [(2, 1), (4, 4), (6, 6)]
    storage, observer = DurableStorage(), Observer()
    inc = ScriptedCuts(scenario, SourceData.of(scenario), storage, fresh_plan(2), 0, observer, open_ended=True)
    assert sorted(inc.plans) == [0] and inc.plans[0].end is None
    pending_before = len(inc.nodes)
    inc.run_step(next(n for n in inc.nodes if n.step == "plan"))
    assert inc.plans[0].end == (2, 1) and inc.plans[1].start == (2, 1) and inc.plans[1].end is None
    assert len(inc.nodes) > pending_before and all(n.batch == 1 for n in inc.added)
    # run a whole incarnation: three plans, and no fourth batch once the input is consumed
    storage, observer = DurableStorage(), Observer()
    inc = ScriptedCuts(scenario, SourceData.of(scenario), storage, fresh_plan(2), 0, observer, open_ended=True)
    done: set = set()
    while len(done) < len(inc.nodes):
        node = next(n for n in inc.nodes if n not in done and all(d in done for d in inc.nodes[n].deps))
        inc.run_step(node)
        done.add(node)
    assert [(p.start, p.end) for _b, p in sorted(inc.plans.items())] == \
        [((0, 0), (2, 1)), ((2, 1), (4, 4)), ((4, 4), (6, 6))]
    outcome = build_outcome(scenario, storage, observer, None)
    assert failures(check_outcome(scenario, outcome, storage)) == []


def test_an_open_batch_may_cut_a_partition_that_received_nothing():
    """Partition 1 has no new rows by the first plan: the cut keeps its start, and the next batch opens there."""
    scenario = open_scenario(3)
    ScriptedCuts.script = [(2, 0), (3, 3)]
    inc = ScriptedCuts(scenario, SourceData.of(scenario), DurableStorage(), fresh_plan(2), 0, Observer(),
                       open_ended=True)
    inc.run_step(inc.nid("plan", 0))
    assert inc.plans[0].end == (2, 0) and inc.plans[1].start == (2, 0)
