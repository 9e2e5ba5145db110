"""state-rebalancing: what a state move costs when executors join, by state size, and what balance gains.

Project Lightspeed rebalances stateful tasks when executors join or leave,
"even if it involves loading the state in a new executor from a distributed
file system" (lightspeed-update.txt; the rule is ``reference/protocol/placement.py``,
the scenario events ``reference/protocol/rebalancing.py``). On the simulator (volume
mode, the published cluster profile, 4 task slots per executor) a running
count over 16 state partitions runs on executors e0 and e1 at a constant
rate with a 1 s processing-time trigger; before batch ``MOVE`` executors e2
and e3 join, and the placement moves 8 partitions (4 to each), whose tasks
load their state from the checkpoint. For each key space (the state held at
the move grows with it) it measures:

- the load of a moved partition (``state_load`` on the new executor);
- the latency spike: the largest batch duration from the move on, against
  the median of the ten batches before it;
- the recovery time: from the move's planning until the first batch that
  runs at the balanced pace again (within 25% of the settled median: batch
  durations vary by about 15% from stragglers and storage jitter);
- throughput once balanced: rows per second of batch time, settled, against
  the same run without the joins (``never_move``: a policy that never moves
  state gives the joined executors no state partition, so it runs as if they
  had not joined).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments.outcome_metrics import check_outcome_ok, latency_metrics, step_durations
from experiments.scenario_builders import rate_scenario
from experiments.claims import describe
from experiments.verdicts import judge, report_lines
from experiments.conditions import Condition
from experiments.experiment import BackendRun, Check, Experiment, Point, RunContext
from experiments.figures import LABEL_PT, PALETTE, WIDE, backend_label, figure_context, grouped_bars, save_figure
from experiments.measure import simulate_point
from experiments.profiles import sim_profile
from experiments.stats import fmt_ms, group, keep_up, keep_up_text, over_seeds
from reference.protocol.outcome import Outcome
from reference.protocol.rebalancing import PlacementTimeline
from reference.language.scenario import Scenario

RATE = 150_000                  # rows/s: e0 and e1 keep up with it, with room (a batch takes ~0.9 s of 1 s)
TRIGGER_MS = 1000
STATE_PARTITIONS = 16
BEFORE = ["e0", "e1"]
JOINING = ("e2", "e3")
SETTLE_BATCHES = 10             # the settled window starts this many batches after the move
BAND = 1.25                     # a batch is back at the balanced pace within 25% of the settled median (jitter)


@dataclass(frozen=True)
class Setup:
    """The key spaces swept (the state held at the move grows with the key space and the rows seen), the
    run's length and the batch the executors join before."""

    keys: tuple[int, ...]
    duration_s: int
    move: int


QUICK = Setup((100_000, 1_000_000, 10_000_000, 30_000_000), 120, 80)
FULL = Setup((100_000, 1_000_000, 10_000_000, 30_000_000, 100_000_000), 240, 200)


def scenario(keys: int, seed: int, duration_s: int, move: int, rebalance: bool) -> dict[str, Any]:
    raw = rate_scenario(f"rebalance-{'join' if rebalance else 'never'}-{keys}", seed, rate=RATE,
                        duration_s=duration_s, operator={"kind": "aggregate", "agg": "count"}, keys=keys,
                        partitions=8, state_partitions=STATE_PARTITIONS,
                        engine={"trigger_interval_ms": TRIGGER_MS})
    raw["executors"] = list(BEFORE)
    raw["events"] = [{"kind": "executor_join", "executor": e, "before_batch": move} for e in JOINING] \
        if rebalance else []
    return raw


