"""The crash explorer against Spark itself (``lightspeed explore SCENARIO --backend spark-native --sample N
--seed S``): crash cuts of the reference's explorer, run on Spark's own Structured Streaming.

The reference explorer enumerates every crash cut of a scenario: every
down-closed set of its writing steps (``reference.judge.explorer.writing_cuts``). A
cut of Spark cannot be chosen as a set (its tasks run in parallel), but the
crash that ends it can: this module draws ``N`` cuts, seeded, from that
enumeration, and runs each on Spark as a ``driver_crash`` right after the cut's
latest step, fired inside Spark's checkpoint code (``spark_impl.native.
fault_plan``: the JVM halts at the file operation that makes the step durable).
The latest step is the cut's maximal writing step that comes last in the
canonical order, a foreground one when there is one (Spark uploads snapshots
when its maintenance thread gets to them, so a crash after a snapshot may never
come); what the cut's other, parallel steps had written by then is what Spark
had written. Each run is judged by every oracle, and what the crash left on
disk (``jvm_deaths[0]["checkpoint"]``: the files, temporary ones by name) is
its crash checkpoint: the report counts the distinct ones, the violations
(each with the scenario that reproduces it on Spark), and the cuts whose crash
Spark never reached (a snapshot it did not take).

Shares: ``--workers K`` runs the sample in K local processes, each with its own
Spark (cut i goes to share i mod K); ``--master URL`` runs the shares as Spark
tasks on that cluster, as ``explore --master`` does, each task starting a
driver process of its own on its worker's host (the cluster's workers run this
checkout's interpreter: a localhost cluster, ``spark_impl/cluster.py``). The
same cuts run however the sample is shared; what a crash leaves may differ
between two runs of one cut (Spark's tasks race: a parallel partition's file is
written or not yet), so two explorations of one sample may count a different
number of distinct checkpoints.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import AbstractSet, Any, Callable, Mapping, Sequence

from reference.judge.explorer import (MAX_CUTS, ancestors_of, count_writing_cuts, first_graph, writing_cuts,
                                      writing_steps)
from reference.protocol.incarnation import Incarnation
from reference.judge.oracles import check_outcome, failures
from reference.language.scenario import Fault, FaultAt, Scenario, load_scenario
from reference.language.steps import NodeId

BACKEND = "spark-native"
CHILD_TIMEOUT_S = 6 * 3600.0   # a share's driver process that runs longer is taken to be stuck
# The explorer's driver JVMs compile with C1 only: a cut's JVM lives a minute, and C2's compiler threads would
# take the cores its first batches need (a crash starts a JVM per cut). It changes how fast Spark runs, not
# what it does.
EXPLORER_JVM = {"spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1"}


@dataclass(frozen=True)
class NativeCut:
    """One sampled cut: its position in the reference explorer's enumeration, the cut's last writing steps,
    and the crash that ends it on Spark."""

    order: int
    label: str
    crash: Fault

    def to_dict(self) -> dict[str, Any]:
        return {"order": self.order, "label": self.label, "crash": self.crash.to_dict()}


def crash_after(inc: Incarnation, cut: Sequence[NodeId],
                ancestors: Mapping[NodeId, AbstractSet[NodeId]]) -> NodeId:
    """The step a crash right after ``cut`` follows: the cut's maximal writing step latest in the canonical
    order, a foreground one when the cut has one."""
    writing = writing_steps(inc.sc)
    members = [n for n in cut if n.step in writing]
    assert members, "a cut holds a writing step"
    maximal = [n for n in members if not any(n in ancestors[m] for m in members if m != n)]
    foreground = [n for n in maximal if not inc.nodes[n].background]
    return max(foreground or maximal)


def sample_cuts(scenario: Scenario, sample: int, seed: int) -> tuple[int, bool, list[NativeCut]]:
    """How many crash cuts the reference explorer enumerates for ``scenario`` (its own faults dropped), whether
    that enumeration was cut short at ``MAX_CUTS`` (the sample is then drawn from its first ``MAX_CUTS``), and
    ``sample`` of them drawn without replacement by ``seed`` (all of them when there are fewer), in order."""
    base = replace(scenario, faults=())
    inc = first_graph(base, _model())
    ancestors = ancestors_of(inc)
    total, capped = count_writing_cuts(inc)
    cuts = []
    for count, cut in enumerate(writing_cuts(inc)):
        if count >= total:
            break
        cuts.append(cut)
    chosen = sorted(random.Random(seed).sample(range(len(cuts)), min(sample, len(cuts))))
    out = []
    for index in chosen:
        node = crash_after(inc, cuts[index], ancestors)
        label = ", ".join(str(n) for n in cuts[index] if n.step in writing_steps(base))
        at = FaultAt(node.step, node.batch, node.partition if node.partition >= 0 else None, "after")
        out.append(NativeCut(index + 1, label, Fault(at, "driver_crash")))
    return len(cuts), capped, out


def _model() -> Any:
    from reference.judge.explorer import Model
    return Model()


def run_cut(scenario: Scenario, cut: NativeCut, workdir: str, master: str | None = None) -> dict[str, Any]:
    """Run one cut on Spark (the scenario with the cut's crash as its one fault), judged by every oracle."""
    from spark_impl.native import run_native
    crashed = replace(scenario, faults=(cut.crash,))
    started = time.perf_counter()
    shutil.rmtree(workdir, ignore_errors=True)
    outcome = run_native(crashed, workdir=workdir, master=master).outcome
    native = outcome.details["native"]
    deaths = native.get("jvm_deaths") or []
    bad = failures(check_outcome(crashed, outcome))
    return {**cut.to_dict(), "seconds": round(time.perf_counter() - started, 3),
            "reached": bool(deaths), "checkpoint": deaths[0]["checkpoint"] if deaths else None,
            "fired": native.get("faults_fired"), "error": outcome.error,
            "verdicts": [v.to_dict() for v in bad], "described": [v.describe() for v in bad],
            "reproduce": json.loads(crashed.to_json())}


@dataclass
class NativeReport:
    """What a native exploration found; ``merged`` of its shares' results, whatever the sharing."""

    scenario: str
    seed: int
    cuts: int = 0                                  # the reference explorer's crash cuts of the scenario
    capped: bool = False                           # its enumeration stopped at MAX_CUTS: there are more
    results: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def reached(self) -> list[dict[str, Any]]:
        return [r for r in self.results if r["reached"]]

    @property
    def violations(self) -> list[dict[str, Any]]:
        return [r for r in self.results if r["verdicts"]]

    def distinct_checkpoints(self) -> int:
        return len({json.dumps(r["checkpoint"]) for r in self.reached})

    def fingerprint(self) -> str:
        shapes = sorted({json.dumps(r["checkpoint"]) for r in self.reached})
        return hashlib.sha256("\n".join(shapes).encode()).hexdigest()

    def summary(self) -> str:
        runs = len(self.results)
        per_hour = runs / self.seconds * 3600.0 if self.seconds else 0.0
        return (f"{self.scenario} on spark-native: {runs} crash cuts sampled (seed {self.seed}) of the reference "
                f"explorer's {_cuts_text(self.cuts, self.capped)}; {len(self.reached)} crashed Spark where planned, "
                f"{runs - len(self.reached)} never reached; {self.distinct_checkpoints()} distinct crash "
                f"checkpoints; {len(self.violations)} violation(s); {self.seconds:.0f} s ({per_hour:.0f} cuts/hour)")

    def lines(self) -> list[str]:
        out = [self.summary()]
        for r in self.results:
            if not r["reached"]:
                out.append(f"  not reached: cut {r['order']} ({_crash_text(r)}): Spark never came to its operation")
        for r in self.violations:
            out.append(f"VIOLATION at cut {r['order']} ({_crash_text(r)}):")
            out += ["  " + line for text in r["described"] for line in text.splitlines()]
            out.append("  reproduce with: lightspeed run SCENARIO --backend spark-native, the scenario being "
                       + json.dumps(r["reproduce"])[:400])
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"summary": self.summary(), "scenario": self.scenario, "seed": self.seed, "cuts": self.cuts,
                "cuts_truncated": self.capped,
                "sampled": len(self.results), "reached": len(self.reached),
                "distinct_checkpoints": self.distinct_checkpoints(), "checkpoint_fingerprint": self.fingerprint(),
                "violations": len(self.violations), "seconds": round(self.seconds, 3), "results": self.results}


