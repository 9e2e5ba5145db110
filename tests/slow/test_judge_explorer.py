"""The explorer's enumeration and bookkeeping, on posets and scenarios small enough to count by hand.

Found by mutation testing the judge (reference/judge/explorer.py): the slow
exhaustive tests check that nothing is wrong and that planted mistakes are
caught, but not how many down-sets a poset has, what the plan counts, that
the report is the same for any number of workers, or what it says.
"""

from __future__ import annotations

import ctypes
import dataclasses
import multiprocessing
import signal
import threading
import time

import pytest

from reference.judge import explorer
from reference.language.catalogue import make
from reference.protocol.incarnation import Incarnation
from reference.judge.explorer import (MAX_CUTS, WRITING, ExplorationInterrupted, ExplorePlan, ExploreProgress, Model,
                                Report, Violation, _die_with_parent, _down_sets, _explore_share, _lazy_order,
                                _on_sigint, count_writing_cuts, explore, first_graph, plan_exploration,
                                single_faults, writing_cuts)
from reference.judge.oracles import Verdict
from reference.protocol.run import Run, Schedule
from reference.protocol.state_store import StateStore
from reference.language.scenario import Fault, FaultAt
from reference.language.steps import DRIVER_STEPS


def down_sets(preds: list[list[int]]) -> list[list[bool]]:
    return [list(member) for member in _down_sets(preds)]


def test_down_sets_of_a_chain_an_antichain_and_a_join():
    F, T = False, True
    assert down_sets([[], [0], [1]]) == [[F, F, F], [T, F, F], [T, T, F], [T, T, T]]
    assert down_sets([[], []]) == [[F, F], [F, T], [T, F], [T, T]]
    # 2 waits for both 0 and 1: 2 can be in only with both
    assert down_sets([[], [], [0, 1]]) == [[F, F, F], [F, T, F], [T, F, F], [T, T, F], [T, T, T]]
    assert down_sets([]) == [[]]


@pytest.fixture(scope="module")
def tiny() -> tuple:
    scenario = make("aggregate", batches=2, partitions=1)
    return scenario, first_graph(scenario, Model())


def test_every_cut_is_a_distinct_down_closed_prefix_ending_in_a_write(tiny):
    _scenario, inc = tiny
    cuts = list(writing_cuts(inc))
    order = list(inc.nodes)
    assert len(cuts) == count_writing_cuts(inc)[0] and count_writing_cuts(inc)[1] is False
    assert len({tuple(c) for c in cuts}) == len(cuts) > 3
    for cut in cuts:
        assert cut[-1].step in WRITING
        assert cut == sorted(cut, key=order.index)
        for node in cut:
            assert set(inc.nodes[node].deps) <= set(cut), f"{node} runs before what it waits for"
    writers = [n for n in order if n.step in WRITING]
    assert cuts[-1] != order or writers[-1] == order[-1]
    assert any(set(c) >= set(writers) for c in cuts), "the cut with every write is there"


def test_counting_cuts_stops_past_the_cap(tiny):
    _scenario, inc = tiny
    total, _ = count_writing_cuts(inc)
    assert count_writing_cuts(inc, cap=3) == (3, True)
    assert count_writing_cuts(inc, cap=total) == (total, False)


def test_single_faults_skip_background_steps_and_cover_every_task_step(tiny):
    _scenario, inc = tiny
    faults = list(single_faults(*tiny))
    kinds = {f.kind for f, _ in faults}
    assert kinds == {"task_failure", "executor_loss", "storage_write_error", "zombie_write"}
    for node in inc.nodes:
        placed = {(f.kind, f.at.when) for f, _ in faults if (f.at.step, f.at.batch) == (node.step, node.batch)}
        if node.step in ("state_load", "task_apply"):
            assert placed >= {("task_failure", "before"), ("task_failure", "after"), ("executor_loss", "before"),
                              ("executor_loss", "after")}
    errors = {f.at.step for f, _ in faults if f.kind == "storage_write_error"}
    assert errors == {"changelog_write", "sink_write", "snapshot_upload"}   # maintenance survives its own faults
    landing = {(f.at.step, f.at.batch, f.at.partition): [] for f, _ in faults if f.kind == "zombie_write"}
    for f, lands in faults:
        if f.kind == "zombie_write":
            landing[(f.at.step, f.at.batch, f.at.partition)].append(lands)
    # a zombie of batch 0's task lands after batch 0's commit entry, before batch 1's task loads, or at the end
    assert landing[("changelog_write", 0, 0)] == [inc.nid("commit_log_write", 0), inc.nid("state_load", 1, 0), None]
    zombies = [(f.at.step, lands) for f, lands in faults if f.kind == "zombie_write"]
    assert {step for step, _ in zombies} == {"changelog_write", "sink_write"}   # the steps that write part files
    assert any(lands is None for _, lands in zombies) and any(lands is not None for _, lands in zombies)


