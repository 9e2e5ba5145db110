"""Every way each failure condition can fail has a crafted wrong outcome (or checkpoint) only its check rejects.

A condition such as "batch b starts where batch b-1 ended" fails two ways: a
gap (input lost) and an overlap (input read twice). ``oracles.FAILURE_WAYS``
and ``checkpoint_rules.RULE_WAYS`` list each condition once with every way;
``CRAFTED`` below makes, for each (check, condition, way), a correct run wrong
in exactly that way, and the check must be the only one that fails, saying
so. ``test_every_way_has_a_crafted_outcome`` fails when a way has none.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Callable

import pytest
from streamtest import crash
from test_judge_checkpoint_rules import edit_commit
from test_judge_recoveries import with_batch, with_sink

from reference.protocol import layout
from reference.language.catalogue import make
from reference.judge.checkpoint_rules import RULE_WAYS, violations
from reference.protocol.logs import CommitEntry
from reference.judge.oracles import FAILURE_WAYS, Context, check_outcome, failures
from reference.protocol.outcome import Outcome, Recovery, StateMove, digest_rows
from reference.protocol.run import run_scenario
from reference.language.scenario import Scenario


class Runs:
    """The correct runs every craft starts from, each run once."""

    def __init__(self) -> None:
        self._cache: dict[str, Any] = {}

    def get(self, name: str, build: Callable[[], Scenario]) -> tuple[Scenario, Outcome, Any]:
        if name not in self._cache:
            scenario = build()
            finished = run_scenario(scenario)
            self._cache[name] = (scenario, finished.outcome(), finished.storage)
        return self._cache[name]

    def count(self) -> tuple[Scenario, Outcome, Any]:
        """A running count over 5 batches, retain 3, exactly-once: offsets and commits 1..4 stay."""
        return self.get("count", lambda: make("aggregate", batches=5, retain=3))

    def windows(self) -> tuple[Scenario, Outcome, Any]:
        return self.get("windows", lambda: make("window_aggregate", batches=5, retain=3))

    def at_least_once(self) -> tuple[Scenario, Outcome, Any]:
        return self.get("alo", lambda: make("aggregate", batches=4, sink="at_least_once"))

    def async_progress(self) -> tuple[Scenario, Outcome, Any]:
        return self.get("async", lambda: make("map", "async_progress", batches=8))

    def crashed(self) -> tuple[Scenario, Outcome, Any]:
        return self.get("crashed", lambda: make("aggregate", batches=5, faults=[crash("offset_log_write", 2)]))

    def redelivered(self) -> tuple[Scenario, Outcome, Any]:
        return self.get("redelivered", lambda: make("aggregate", batches=5, faults=[crash("sink_commit", 2)]))

    def moving(self) -> tuple[Scenario, Outcome, Any]:
        def build() -> Scenario:
            d = json.loads(json.dumps(make("aggregate", batches=5).to_dict()))
            d["query"]["state_partitions"] = 4
            d["executors"], d["events"] = ["a", "b"], [{"kind": "executor_join", "executor": "c", "before_batch": 2}]
            return Scenario.from_dict(d)
        return self.get("moving", build)


RUNS = Runs()
Craft = tuple[Scenario, Outcome, Any, int, str]   # scenario, wrong outcome, checkpoint or None, crashes, says


def state_edit(outcome: Outcome, edit: Callable[[dict[str, Any]], None]) -> Outcome:
    state = json.loads(json.dumps(outcome.state))
    edit(state)
    return dataclasses.replace(outcome, state=state)


def re_run(outcome: Outcome, *batches: int) -> Outcome:
    replanned = outcome
    for b in batches:
        replanned = with_batch(replanned, b, attempts=2)
    return dataclasses.replace(replanned, recoveries=(Recovery(1, batches[0], tuple(batches)),))


def rows(outcome: Outcome, batch: int) -> tuple[Any, ...]:
    return next(e.rows for e in outcome.sink if e.batch == batch)


def set_value(state: dict[str, Any], delta: int) -> None:
    pairs = state["0"]["1"]["5"]
    pairs[0] = [pairs[0][0], pairs[0][1] + delta]


def outcome_only(run: tuple[Scenario, Outcome, Any], wrong: Callable[[Outcome], Outcome], says: str,
                 crashes: int = 0) -> Craft:
    scenario, outcome, _storage = run
    return scenario, wrong(outcome), None, crashes, says


def with_checkpoint(run: tuple[Scenario, Outcome, Any], edit: Callable[[Any], None], says: str,
                    wrong: Callable[[Outcome], Outcome] = lambda o: o) -> Craft:
    scenario, outcome, storage = run
    edited = storage.copy()
    edit(edited)
    return scenario, wrong(outcome), edited, 0, says


def watermark_craft(delta: int | None) -> Craft:
    scenario, outcome, _ = RUNS.windows()
    b = next(x for x in outcome.batches if x.watermark_ms)   # a batch whose watermark is above 0
    wrong = with_batch(outcome, b.id, watermark_ms=None if delta is None else b.watermark_ms + delta)
    return scenario, wrong, None, 0, "no watermark" if delta is None else "watermark differs"


def copies_craft() -> Craft:
    """Batch 2 re-ran once, so each of its rows may be delivered twice, not three times."""
    scenario, outcome, _ = RUNS.at_least_once()
    r = rows(outcome, 2)
    thrice = with_sink(outcome, 2, rows=r + r[:1] + r[:1])
    return scenario, re_run(thrice, 2), None, 1, "more often than the batch's 2 attempt(s)"


def partitions_craft(count: int) -> Craft:
    scenario, outcome, _ = RUNS.count()
    wrong = with_batch(outcome, 3, end_offsets=(15,) * count, start_offsets=(12,) * count)
    return scenario, wrong, None, 0, f"name {count} and {count} source partitions; the scenario has 2"


def consistent(scenario: Scenario, outcome: Outcome) -> Outcome:
    """``outcome`` with the state and sink a backend that ran its (wrong) boundaries would report: the
    failure-free run over them, so only the boundaries themselves are wrong."""
    expected = Context(scenario, outcome).expected
    state = {sid: {p: {v: expected.states[int(v)][sid][int(p)] for v in versions} for p, versions in parts.items()}
             for sid, parts in outcome.state.items()}
    sink = tuple(dataclasses.replace(e, rows=tuple(expected.outputs[e.batch]),
                                     delivery_digests=(digest_rows(expected.outputs[e.batch]),)) for e in outcome.sink)
    return dataclasses.replace(outcome, state=state, sink=sink)


def start_craft(start: tuple[int, int]) -> Craft:
    scenario, outcome, _ = RUNS.count()
    return scenario, consistent(scenario, with_batch(outcome, 2, start_offsets=start)), None, 0, \
        "does not start where"


def end_craft(end: tuple[int, int]) -> Craft:
    scenario, outcome, _ = RUNS.count()
    return scenario, consistent(scenario, with_batch(outcome, 4, end_offsets=end)), None, 0, \
        "do not reach the end of input"


def lost_row() -> Craft:
    scenario, outcome, _ = RUNS.at_least_once()
    return scenario, with_sink(outcome, 1, rows=rows(outcome, 1)[1:]), None, 0, "lost rows"


def deliveries_craft(delta: int) -> Craft:
    """The manifest of batch 3 counts one delivery more or fewer than the outcome's sink."""
    def edit(storage: Any) -> None:
        path = layout.manifest_path(3)
        body = json.loads(storage.read(path))
        body["delivery"] += delta
        storage.write(path, json.dumps(body, sort_keys=True).encode(), overwrite=True)
    if delta > 0:
        return with_checkpoint(RUNS.count(), edit, "count another number of deliveries")
    scenario, outcome, storage = RUNS.redelivered()
    edited = storage.copy()
    path = layout.manifest_path(2)
    body = json.loads(edited.read(path))
    body["delivery"] -= 1
    edited.write(path, json.dumps(body, sort_keys=True).encode(), overwrite=True)
    return scenario, outcome, edited, 0, "count another number of deliveries"