def _cuts_text(cuts: int, capped: bool) -> str:
    """``2,372``, or, when the enumeration stopped at its cap, that the sample came from its first ``cuts``."""
    return f"first {cuts:,} crash cuts (the enumeration stops at {MAX_CUTS:,}; the scenario has more)" if capped \
        else f"{cuts:,}"


def _crash_text(r: dict[str, Any]) -> str:
    at = r["crash"]["at"]
    part = f" p{at['partition']}" if at.get("partition") is not None else ""
    return f"driver_crash after {at['step']} b{at['batch']}{part}"


def merged(scenario: str, seed: int, cuts: int, shares: Sequence[Sequence[dict[str, Any]]],
           capped: bool = False) -> NativeReport:
    report = NativeReport(scenario, seed, cuts, capped)
    report.results = sorted((r for share in shares for r in share), key=lambda r: r["order"])
    return report


def explore_share(scenario: Scenario, sample: int, seed: int, share: int, shares: int, workdir: str,
                  master: str | None = None, say: Callable[[str], None] = lambda _line: None
                  ) -> list[dict[str, Any]]:
    """The sampled cuts whose position in the sample is ``share`` mod ``shares``, each run on Spark."""
    if not 0 <= share < shares:
        raise ValueError(f"share {share} is not one of 0..{shares - 1}")
    _total, _capped, cuts = sample_cuts(scenario, sample, seed)
    out = []
    mine = [c for i, c in enumerate(cuts) if i % shares == share]
    if master is None:
        from spark_impl.session import session
        session(None, EXPLORER_JVM)   # this process's first Spark: a crash's new JVM gets the same options
    for done, cut in enumerate(mine, 1):
        result = run_cut(scenario, cut, os.path.join(workdir, f"cut-{cut.order}"), master)
        shutil.rmtree(os.path.join(workdir, f"cut-{cut.order}"), ignore_errors=True)
        out.append(result)
        say(f"  [{done}/{len(mine)}] cut {cut.order} ({_crash_text(result)}): "
            + ("VIOLATION" if result["verdicts"] else "held" if result["reached"] else "not reached")
            + f", {result['seconds']:.0f} s")
    return out