def test_the_plan_counts_cuts_and_faults_under_each_background_order(tiny):
    scenario, inc = tiny
    plan = plan_exploration(scenario)
    placements = len(list(single_faults(scenario, inc)))
    passes = 1 if _lazy_order(inc) == list(inc.nodes) else 2
    assert plan == ExplorePlan(count_writing_cuts(inc)[0], False, placements * passes)
    assert plan.schedules == plan.cuts + plan.fault_schedules
    assert plan.describe() == f"{plan.cuts:,} crash cuts and {plan.fault_schedules:,} single-fault schedules"
    capped = ExplorePlan(MAX_CUTS, True, 7)
    assert capped.describe().startswith("more than 200,000 crash cuts (only the first 200,000 will be explored")


def test_the_lazy_order_runs_background_steps_only_when_nothing_else_is_ready():
    scenario = make("aggregate", "async_state", batches=3, partitions=1)
    inc = first_graph(scenario, Model())
    lazy = _lazy_order(inc)
    assert sorted(lazy, key=list(inc.nodes).index) == list(inc.nodes) and len(set(lazy)) == len(lazy)
    done: set = set()
    for node in lazy:
        ready = [n for n in inc.nodes if n not in done and set(inc.nodes[n].deps) <= done]
        foreground = [n for n in ready if not inc.nodes[n].background]
        assert node == (foreground or ready)[0], "the earliest-created ready step, foreground first"
        done.add(node)
    assert lazy != list(inc.nodes)
    faults = list(single_faults(scenario, inc))
    applied = {(f.at.batch, f.at.partition) for f, _ in faults if f.at.step == "task_apply"}
    assert applied == {(b, p) for b in range(3) for p in range(2)}, "background steps are skipped, not a stop"
    assert not any(f.at.step in ("changelog_write", "state_commit") for f, _ in faults), \
        "a fault in a background state commit fails the query: a crash cut already covers it"


def test_depth_two_adds_a_crash_in_every_recovery():
    scenario = make("aggregate", batches=1, partitions=1)
    assert explore(scenario, workers=1, depth=2).schedules > explore(scenario, workers=1).schedules


def test_the_report_is_the_same_for_one_worker_and_two():
    scenario = make("aggregate", batches=2, partitions=1)
    ticks: list = []
    handler = signal.getsignal(signal.SIGINT)
    one, two = explore(scenario, workers=0, progress=ticks.append), explore(scenario, workers=2)   # 0 means 1
    assert signal.getsignal(signal.SIGINT) is handler, "the workers' SIGINT handler is put back"
    assert ticks and all(0 <= t.done <= t.planned and 0 <= t.seconds <= one.seconds and t.violations == 0
                         for t in ticks)
    plan = plan_exploration(scenario)
    assert one.schedules == two.schedules == plan.schedules
    assert one.distinct_checkpoints == two.distinct_checkpoints > 1
    assert one.violations == two.violations == [] and not one.truncated


class PurgesEverything(Incarnation):
    """Purge deletes every log entry but the newest: a restart cannot find the batch it must re-run."""

    def step_purge(self, b: int) -> None:
        for folder in ("offsets", "commits"):
            entries = sorted(int(p.split("/")[1]) for p in self.storage.list(folder + "/"))
            for batch in entries[:-1]:
                self.storage.delete(f"{folder}/{batch}")