def crash_not_rerun() -> Craft:
    scenario, outcome, _ = RUNS.crashed()
    wrong = dataclasses.replace(with_batch(outcome, 2, attempts=1), recoveries=(Recovery(1, 2, ()),))
    return scenario, wrong, None, 0, "no restart re-ran batch 2"


def rebalancing_craft(how: str) -> Craft:
    scenario, outcome, _ = RUNS.moving()
    moves = outcome.moves
    assert moves, "the join moves a partition"
    wrong = {"missing": moves[1:], "extra": moves + (StateMove(4, 0, "a", "b"),),
             "other": (dataclasses.replace(moves[0], target="a"),) + moves[1:]}[how]
    return scenario, dataclasses.replace(outcome, moves=wrong), None, 0, "differs from the placement rule"


CRAFTED: dict[tuple[str, str, str], Callable[[], Craft]] = {
    # identity
    ("identity", "scenario name", "another"):
        lambda: outcome_only(RUNS.count(), lambda o: dataclasses.replace(o, scenario="other"), "another scenario"),
    ("identity", "seed", "another"):
        lambda: outcome_only(RUNS.count(), lambda o: dataclasses.replace(o, seed=o.seed + 1), "another seed"),
    ("identity", "operator stores", "one not the query's"):
        lambda: outcome_only(RUNS.count(), lambda o: state_edit(o, lambda s: s.update({"7": {}})),
                             "operator store this query does not have"),
    ("identity", "state partitions", "below zero"):
        lambda: outcome_only(RUNS.count(), lambda o: state_edit(o, lambda s: s["0"].update({"-1": {}})),
                             "partition -1 is not one of the scenario's 2 state partitions (0 to 1)"),
    ("identity", "state partitions", "beyond the count"):
        lambda: outcome_only(RUNS.count(), lambda o: state_edit(o, lambda s: s["0"].update({"2": {}})),
                             "partition 2 is not one of"),
    ("outcome_shape", "source partitions of a batch's offsets", "too few"): lambda: partitions_craft(1),
    ("outcome_shape", "source partitions of a batch's offsets", "too many"): lambda: partitions_craft(3),
    # watermarks
    ("watermarks", "watermark of a committed batch", "missing"): lambda: watermark_craft(None),
    ("watermarks", "watermark of a committed batch", "below the failure-free one"): lambda: watermark_craft(-5),
    ("watermarks", "watermark of a committed batch", "above the failure-free one"): lambda: watermark_craft(5),
    # state_equivalence
    ("state_equivalence", "a key's value", "below"):
        lambda: outcome_only(RUNS.count(), lambda o: state_edit(o, lambda s: set_value(s, -1)), "differs"),
    ("state_equivalence", "a key's value", "above"):
        lambda: outcome_only(RUNS.count(), lambda o: state_edit(o, lambda s: set_value(s, 1)), "differs"),
    ("state_equivalence", "keys of a version", "missing"):
        lambda: outcome_only(RUNS.count(), lambda o: state_edit(o, lambda s: s["0"]["1"]["5"].pop(0)), "differs"),
    ("state_equivalence", "keys of a version", "extra"):
        lambda: outcome_only(RUNS.count(), lambda o: state_edit(o, lambda s: s["0"]["1"]["5"].append(["zz", 1])),
                             "differs"),
    # output_semantics, exactly-once
    ("output_semantics", "exactly-once commit of a batch", "missing for a committed batch"):
        lambda: outcome_only(RUNS.count(), lambda o: dataclasses.replace(
            o, sink=tuple(e for e in o.sink if e.batch != 2)), "no sink commit"),
    ("output_semantics", "exactly-once commit of a batch", "for a batch not committed"):
        lambda: outcome_only(RUNS.count(), lambda o: dataclasses.replace(
            o, sink=o.sink + (dataclasses.replace(o.sink[-1], batch=7),)), "not committed"),
    ("output_semantics", "exactly-once rows", "a row missing"):
        lambda: outcome_only(RUNS.count(), lambda o: with_sink(o, 1, rows=rows(o, 1)[1:]), "sink rows differ"),
    ("output_semantics", "exactly-once rows", "a row extra"):
        lambda: outcome_only(RUNS.count(), lambda o: with_sink(o, 1, rows=rows(o, 1) + (["zz", 1],)),
                             "sink rows differ"),
    ("output_semantics", "exactly-once deliveries", "an earlier delivery with other rows"):
        lambda: outcome_only(RUNS.count(), lambda o: re_run(with_sink(
            o, 1, deliveries=2, delivery_digests=o.sink[1].delivery_digests + ("0" * 16,)), 1),
            "a delivery of this batch had other rows", crashes=1),
    # output_semantics, at-least-once
    ("output_semantics", "at-least-once rows of a committed batch", "lost"): lost_row,
    ("output_semantics", "at-least-once rows of a committed batch", "never produced"):
        lambda: outcome_only(RUNS.at_least_once(), lambda o: with_sink(o, 0, rows=rows(o, 0) + (["zz", 9],)),
                             "never produces"),
    ("output_semantics", "at-least-once rows of a committed batch", "duplicated without a re-run"):
        lambda: outcome_only(RUNS.at_least_once(), lambda o: with_sink(o, 2, rows=rows(o, 2) + rows(o, 2)[:1]),
                             "outside any re-run"),
    ("output_semantics", "at-least-once rows of a committed batch", "more copies than its attempts"): copies_craft,
    ("output_semantics", "at-least-once output of an uncommitted batch", "never re-run"):
        lambda: outcome_only(RUNS.at_least_once(), lambda o: dataclasses.replace(
            o, sink=o.sink + (dataclasses.replace(o.sink[0], batch=9),)), "neither committed nor re-run"),
    ("output_semantics", "at-least-once output of an uncommitted batch", "rows no committed batch produces"):
        lambda: outcome_only(RUNS.at_least_once(), lambda o: dataclasses.replace(
            o, sink=o.sink + (dataclasses.replace(o.sink[0], batch=9, rows=(["zz", 5],)),),
            recoveries=(Recovery(1, 9, (9,)),)), "no committed batch produces", crashes=1),
    # replay_bound
    ("replay_bound", "batches a restart re-ran", "more than can be in flight"):
        lambda: outcome_only(RUNS.count(), lambda o: re_run(o, 1, 2), "re-ran 2 batches; at most 1", crashes=1),
    ("replay_bound", "async-progress re-run range", "with a gap"):
        lambda: outcome_only(RUNS.async_progress(), lambda o: re_run(o, 1, 3), "non-contiguous", crashes=1),
    ("replay_bound", "async-progress re-run range", "longer than the bound"):
        lambda: outcome_only(RUNS.async_progress(), lambda o: re_run(o, 1, 2, 3, 4), "re-ran 4 batches",
                             crashes=1),
    # no_loss
    ("no_loss", "where a batch starts", "a gap"): lambda: start_craft((7, 6)),
    ("no_loss", "where a batch starts", "an overlap"): lambda: start_craft((5, 6)),
    ("no_loss", "where the committed batches end", "short of the input"): lambda: end_craft((14, 15)),
    ("no_loss", "where the committed batches end", "past the input"): lambda: end_craft((16, 15)),
    ("no_loss", "how the run ended", "stopped with an error"):
        lambda: outcome_only(RUNS.count(), lambda o: dataclasses.replace(o, error="boom"), "boom"),
    # retention
    ("retention", "retained versions", "one that does not load"):
        lambda: outcome_only(RUNS.count(), lambda o: dataclasses.replace(o, state_errors=("version 4: gone",)),
                             "would not load"),
    ("retention", "retained versions", "one within min_batches_to_retain missing"):
        lambda: outcome_only(RUNS.count(), lambda o: state_edit(o, lambda s: s["0"]["1"].pop("3")),
                             "within the last 3"),
    # reconstruction: a changelog only a full replay reads (retain 10 keeps every file; version 2 has a snapshot)
    ("reconstruction", "a load from any base", "differs from the failure-free state"): lambda: reconstruction_craft(),
    # lineage: commits/1 is older than the entries the checkpoint rules look at
    ("lineage", "the attempt a version is read from", "another than its commit named"):
        lambda: with_checkpoint(RUNS.count(), lambda st: _rename_uid(st, 1, "r7b1p1a3"), "another attempt"),
    # checkpoint
    ("checkpoint", "the latest commit entry", "behind the last batch"):
        lambda: with_checkpoint(RUNS.count(), lambda st: st.delete("commits/4"), "latest commit entry is not",
                                lambda o: unlisted(o, "commits/4")),
    ("checkpoint", "offset entries", "past the input"):
        lambda: with_checkpoint(RUNS.count(), lambda st: st.write("offsets/5", b'v1\n{"batch":5,"start_offsets":'
                                                                               b'[15,15],"end_offsets":[16,15]}'),
                                "ends past the input"),
    ("checkpoint", "offset entries", "after the last batch of a finished run"):
        lambda: with_checkpoint(RUNS.count(), lambda st: st.write("offsets/5", b'v1\n{"batch":5,"start_offsets":'
                                                                               b'[15,15],"end_offsets":[15,15]}'),
                                "after the outcome's last batch"),
    ("checkpoint", "sink deliveries of a batch", "fewer than the outcome's"): lambda: deliveries_craft(-1),
    ("checkpoint", "sink deliveries of a batch", "more than the outcome's"): lambda: deliveries_craft(1),
    ("checkpoint", "a batch's sink files", "delivered only in the files"): lambda: silent_batch_craft(),
    ("checkpoint", "a batch's sink files", "delivered only in the outcome"):
        lambda: with_checkpoint(RUNS.count(), lambda st: st.delete(layout.manifest_path(2)),
                                "disagree on whether batch 2 was delivered",
                                lambda o: unlisted(o, layout.manifest_path(2))),
    # rebalancing
    ("rebalancing", "state moves", "one missing"): lambda: rebalancing_craft("missing"),
    ("rebalancing", "state moves", "one extra"): lambda: rebalancing_craft("extra"),
    ("rebalancing", "state moves", "one to another executor"): lambda: rebalancing_craft("other"),
    # recoveries
    ("recoveries", "restarts", "fewer than the crashes that fired"):
        lambda: outcome_only(RUNS.crashed(), lambda o: dataclasses.replace(
            with_batch(o, 2, attempts=1), recoveries=()), "need as many restarts"),
    ("recoveries", "restarts", "more than the faults that fired"):
        lambda: outcome_only(RUNS.count(), lambda o: dataclasses.replace(o, recoveries=(Recovery(1, 5, ()),)),
                             "only 0 fault(s) that fired"),
    ("recoveries", "a batch planned again", "without a restart"):
        lambda: outcome_only(RUNS.count(), lambda o: with_batch(o, 3, attempts=2), "no restart re-ran it"),
    ("recoveries", "a batch a restart re-ran (sync)", "planned only once"):
        lambda: outcome_only(RUNS.crashed(), lambda o: with_batch(o, 2, attempts=1), "planned only once"),
    ("recoveries", "a crash between plan and commit (sync)", "its batch not re-run"): crash_not_rerun,
    ("recoveries", "a crash between plan and commit (sync)", "not delivered again"):
        lambda: outcome_only(RUNS.redelivered(), lambda o: with_sink(
            o, 2, deliveries=1, delivery_digests=o.sink[2].delivery_digests[:1]), "delivered it again"),
    ("recoveries", "a repeated delivery", "without a re-run"):
        lambda: outcome_only(RUNS.count(), lambda o: with_sink(
            o, 1, deliveries=2, delivery_digests=o.sink[1].delivery_digests * 2), "never re-run"),
    ("recoveries", "delivery digests of an exactly-once batch", "fewer than its deliveries"):
        lambda: outcome_only(RUNS.redelivered(), lambda o: with_sink(
            o, 2, delivery_digests=o.sink[2].delivery_digests[:1]), "with 1 delivery digest"),
    ("recoveries", "delivery digests of an exactly-once batch", "more than its deliveries"):
        lambda: outcome_only(RUNS.redelivered(), lambda o: with_sink(
            o, 2, delivery_digests=o.sink[2].delivery_digests * 2), "with 4 delivery digest"),
}