def explore_native(scenario: Scenario, sample: int, seed: int, *, workers: int = 1, master: str | None = None,
                   say: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True)
                   ) -> NativeReport:
    """Draw ``sample`` crash cuts of ``scenario`` by ``seed``, run each on Spark, judge each; say the plan first.
    ``workers`` local driver processes share the cuts, or, with ``master``, as many Spark tasks on that cluster
    (default two per task slot)."""
    if sample < 1:
        raise ValueError(f"--sample {sample}: expected at least 1 crash cut")
    total, capped, cuts = sample_cuts(scenario, sample, seed)
    say(f"exploring {scenario.name!r} on spark-native: {len(cuts)} of the reference explorer's "
        f"{_cuts_text(total, capped)}{'' if capped else ' crash cuts'}, drawn by seed {seed}; each is a driver crash halting Spark's JVM inside its checkpoint code")
    started = time.perf_counter()
    workdir = tempfile.mkdtemp(prefix="lightspeed-explore-native-")
    try:
        if master is not None:
            shares = _on_cluster(scenario, sample, seed, master, workers, workdir, say)
        elif workers > 1:
            shares = _in_processes(scenario, sample, seed, workers, workdir, say)
        else:
            shares = [explore_share(scenario, sample, seed, 0, 1, workdir, say=say)]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    report = merged(scenario.name, seed, total, shares, capped)
    report.seconds = time.perf_counter() - started
    return report


def _child_command(scenario_path: str, sample: int, seed: int, share: int, shares: int, out: str) -> list[str]:
    return [sys.executable, "-m", "experiments.explore_native", scenario_path, "--sample", str(sample),
            "--seed", str(seed), "--share", str(share), "--shares", str(shares), "--out", out]


def _run_child(command: list[str]) -> list[dict[str, Any]]:
    """A share's driver process; its results, or a RuntimeError with the end of what it said."""
    done = subprocess.run(command, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S)
    out = command[command.index("--out") + 1]
    if done.returncode != 0 or not os.path.exists(out):
        tail = "\n".join(done.stderr.strip().splitlines()[-10:])
        raise RuntimeError(f"a share of the native exploration failed (exit {done.returncode}):\n{tail}")
    with open(out) as fh:
        return list(json.load(fh))