def test_a_planted_mistake_is_reported_with_its_schedule_in_exploration_order():
    scenario = make("aggregate", batches=2, partitions=1, retain=1)
    done, found = multiprocessing.Value("q", 0), multiprocessing.Value("q", 0)
    share = _explore_share(scenario, 1, Model(PurgesEverything), 0, 1, (done, found), None)
    assert share.schedules == done.value == plan_exploration(scenario).schedules
    assert found.value == len(share.violations) > 0
    report = Report(scenario.name, violations=share.violations)
    orders = [v.order for v in report.violations]
    assert orders == sorted(orders) and 1 <= orders[0] and orders[-1] <= share.schedules
    crashes = [v for v in report.violations if v.schedule.startswith("driver_crash after [")]
    assert crashes and all(v.reproduce["crash_after_prefix"] is True and v.reproduce["schedule"] for v in crashes)
    faulted = [v for v in report.violations if "faults" in v.reproduce]
    for v in faulted:   # the label names the fault, where it was placed, and the lazy pass
        f = v.reproduce["faults"][0]
        at = f["at"]
        head = f"{f['kind']} {at['when']} {at['step']} b{at['batch']}"
        assert v.schedule.startswith(head + (f" p{at['partition']}" if at.get("partition") is not None else ""))
    assert faulted[0].schedule == "task_failure before state_load b0 p0"   # the eager pass comes first
    for v in crashes:   # the label names the last three steps of the cut
        assert v.schedule.count(", ") == min(2, len(v.reproduce["schedule"]) - 1)
    assert report.summary().endswith(f"{len(report.violations)} violation(s)")


def test_violations_are_the_same_however_the_schedules_are_shared_out():
    """Two shares may each meet a cut that reaches one checkpoint; only the first in exploration order is
    judged, as in one share: the report does not count a checkpoint's violations once per share."""
    scenario = make("dedup_within_watermark", batches=3)
    model = Model(type("ForgetsDeletesIncarnation", (Incarnation,), {"store_class": ForgetsDeletes}))
    reports = [explore(scenario, model=model, workers=w) for w in (1, 3)]
    labels = [[(v.order, v.schedule) for v in r.violations] for r in reports]
    assert labels[0] and labels[0] == labels[1]
    assert len({r.checkpoint_fingerprint for r in reports}) == 1
    assert reports[0].distinct_checkpoints == reports[1].distinct_checkpoints
    deeper = [explore(make("aggregate", batches=2), depth=2, workers=w).schedules for w in (1, 3)]
    assert deeper[0] == deeper[1], "a checkpoint's second crashes count once, in the share that judged it first"


def test_report_and_violation_texts():
    report = Report("count", schedules=10, distinct_checkpoints=4, seconds=2.0)
    assert report.summary() == ("count: explored 10 schedules (4 distinct crash checkpoints) in 2.00 s (5/s); "
                                "0 violation(s)")
    report.truncated = True
    assert report.summary().endswith("; STOPPED at 200000 cuts, exploration incomplete")
    assert Report("idle").summary() == "idle: explored 0 schedules (0 distinct crash checkpoints) in 0.00 s (0/s); " \
                                       "0 violation(s)"
    v = Violation("driver_crash after [x]", [Verdict("no_loss", "fail", "short")], {})
    assert v.order == 0
    assert v.describe() == "VIOLATION under driver_crash after [x]\n  [FAIL] no_loss: short"


def test_sigint_is_caught_only_on_the_main_thread():
    interrupted = threading.Event()
    previous = _on_sigint(interrupted)
    try:
        assert previous is not None
        signal.raise_signal(signal.SIGINT)
        assert interrupted.is_set()
    finally:
        signal.signal(signal.SIGINT, previous)
    found = []
    worker = threading.Thread(target=lambda: found.append(_on_sigint(threading.Event())))
    worker.start()
    worker.join()
    assert found == [None]


def test_an_interrupt_with_one_worker_reports_what_was_explored():
    def interrupt(_progress):
        raise KeyboardInterrupt

    with pytest.raises(ExplorationInterrupted) as stopped:
        explore(make("aggregate", batches=2, partitions=1), workers=1, progress=interrupt)
    assert stopped.value.report.truncated and stopped.value.report.schedules >= 1


def test_explore_takes_its_options_by_keyword_and_its_plan_is_frozen():
    scenario = make("aggregate", batches=2, partitions=1)
    with pytest.raises(TypeError):
        explore(scenario, 2)   # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan_exploration(scenario).cuts = 0   # type: ignore[misc]


# ----------------------------------------------------------------------------------------------------------------
# What each schedule is run with (found by the mutants that survived the tests above): a model that records every
# run it is asked for, so the expected calls can be written down from the explorer's contract.

@dataclasses.dataclass
class Recording(Model):
    calls: list = dataclasses.field(default_factory=list)

    def run(self, scenario, schedule=None):
        self.calls.append((scenario.faults, schedule))
        return super().run(scenario, schedule)