def unlisted(outcome: Outcome, path: str) -> Outcome:
    return dataclasses.replace(outcome, checkpoint_files=tuple(f for f in outcome.checkpoint_files if f != path))


def silent_batch_craft() -> Craft:
    """At-least-once windows: batch 0 emits no row (no window has closed), so an outcome that leaves its
    (empty) delivery out loses nothing, but the sink files hold it."""
    scenario, outcome, storage = RUNS.get("alo-windows", lambda: make("window_aggregate", batches=5,
                                                                      sink="at_least_once"))
    assert rows(outcome, 0) == ()
    wrong = dataclasses.replace(outcome, sink=tuple(e for e in outcome.sink if e.batch != 0))
    return scenario, wrong, storage, 0, "disagree on whether batch 0 was delivered"


def _rename_uid(storage: Any, batch: int, uid: str) -> None:
    lineage = CommitEntry.read(storage, batch).state_lineage
    lineage["0"]["1"] = uid
    edit_commit(storage, batch, state_lineage=lineage)


def reconstruction_craft() -> Craft:
    from reference.protocol.changelog import decode_state_file, encode_state_file
    from reference.protocol.state_store import store_files
    scenario, outcome, storage = RUNS.get("kept", lambda: make("aggregate", batches=5, retain=10))
    edited = storage.copy()
    files = store_files(edited, "0", 1)
    path = next(p for (v, _u, kind), p in files.items() if v == 2 and kind == "changelog")
    header, records = decode_state_file(edited.read(path), path)
    edited.write(path, encode_state_file(header, tuple((k, v + 100) for k, v in records)), overwrite=True)
    return scenario, outcome, edited, 0, "full changelog replay"