class StateRebalancing(Experiment):
    name = "state-rebalancing"
    version = "2"      # 2: each point records whether it kept up
    title = "state rebalancing on executor joins: load, latency spike and recovery by state size; balanced throughput"
    claim = describe("state-rebalancing")
    unsupported = {"spark": "the engine's rebalancing is checked on a two-worker cluster by the tests, not timed here",
                   "spark-native": "open-source Spark has no state rebalancing"}
    runs = {"sim": BackendRun(0.5, 2.0)}

    def conditions(self, ctx: RunContext) -> list[Condition]:
        """The post describes the algorithm, not a benchmark: nothing published to meet."""
        return [Condition("workload", "not described", f"a running count, {STATE_PARTITIONS} state partitions, "
                          f"{RATE:,} rows/s, two executors joining two", honoured=True,
                          note="nothing published to meet")]

    def points(self, ctx: RunContext) -> list[Point]:
        setup = QUICK if ctx.quick else FULL
        profile = sim_profile("lightspeed_cluster")
        out = []
        for keys in setup.keys:
            for config in ("rebalance", "never_move"):
                for seed in self.seed_list(ctx):
                    raw = scenario(keys, seed, setup.duration_s, setup.move, config == "rebalance")
                    out.append(Point(self.name, "rebalance", config, {"keys": keys}, seed, "sim", raw, profile,
                                     "volume", {"move": setup.move}))
        return out

    def measure(self, point: Point) -> dict[str, Any]:
        sim = simulate_point(point, trace=True)
        outcome = sim.outcome()
        check_outcome_ok(outcome)
        move = int(point.extra["move"])
        expected = PlacementTimeline(Scenario.from_dict(point.scenario)).moves()
        loads = step_durations(sim.trace, ("state_load",))["state_load"]
        moved = {m.partition for m in outcome.moves}
        moved_loads = [ms for b, p, _s, ms in loads if b == move and p in moved]
        bytes_per_key = float((point.profile or {}).get("bytes_per_state_key", 0))
        keys_at_move = _state_keys_before(outcome, move)
        kept = {k: v for k, v in latency_metrics(outcome).items()
                if k in ("kept_up", "input_rows_per_s", "processed_rows_per_s", "latency_growth_ms_per_s")}
        return {**kept, "moves": len(outcome.moves), "moves_follow_rule": outcome.moves == expected,
                "state_keys_at_move": keys_at_move,
                "state_mb_at_move": keys_at_move * bytes_per_key / 1e6 if keys_at_move is not None else None,
                "moved_load_ms_max": max(moved_loads) if moved_loads else None,
                **_pace(outcome, move)}

    def summarize(self, records: list[dict[str, Any]], ctx: RunContext) -> dict[str, Any]:
        metrics = ("moves", "state_keys_at_move", "state_mb_at_move", "moved_load_ms_max", "pre_batch_ms",
                   "peak_batch_ms", "spike_ms", "recovery_ms", "settled_batch_ms", "rows_per_s_before",
                   "rows_per_s_settled")
        rows: dict[str, Any] = {}
        for (config, keys), recs in group(records, "config", "params.keys").items():
            row = rows.setdefault(str(keys), {"keys": keys})
            row[config] = {m: over_seeds(recs, m) for m in metrics}
            row[config]["keep_up"] = keep_up(recs)
            row[config]["moves_follow_rule"] = all(r["metrics"].get("moves_follow_rule") for r in recs)
            row[config]["series"] = recs[0]["metrics"].get("series", [])
        for row in rows.values():
            on, off = _m(row, "rebalance", "rows_per_s_settled"), _m(row, "never_move", "rows_per_s_settled")
            row["throughput_gain"] = on / off - 1.0 if on is not None and off else None
            a, b = _m(row, "rebalance", "settled_batch_ms"), _m(row, "never_move", "settled_batch_ms")
            row["batch_ms_reduction"] = 1.0 - a / b if a is not None and b else None
        verdicts = [judge("rb_spread", None if row["throughput_gain"] is None else row["throughput_gain"] * 100,
                          scope=f"{int(row['keys']):,} keys", basis=self.basis(ctx)).to_dict()
                    for row in sorted(rows.values(), key=lambda r: r["keys"])]
        return {"rows": rows, "rate": RATE, "trigger_ms": TRIGGER_MS, "state_partitions": STATE_PARTITIONS,
                "move": (QUICK if ctx.quick else FULL).move, "verdicts": verdicts}

    def checks(self, summary: dict[str, Any], ctx: RunContext) -> list[Check]:
        rows = list(summary["rows"].values())
        out = []
        moves = [_m(r, "rebalance", "moves") for r in rows]
        rule = all(r["rebalance"]["moves_follow_rule"] and r["never_move"]["moves_follow_rule"] for r in rows)
        out.append(Check("each join moves 4 of the 16 partitions to each new executor, as the placement rule says",
                         rule and all(m == 8 for m in moves), f"moves per run {moves}; rule followed: {rule}"))
        never = [_m(r, "never_move", "moves") for r in rows]
        out.append(Check("the never-move runs move nothing", all(m == 0 for m in never), f"moves {never}"))
        ordered = sorted(rows, key=lambda r: r["keys"])
        loads = [_m(r, "rebalance", "moved_load_ms_max") for r in ordered]
        out.append(Check("a moved partition's load grows with the state it holds", _increasing(loads),
                         " -> ".join(fmt_ms(v) for v in loads)))
        spikes = [_m(r, "rebalance", "spike_ms") for r in (ordered[0], ordered[-1])]
        out.append(Check("the latency spike of the largest state exceeds that of the smallest", _increasing(spikes),
                         " vs ".join(fmt_ms(v) for v in spikes)))
        gains = [r["throughput_gain"] for r in ordered]
        out.append(Check("once balanced, throughput beats the never-move policy at every state size",
                         None if None in gains else all(g > 0 for g in gains),
                         ", ".join(f"{g * 100:+.0f}%" if g is not None else "-" for g in gains)))
        return out

    def report(self, summary: dict[str, Any], ctx: RunContext) -> list[str]:
        lines = [f"{'keys':>11} {'state keys':>11} {'state MB':>9} {'load':>8} {'before':>8} {'peak':>8} "
                 f"{'spike':>8} {'recovery':>9} {'settled':>8} {'never':>8} {'rows/s gain':>11}  keep-up"]
        for row in sorted(summary["rows"].values(), key=lambda r: r["keys"]):
            gain = row["throughput_gain"]
            lines.append(
                f"{row['keys']:>11,} {_int(_m(row, 'rebalance', 'state_keys_at_move')):>11} "
                f"{_num(_m(row, 'rebalance', 'state_mb_at_move')):>9} "
                f"{fmt_ms(_m(row, 'rebalance', 'moved_load_ms_max')):>8} {fmt_ms(_m(row, 'rebalance', 'pre_batch_ms')):>8} "
                f"{fmt_ms(_m(row, 'rebalance', 'peak_batch_ms')):>8} {fmt_ms(_m(row, 'rebalance', 'spike_ms')):>8} "
                f"{fmt_ms(_m(row, 'rebalance', 'recovery_ms')):>9} {fmt_ms(_m(row, 'rebalance', 'settled_batch_ms')):>8} "
                f"{fmt_ms(_m(row, 'never_move', 'settled_batch_ms')):>8} "
                f"{(f'{gain * 100:+.0f}%' if gain is not None else '-'):>11}  "
                f"join {keep_up_text(row['rebalance'].get('keep_up'))}; "
                f"never {keep_up_text(row['never_move'].get('keep_up'))}")
        lines.append("batch durations in ms; before/peak/settled: the rebalanced run; never: the same run without "
                     "the joins; gain: rows per second of batch time, settled, against never")
        return lines + report_lines(summary.get("verdicts", []))

    def figures(self, summary: dict[str, Any], ctx: RunContext, out_dir: Path) -> list[Path]:
        import matplotlib.pyplot as plt
        ordered = sorted(summary["rows"].values(), key=lambda r: r["keys"])
        labels = [_keys_label(_m(r, "rebalance", "state_keys_at_move")) for r in ordered]
        with figure_context():
            # the batch durations across the page, the two bar charts under them
            fig = plt.figure(figsize=(WIDE, 6.4), layout="constrained")
            grid = fig.add_gridspec(2, 2)
            axes = [fig.add_subplot(grid[0, :]), fig.add_subplot(grid[1, 0]), fig.add_subplot(grid[1, 1])]
            ax = axes[0]
            for i, row in enumerate(ordered):
                series = row["rebalance"]["series"]
                ax.plot([t for t, _ms in series], [ms for _t, ms in series], color=PALETTE[i % len(PALETTE)],
                        label=f"join, {labels[i]} keys", linewidth=1.2)
            never = ordered[-1]["never_move"]["series"]
            ax.plot([t for t, _ms in never], [ms for _t, ms in never], color="#999999", linestyle="--",
                    label=f"never move, {labels[-1]} keys", linewidth=1.2)
            ax.axvline(0, color="#000000", linewidth=0.6)
            ax.set_xlabel("s since the joins (batch planned)")
            ax.set_ylabel("batch duration, ms")
            ax.set_title("Batch duration around the move")
            # under the axis, where it hides no line
            ax.legend(fontsize=LABEL_PT, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=3)
            grouped_bars(axes[1], labels, {
                "moved partition's load": [_m(r, "rebalance", "moved_load_ms_max") for r in ordered],
                "latency spike": [_m(r, "rebalance", "spike_ms") for r in ordered],
                "recovery time": [_m(r, "rebalance", "recovery_ms") for r in ordered]}, unit="ms")
            axes[1].set_title("Cost of the move, by state keys at the move")
            grouped_bars(axes[2], labels, {
                "before the joins": [_k(_m(r, "rebalance", "rows_per_s_before")) for r in ordered],
                "balanced over 4 executors": [_k(_m(r, "rebalance", "rows_per_s_settled")) for r in ordered],
                "never move": [_k(_m(r, "never_move", "rows_per_s_settled")) for r in ordered]},
                unit="k rows per s of batch time")
            axes[2].set_title("Throughput once balanced")
            for a in axes[1:]:
                a.set_xlabel("state keys at the move")
            fig.suptitle(f"State rebalancing ({backend_label(ctx.backend)}, {ctx.mode}): e2, e3 join e0, e1 before "
                         f"batch {summary['move']};\n"
                         f"{summary['state_partitions']} state partitions, {summary['rate']:,} rows/s")
            return save_figure(fig, out_dir, "state_rebalancing")