def counters() -> tuple:
    return multiprocessing.Value("q", 0), multiprocessing.Value("q", 0)


def test_each_fault_runs_once_eagerly_then_once_with_background_steps_as_late_as_possible():
    scenario = make("aggregate", "async_state", batches=2, partitions=1)
    inc = first_graph(scenario, Model())
    lazy = _lazy_order(inc)
    assert lazy != list(inc.nodes)
    placements = list(single_faults(scenario, inc))
    model = Recording()
    done, found = counters()
    share = _explore_share(scenario, 1, model, 0, 1, (done, found), None)
    eager = [((f,), Schedule(zombie_lands_after=lands) if lands is not None else None) for f, lands in placements]
    late = [((f,), Schedule(prefix=lazy, zombie_lands_after=lands)) for f, lands in placements]
    assert model.calls == eager + late
    # a clean model: every schedule counted once, no violation counted
    assert share.violations == [] and found.value == 0
    assert share.schedules == done.value == plan_exploration(scenario).schedules


def test_without_background_steps_there_is_only_the_eager_pass():
    scenario = make("aggregate", batches=1, partitions=1)   # one batch: no maintenance, nothing in the background
    inc = first_graph(scenario, Model())
    assert not any(node.background for node in inc.nodes.values())
    placements = list(single_faults(scenario, inc))
    assert plan_exploration(scenario).fault_schedules == len(placements)
    model = Recording()
    share = _explore_share(scenario, 1, model, 0, 1, counters(), None)
    assert model.calls == [((f,), Schedule(zombie_lands_after=lands) if lands is not None else None)
                           for f, lands in placements]
    assert share.schedules == plan_exploration(scenario).schedules


def test_faulted_violations_are_labelled_by_pass_and_numbered_one_by_one():
    scenario = make("aggregate", "async_state", batches=2, partitions=1, retain=1)
    share = _explore_share(scenario, 1, Model(PurgesEverything), 0, 1, counters(), None)
    faulted = [v for v in share.violations if "faults" in v.reproduce]
    orders = [v.order for v in faulted]
    assert orders == sorted(set(orders)), "each fault schedule has its own place in the exploration"
    lazy = [v for v in faulted if v.schedule.endswith("(lazy background)") or "(lazy background) landing" in v.schedule]
    assert lazy and len(lazy) < len(faulted)
    assert min(v.order for v in lazy) > max(v.order for v in faulted if v not in lazy), "the lazy pass comes second"


def test_depth_two_crashes_again_after_every_write_of_the_recovery():
    scenario = make("aggregate", batches=1, partitions=1)
    plan = plan_exploration(scenario)
    model = Recording()
    done, found = counters()
    share = _explore_share(scenario, 2, model, 0, 1, (done, found), None)
    second = [(faults, schedule) for faults, schedule in model.calls if faults and faults[0].kind == "driver_crash"]
    expected, seen = [], []
    for prefix in writing_cuts(first_graph(scenario, Model())):
        first = Run(scenario, schedule=Schedule(prefix=prefix, crash_after_prefix=True))
        first.life()
        checkpoint = dict(first.storage.files)
        if checkpoint in seen:
            continue   # cuts that leave byte-identical checkpoints are recovered once
        seen.append(checkpoint)
        lives = first.finish().executed
        assert len(lives) >= 2, "a crash cut always recovers"
        for node in lives[1]:
            if node.step in WRITING:
                partition = None if node.step in DRIVER_STEPS else node.partition
                crash = Fault(FaultAt(node.step, node.batch, partition, "after", restart=1), "driver_crash")
                expected.append(((crash,), Schedule(prefix=lives[0], crash_after_prefix=True)))
    assert second == expected
    assert any(f[0].at.partition == 0 for f, _ in second) and any(f[0].at.partition == 1 for f, _ in second)
    assert any(f[0].at.partition is None for f, _ in second)
    assert share.schedules == plan.schedules + len(expected)
    assert share.violations == [] and found.value == 0   # a clean engine survives every second crash