@pytest.mark.parametrize("key", sorted(CRAFTED), ids=lambda k: " / ".join(k))
def test_only_its_check_rejects_each_crafted_outcome(key):
    check = key[0]
    scenario, outcome, storage, crashes, says = CRAFTED[key]()
    bad = {v.check: v for v in failures(check_outcome(scenario, outcome, storage, external_crashes=crashes))}
    assert list(bad) == [check], {k: v.message for k, v in bad.items()}
    assert says in bad[check].message, bad[check].message


def test_every_way_has_a_crafted_outcome():
    listed = {(check, condition, way) for check, conditions in FAILURE_WAYS.items()
              for condition, ways in conditions.items() for way in ways}
    assert sorted(listed - set(CRAFTED)) == [], "ways with no crafted outcome"
    assert sorted(set(CRAFTED) - listed) == [], "crafts of ways the table does not list"


# --------------------------------------------------------------------------- checkpoint rules


def offsets(storage: Any, batch: int, start: tuple[int, ...], end: tuple[int, ...]) -> None:
    storage.write(layout.offset_path(batch), json.dumps({"batch": batch, "start_offsets": list(start),
                                                         "end_offsets": list(end)}).join(["v1\n", ""]).encode(),
                  overwrite=True)


def lineage_sized(storage: Any, stores: dict[str, list[str]]) -> None:
    edit_commit(storage, 3, state_lineage={sid: {p: "u" for p in parts} for sid, parts in stores.items()})