def _in_processes(scenario: Scenario, sample: int, seed: int, workers: int, workdir: str,
                  say: Callable[[str], None]) -> list[list[dict[str, Any]]]:
    path = os.path.join(workdir, "scenario.json")
    Path(path).write_text(scenario.to_json())
    say(f"{workers} shares, each a driver process with its own Spark")
    commands = [_child_command(path, sample, seed, i, workers, os.path.join(workdir, f"share-{i}.json"))
                for i in range(workers)]
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        return list(pool.map(_run_child, commands))


def _on_cluster(scenario: Scenario, sample: int, seed: int, master: str, shares: int | None, workdir: str,
                say: Callable[[str], None]) -> list[list[dict[str, Any]]]:
    """The shares as Spark tasks on ``master``: each task starts a share's driver process on its host."""
    from reference.protocol.backend import BackendUnavailable
    from spark_impl.session import SparkUnavailable, session, task_slots
    try:
        spark = session(master)
    except SparkUnavailable as exc:
        raise BackendUnavailable(BACKEND, f"cannot explore on Spark ({master}): {exc}") from None
    sc = spark.sparkContext
    count = shares if shares and shares > 1 else 2 * max(1, task_slots(spark))
    path = os.path.join(workdir, "scenario.json")
    Path(path).write_text(scenario.to_json())
    say(f"{count} shares as Spark tasks on {master}, each a driver process with its own local Spark")
    commands = [_child_command(path, sample, seed, i, count, os.path.join(workdir, f"share-{i}.json"))
                for i in range(count)]

    def one(i: int) -> list[dict[str, Any]]:
        sc.setJobDescription(f"explore {scenario.name} on spark-native: share {i + 1} of {count}")
        return list(sc.parallelize([commands[i]], 1).map(_run_child).collect()[0])

    with concurrent.futures.ThreadPoolExecutor(count) as pool:
        return list(pool.map(one, range(count)))


def cmd_explore_native(args: argparse.Namespace) -> int:
    """``lightspeed explore SCENARIO --backend spark-native --sample N --seed S [--workers K] [--master URL]
    [--out REPORT.json]``: exit 1 when a cut broke an oracle."""
    from experiments import exit_codes
    from experiments.experiment import ExperimentError
    from experiments.input_files import load_scenario as load_checked
    from experiments.output_paths import output_file, write_text
    scenario = load_checked(args.scenario)
    if args.sample is None or args.sample < 1:
        raise ExperimentError("explore --backend spark-native needs --sample N (at least 1): each crash cut is a "
                              "run of Spark's own query")
    if args.depth != 1:
        raise ExperimentError("explore --backend spark-native explores single crashes (--depth 1)")
    if args.workers is not None and args.workers < 1:
        raise ExperimentError(f"--workers {args.workers}: expected at least 1")
    out = output_file(args.out, "the exploration report (--out)", inputs=[args.scenario]) \
        if args.out is not None else None
    report = explore_native(scenario, args.sample, args.seed, workers=args.workers or 1, master=args.master)
    print("\n".join(report.lines()))
    if out is not None:
        write_text(out, json.dumps(report.to_dict(), indent=1), "the report")
        print(f"report written to {out}", file=sys.stderr)
    return exit_codes.CHECK_FAILED if report.violations else exit_codes.OK


def main(argv: Sequence[str] | None = None) -> int:
    """A share's driver process (``_child_command``): run its cuts and write their results as JSON."""
    parser = argparse.ArgumentParser(prog="python -m experiments.explore_native",
                                     description="One share of a native exploration (started by explore).")
    parser.add_argument("scenario")
    parser.add_argument("--sample", type=int, required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--share", type=int, required=True)
    parser.add_argument("--shares", type=int, required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    scenario = load_scenario(args.scenario)
    workdir = tempfile.mkdtemp(prefix=f"lightspeed-explore-share{args.share}-")
    try:
        results = explore_share(scenario, args.sample, args.seed, args.share, args.shares, workdir,
                                say=lambda line: print(line, file=sys.stderr, flush=True))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        from spark_impl.session import stop
        stop()
    Path(args.out).write_text(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