def test_crash_cuts_stop_at_the_cap_and_say_so(monkeypatch):
    scenario = make("aggregate", batches=2, partitions=1)
    plan = plan_exploration(scenario)
    pulled = []

    def counted(inc):
        for cut in writing_cuts(inc):
            pulled.append(cut)
            yield cut

    monkeypatch.setattr(explorer, "MAX_CUTS", 3)
    monkeypatch.setattr(explorer, "writing_cuts", counted)
    share = _explore_share(scenario, 1, Model(), 0, 1, counters(), None)
    assert share.truncated
    assert share.schedules == 3 + plan.fault_schedules
    assert len(pulled) == 4, "enumeration stops at the first cut past the cap"
    assert len(share.digests) <= 3


def test_report_seconds_are_the_time_the_exploration_took():
    scenario = make("aggregate", batches=1, partitions=1)
    start = time.perf_counter()
    report = explore(scenario, workers=1)
    took = time.perf_counter() - start
    assert 0.0 < report.seconds <= took


def test_an_interrupt_at_the_first_progress_report_has_explored_one_schedule():
    """The first progress report comes at once, after the first crash cut; the interrupt it raises stops there."""
    def interrupt(_progress):
        raise KeyboardInterrupt

    start = time.perf_counter()
    with pytest.raises(ExplorationInterrupted) as stopped:
        explore(make("aggregate", batches=2, partitions=1), workers=1, progress=interrupt)
    took = time.perf_counter() - start
    report = stopped.value.report
    assert report.schedules == 1 and report.interrupted_violations == 0 and report.truncated
    assert 0.0 < report.seconds <= took


def test_progress_records_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        ExploreProgress(1, 2, 0, 0.5).done = 2   # type: ignore[misc]


def test_a_worker_asks_to_be_terminated_when_the_exploring_process_dies():
    """PR_SET_PDEATHSIG = SIGTERM, read back in a forked worker with PR_GET_PDEATHSIG (Linux)."""
    def child(conn):
        _die_with_parent()
        value = ctypes.c_int(0)
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(2, ctypes.byref(value))   # PR_GET_PDEATHSIG
        conn.send(value.value)

    context = multiprocessing.get_context("fork")
    here, there = context.Pipe()
    process = context.Process(target=child, args=(there,))
    process.start()
    process.join(10)
    assert here.poll(10), f"the forked worker sent nothing (exit code {process.exitcode})"
    assert here.recv() == signal.SIGTERM


class LosesTheMiddleCommit(Incarnation):
    """Writing commits/2 deletes commits/1 and offsets/2: two checkpoint rules broken by one write."""

    def step_commit_log_write(self, b: int) -> None:
        super().step_commit_log_write(b)
        if b == 2:
            self.storage.delete("commits/1")
            self.storage.delete("offsets/2")


def test_a_crash_checkpoint_breaking_two_rules_is_reported_by_the_first():
    """commit_order is checked before commit_has_offsets (reference/judge/checkpoint_rules.py): a crash checkpoint's
    label names it, and a checkpoint verdict that names every rule broken names it first."""
    scenario = make("map", batches=3, partitions=1)
    share = _explore_share(scenario, 1, Model(LosesTheMiddleCommit), 0, 1, counters(), None)
    reasons = [verdict.message for v in share.violations for verdict in v.verdicts if verdict.check == "checkpoint"]
    first = "commit_order: commits/1 is missing while commits/2 exists"
    assert reasons and all(first in r and r.find("commit_has_offsets") in (-1, *range(r.index(first), len(r)))
                           for r in reasons)
    assert any(r.startswith("crash checkpoint breaks " + first) and "commit_has_offsets" not in r for r in reasons)


class CorruptsTheOffsetLog(Incarnation):
    """Every offset entry is written unreadable: no restart can be planned from any crash checkpoint."""

    def step_offset_log_write(self, b: int) -> None:
        super().step_offset_log_write(b)
        self.storage.write(f"offsets/{b}", b"not an offset entry", overwrite=True)


def test_depth_two_has_no_second_crash_where_the_first_recovery_never_started():
    scenario = make("map", batches=1, partitions=1)
    share = _explore_share(scenario, 2, Model(CorruptsTheOffsetLog), 0, 1, counters(), None)
    assert share.violations, "a run that cannot resume is a violation"
    assert share.schedules == plan_exploration(scenario).schedules   # no recovery, so nothing to crash again
    assert not any("during recovery" in v.schedule for v in share.violations)


class ForgetsDeletes(StateStore):
    """SPARK-55510: a delete changes the live state but never reaches the changelog."""

    def delete(self, key: str) -> None:
        self.data.pop(key, None)