def ceiling_craft(storage: Any) -> None:
    kept = RUNS.get("kept", lambda: make("aggregate", batches=5, retain=10))[2]
    for path in ("offsets/0", "commits/0"):
        storage.write(path, kept.read(path))
    offsets(storage, 5, (15, 15), (15, 15))


RULE_CRAFTS: dict[tuple[str, str, str], tuple[Callable[[Any], None], str]] = {
    ("log_entries", "where an offset entry starts", "a gap after the entry before"):
        (lambda st: offsets(st, 3, (10, 9), (12, 12)), "starts at [10, 9], but offsets/2 ended at [9, 9]"),
    ("log_entries", "where an offset entry starts", "an overlap with it"):
        (lambda st: offsets(st, 3, (8, 9), (12, 12)), "starts at [8, 9], but offsets/2 ended at [9, 9]"),
    ("log_entries", "the first batch's start", "not at the beginning"):
        (lambda st: offsets(st, 0, (1, 0), (3, 3)), "the first batch starts at [1, 0]"),
    ("log_entries", "source partitions of an entry", "too few"):
        (lambda st: offsets(st, 3, (9,), (12,)), "offsets of 1 source partitions; the query reads 2"),
    ("log_entries", "source partitions of an entry", "too many"):
        (lambda st: offsets(st, 3, (9, 9, 0), (12, 12, 0)), "offsets of 3 source partitions; the query reads 2"),
    ("log_entries", "the stores and partitions a commit entry names", "too few"):
        (lambda st: lineage_sized(st, {"0": ["0"]}), "names lineage ids of stores and partitions {'0': 1}"),
    ("log_entries", "the stores and partitions a commit entry names", "too many"):
        (lambda st: lineage_sized(st, {"0": ["0", "1", "2"]}), "names lineage ids of stores and partitions {'0': 3}"),
    ("commit_order", "commit entries (sync)", "a gap"):
        (lambda st: (st.delete("commits/2"), st.delete("offsets/2")), "commits/2 is missing while commits/4 exists"),
    ("commit_has_offsets", "a commit entry's offset entry", "missing"):
        (lambda st: st.delete("offsets/3"), "commits/3 exists without offsets/3"),
    ("offsets_committed", "offset entries without a commit entry (sync)", "older than a commit entry"):
        (lambda st: st.delete("commits/1"), "offsets/1 has no commits/1"),
    ("offsets_committed", "offset entries without a commit entry (sync)", "more than can be in flight"):
        (lambda st: (offsets(st, 5, (15, 15), (15, 15)), offsets(st, 6, (15, 15), (15, 15)),
                     st.delete("offsets/1"), st.delete("commits/1")), "2 offset entries (offsets/5 to offsets/6)"),
    ("log_retention", "offset entries kept (sync)", "below the floor"):
        (lambda st: (st.delete("offsets/1"), st.delete("commits/1")), "offsets/1 is purged while offsets/4"),
    ("log_retention", "offset entries kept (sync)", "above the inline-purge ceiling"):
        (ceiling_craft, "6 offset entries (offsets/0 to offsets/5) are kept; inline purge keeps at most 5"),
    ("watermark_monotone", "the watermarks of the commit log", "going back"):
        (lambda st: edit_commit(st, 2, watermark_ms=50), "commits/3 holds watermark 0 after 50"),
    ("lineage_reachable", "a retained commit entry's version on the chain", "another attempt"):
        (lambda st: _rename_uid(st, 3, "r5b3p1a2"), "has lineage id 'r0b3p1a0'"),
    ("lineage_reachable", "a retained commit entry's version on the chain", "no file"):
        (lambda st: st.delete("state/0/1/3_r0b2p1a0.changelog"), "has no file on the chain"),
}


