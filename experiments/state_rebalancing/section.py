"""The paper's state-rebalancing section (a seed feature; the post gives no number): the move's cost by state size
and the throughput once balanced, against a policy that never moves, with the verdict on its direction."""

from __future__ import annotations

from experiments.stats import keep_up_text
from experiments.writeup import Table, Writeup, esc, fmt

EXPERIMENT = "state-rebalancing"
FIGURES = (("state_rebalancing", "100%"),)
# name -> (row: the smallest or the largest state, policy, metric, format); the row's median over seeds
VALUES = {"rb_moves": (-1, "rebalance", "moves", "int"),
          "rb_small_keys": (0, "rebalance", "state_keys_at_move", "int"),
          "rb_small_load": (0, "rebalance", "moved_load_ms_max", "ms"),
          "rb_small_spike": (0, "rebalance", "spike_ms", "ms"),
          "rb_big_keys": (-1, "rebalance", "state_keys_at_move", "int"),
          "rb_big_mb": (-1, "rebalance", "state_mb_at_move", "int"),
          "rb_big_load": (-1, "rebalance", "moved_load_ms_max", "ms"),
          "rb_big_spike": (-1, "rebalance", "spike_ms", "ms"),
          "rb_big_recovery": (-1, "rebalance", "recovery_ms", "ms"),
          "rb_big_settled": (-1, "rebalance", "settled_batch_ms", "ms"),
          "rb_big_never": (-1, "never_move", "settled_batch_ms", "ms")}


def write(w: Writeup) -> None:
    w.text("rb_availability", w.availability(EXPERIMENT, ("sim",)))
    w.add_figures(EXPERIMENT, FIGURES)
    run = w.run(EXPERIMENT, "sim")
    w.verdicts("rb_verdict", run, ("rb_spread",))
    if run is None:
        for name in (*VALUES, "rb_partitions", "rb_gain_span"):
            w.v.absent(name)
        w.table("rebalancing", Table(["Run", "Value"], [[w.absent_cell(EXPERIMENT, "sim")]]), label="tab-rb")
        return
    rows = sorted(run.doc["summary"]["rows"], key=float)
    w.v.of(run, "rb_partitions", ["summary", "state_partitions"], "int")
    for name, (row, policy, metric, spec) in VALUES.items():
        w.v.of(run, name, ["summary", "rows", rows[row], policy, metric, "median"], spec)
    w.span("rb_gain_span", run, [["summary", "rows", r, "throughput_gain"] for r in rows], "pct")
    table = []
    for r in rows:
        base = ["summary", "rows", r]
        entry = run.doc["summary"]["rows"][r]
        keep = "; ".join(f"{p} {keep_up_text(entry[p].get('keep_up'))}" for p in ("rebalance", "never_move"))
        table.append([esc(f"{run.tag}, {fmt('keys', float(r))} keys"),
                      w.v.of(run, f"rb_{r}_load", base + ["rebalance", "moved_load_ms_max", "median"], "ms"),
                      w.v.of(run, f"rb_{r}_spike", base + ["rebalance", "spike_ms", "median"], "ms"),
                      w.v.of(run, f"rb_{r}_recovery", base + ["rebalance", "recovery_ms", "median"], "ms"),
                      w.v.of(run, f"rb_{r}_settled", base + ["rebalance", "settled_batch_ms", "median"], "ms"),
                      w.v.of(run, f"rb_{r}_never", base + ["never_move", "settled_batch_ms", "median"], "ms"),
                      w.v.of(run, f"rb_{r}_gain", base + ["throughput_gain"], "change"), esc(keep)])
    w.table("rebalancing", Table(["Run, key space", "Moved load", "Spike", "Recovery", "Settled batch",
                                  "Never move", "Rows/s gain", "Keep-up"], table,
                                 aligns=["left"] + ["right"] * 6 + ["left"]), label="tab-rb", runs=[run])