def _state_keys_before(outcome: Outcome, move: int) -> float | None:
    """The keys the state held when the move came: after the batch before it committed."""
    event = next((p for p in outcome.progress if p.batch_id == move - 1), None)
    if event is None or not event.state_operators:
        return None
    return float(sum(op.num_rows_total for op in event.state_operators))


def _pace(outcome: Outcome, move: int) -> dict[str, Any]:
    """Batch durations before, at and after the move; the recovery time; rows per second of batch time."""
    events = sorted((p for p in outcome.progress if p.timestamp_ms is not None), key=lambda p: p.batch_id)
    duration = {p.batch_id: float(p.duration_ms.get("triggerExecution", 0.0)) for p in events}
    start = {p.batch_id: float(p.timestamp_ms or 0.0) for p in events}
    rows = {p.batch_id: p.num_input_rows for p in events}
    last = max(duration, default=-1)   # the last batch takes the input's tail: left out of the settled window
    before = [b for b in duration if move - SETTLE_BATCHES <= b < move]
    settled = [b for b in duration if move + SETTLE_BATCHES <= b < last]
    if not before or not settled or move not in duration:
        raise RuntimeError(f"the run has too few batches around batch {move} to measure the move")
    pre = statistics.median(duration[b] for b in before)
    settled_ms = statistics.median(duration[b] for b in settled)
    back = next((b for b in sorted(duration) if b >= move and duration[b] <= BAND * settled_ms), None)
    peak = max(duration[b] for b in duration if move <= b < move + SETTLE_BATCHES)
    return {"pre_batch_ms": pre, "peak_batch_ms": peak, "spike_ms": max(0.0, peak - pre),
            "recovery_ms": start[back] - start[move] if back is not None else None,
            "settled_batch_ms": settled_ms,
            "rows_per_s_before": statistics.median(rows[b] / duration[b] * 1000.0 for b in before if duration[b]),
            "rows_per_s_settled": statistics.median(rows[b] / duration[b] * 1000.0 for b in settled if duration[b]),
            "series": [[round((start[b] - start[move]) / 1000.0, 3), duration[b]] for b in sorted(duration)
                       if move - SETTLE_BATCHES <= b < move + 2 * SETTLE_BATCHES]}


def _increasing(values: list[float | None]) -> bool | None:
    """Whether the values rise strictly; None when one is missing."""
    present = [v for v in values if v is not None]
    if len(present) < len(values):
        return None
    return all(a < b for a, b in zip(present, present[1:]))


def _m(row: dict[str, Any], config: str, metric: str) -> float | None:
    return ((row.get(config) or {}).get(metric) or {}).get("median")


def _k(value: float | None) -> float | None:
    return value / 1000.0 if value is not None else None


def _int(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def _keys_label(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value / 1e6:.1f}M" if value >= 999_500 else f"{value / 1e3:.0f}k"


EXPERIMENT = StateRebalancing()