@pytest.mark.parametrize("key", sorted(RULE_CRAFTS), ids=lambda k: " / ".join(k))
def test_only_its_rule_rejects_each_crafted_checkpoint(key):
    scenario, _outcome, storage = RUNS.count()
    edit, says = RULE_CRAFTS[key]
    edited = storage.copy()
    edit(edited)
    found = violations(edited, scenario)
    assert [rule for rule, _ in found] == [key[0]], found
    assert says in found[0][1], found[0][1]


def test_every_rule_way_has_a_crafted_checkpoint():
    listed = {(rule, condition, way) for rule, conditions in RULE_WAYS.items()
              for condition, ways in conditions.items() for way in ways}
    assert sorted(listed - set(RULE_CRAFTS)) == [] and sorted(set(RULE_CRAFTS) - listed) == []


# --------------------------------------------------------------------------- what the verdicts show


def test_an_offset_entry_of_an_outcome_without_batches_is_after_its_last_batch():
    """A run that finished without committing a batch leaves no offset entry: offsets/0 is after its (none)."""
    scenario, outcome, storage = RUNS.count()
    bare = storage.__class__()
    bare.write("metadata", storage.read("metadata"))
    bare.write("offsets/0", b'v1\n{"batch":0,"start_offsets":[0,0],"end_offsets":[3,3]}')
    empty = dataclasses.replace(outcome, batches=(), sink=(), state={}, checkpoint_files=())
    v = next(v for v in check_outcome(scenario, empty, bare) if v.check == "checkpoint")
    assert v.status == "fail" and "offsets/0 logs a batch after the outcome's last batch -1" in v.message


def test_sink_rows_read_back_show_ten_rows_at_most():
    d = json.loads(json.dumps(make("map", batches=3, sink="at_least_once").to_dict()))
    d["source"].update(records_per_partition_per_batch=8, keys=100)
    scenario = Scenario.from_dict(d)
    finished = run_scenario(scenario)
    outcome = finished.outcome()
    other = with_sink(outcome, 1, rows=tuple(reversed(rows(outcome, 1)))[1:] + (["zz", 1],))
    v = next(v for v in check_outcome(scenario, other, finished.storage) if v.check == "checkpoint")
    assert "other rows than the outcome's sink" in v.message and len(v.expected) == len(v.actual) == 10


def test_crashes_from_outside_are_none_unless_the_caller_says():
    scenario, outcome, _ = RUNS.count()
    restarted = dataclasses.replace(outcome, recoveries=(Recovery(1, 5, ()),))
    assert "recoveries" in {v.check for v in failures(check_outcome(scenario, restarted))}
    from reference.judge.oracles import recoveries
    assert recoveries(Context(scenario, outcome)).status == "pass"
    assert recoveries(Context(scenario, restarted)).status == "fail"


def test_the_checkpoint_may_be_named_by_keyword():
    scenario, outcome, storage = RUNS.count()
    assert failures(check_outcome(scenario, outcome, storage=storage)) == []
