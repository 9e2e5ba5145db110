"""A seeded random-fault soak of a Spark backend, VOPR-style (``lightspeed soak SCENARIO --backend B --seeds A..Z
[--budget MIN]``).

Each seed draws, with its own ``random.Random(seed)``, one to ``MAX_FAULTS``
faults of the kinds the backend runs (``SOAK_KINDS``), each at a random step,
batch, side (before / after) and, for a task step, partition, and runs the
scenario with them in place of its own; the outcome is judged by every oracle.
The same seed draws the same faults. A seed whose outcome breaks an oracle is
shrunk (``shrink``): each fault is dropped while the violation stays, then the
input is cut to fewer batches while it stays, within ``MAX_SHRINK_RUNS`` more
runs; the smallest scenario that still breaks the oracle is written out,
ready for ``lightspeed run ... --backend B``. A seed the backend refuses (a
kind or step it cannot run with this scenario) is reported as refused.

The kinds drawn are those that name a step (a fault at a time, and damage to a
file, whose path is each backend's own layout, are left out): on
``spark-native`` the kinds Spark's own code is faulted with (a crash halting
the driver's JVM, a storage error or a latency spike at a checkpoint file
operation, a failed task; ``spark_impl.native.fault_plan``), with a task
failure in any partition (a partition of Spark's may get no rows in a batch);
on ``spark``, the engine, every step kind.

The report gives the seeds run, refused and violating, and the seeds per
hour; ``--budget`` stops starting seeds once that many minutes have passed.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import re
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Sequence

from experiments.output_paths import output_dir, output_file, write_text
from reference.protocol.backend import RunOptions, ScenarioRefused
from reference.judge.oracles import Verdict, check_outcome, failures
from reference.language.scenario import Fault, FaultAt, Scenario
from reference.protocol.sources import SourceData
from reference.language.steps import STEP_NAMES, TASK_STEPS

MAX_FAULTS = 3                # faults a seed draws at most
MAX_SHRINK_RUNS = 8           # runs a violation's shrinking may take
LATENCY_MS = (50, 1000)       # a storage_latency or clock_skew draws its ms in this range
SOAK_KINDS: dict[str, tuple[str, ...]] = {
    "spark-native": ("driver_crash", "task_failure", "storage_write_error", "storage_latency"),
    "spark": ("driver_crash", "task_failure", "executor_loss", "storage_write_error", "storage_latency",
              "zombie_write", "clock_skew"),
}
_SEEDS = re.compile(r"^(\d+)(?:\.\.(\d+))?$")


class SoakError(ValueError):
    """Bad soak input: a seed range, a budget or a backend the soak does not run; the message names it."""


def parse_seeds(text: str) -> range:
    """``A..Z`` (inclusive) or one seed ``A``."""
    match = _SEEDS.match(text.strip())
    if not match:
        raise SoakError(f"--seeds {text!r}: expected A..Z (two whole numbers, inclusive) or one seed")
    first = int(match.group(1))
    last = int(match.group(2)) if match.group(2) is not None else first
    if last < first:
        raise SoakError(f"--seeds {text!r}: the range ends before it starts")
    return range(first, last + 1)


def draw_faults(scenario: Scenario, backend: str, seed: int) -> tuple[Fault, ...]:
    """The faults seed ``seed`` draws for ``scenario`` on ``backend`` (the same seed, the same faults)."""
    kinds = SOAK_KINDS[backend]
    rng = random.Random(seed)
    batches = SourceData.of(scenario).planned_batches()
    out = []
    for _ in range(rng.randint(1, MAX_FAULTS)):
        kind = rng.choice(kinds)
        task = kind in ("task_failure", "executor_loss", "zombie_write")
        step = rng.choice(TASK_STEPS if task else STEP_NAMES)
        partition = None
        if step in TASK_STEPS and not (backend == "spark-native" and kind == "task_failure"):
            partition = rng.randrange(scenario.state_partitions)
        at = FaultAt(step, rng.randrange(batches), partition, rng.choice(("before", "after")))
        ms = rng.randint(*LATENCY_MS) if kind in ("storage_latency", "clock_skew") else None
        out.append(Fault(at, kind, ms))
    return tuple(out)


@dataclass
class SeedResult:
    seed: int
    faults: list[dict[str, Any]]
    seconds: float
    refused: str | None = None
    error: str | None = None
    failed: list[str] = field(default_factory=list)          # the oracles that failed
    shrunk: dict[str, Any] | None = None                     # the smallest scenario that still fails
    shrunk_path: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v not in (None, [])}


def _failed(scenario: Scenario, backend: str, options: RunOptions,
            run: Callable[[str, Scenario, RunOptions], Any]) -> list[Verdict]:
    result = run(backend, scenario, options)
    return failures(check_outcome(scenario, result.outcome, result.checkpoint))


def shrink(scenario: Scenario, backend: str, options: RunOptions, failed: Sequence[str],
           run: Callable[[str, Scenario, RunOptions], Any], max_runs: int = MAX_SHRINK_RUNS) -> Scenario:
    """A smaller scenario on which one of the ``failed`` oracles still fails: faults dropped one at a time,
    then the input cut to fewer batches (never below the last batch a fault names), in at most ``max_runs``
    runs."""
    runs = 0

    def still(candidate: Scenario) -> bool:
        nonlocal runs
        runs += 1
        try:
            return any(v.check in failed for v in _failed(candidate, backend, options, run))
        except ScenarioRefused:
            return False

    current = scenario
    for fault in list(current.faults):
        if runs >= max_runs or len(current.faults) == 1:
            break
        candidate = replace(current, faults=tuple(f for f in current.faults if f is not fault))
        if still(candidate):
            current = candidate
    floor = max((f.at.batch or 0) for f in current.faults) + 1 if current.faults else 1
    batches = SourceData.of(current).planned_batches()
    while runs < max_runs and batches - 1 >= max(floor, 2):
        fewer = _with_batches(current, batches - 1)
        if fewer is None or not still(fewer):
            break
        current, batches = fewer, batches - 1
    return current


def _with_batches(scenario: Scenario, batches: int) -> Scenario | None:
    """``scenario`` with each generated source cut to ``batches`` batches; None when a source is not generated."""
    raw = json.loads(scenario.to_json())
    sides = [raw["source"]] if "source" in raw else list(raw.get("sources", {}).values())
    if any(src.get("kind") != "generated" for src in sides):
        return None
    for src in sides:
        src["batches"] = batches
    return Scenario.from_dict(raw)


@dataclass
class SoakReport:
    scenario: str
    backend: str
    results: list[SeedResult] = field(default_factory=list)
    seconds: float = 0.0
    budget_stop: bool = False

    @property
    def violations(self) -> list[SeedResult]:
        return [r for r in self.results if r.failed or r.error]

    def seeds_per_hour(self) -> float:
        return len(self.results) / self.seconds * 3600.0 if self.seconds else 0.0

    def lines(self) -> list[str]:
        refused = [r for r in self.results if r.refused]
        out = [f"{self.scenario} on {self.backend}: {len(self.results)} seeds in {self.seconds:.0f} s "
               f"({self.seeds_per_hour():.1f} seeds/hour); {len(self.violations)} violating, {len(refused)} refused"
               + ("; stopped at the budget" if self.budget_stop else "")]
        for r in self.results:
            out += seed_lines(r)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"scenario": self.scenario, "backend": self.backend, "seeds": len(self.results),
                "violations": len(self.violations), "seconds": round(self.seconds, 3),
                "seeds_per_hour": round(self.seeds_per_hour(), 2), "budget_stop": self.budget_stop,
                "results": [r.to_dict() for r in self.results]}


def seed_lines(r: SeedResult) -> list[str]:
    """One seed's faults and verdict, and where its shrunk violation went."""
    what = ("REFUSED: " + r.refused if r.refused else
            f"VIOLATION: {', '.join(r.failed) or r.error}" if r.failed or r.error else "held")
    faults = "; ".join(_fault_text(f) for f in r.faults)
    out = [f"  seed {r.seed} ({faults}): {what} ({r.seconds:.0f} s)"]
    if r.shrunk_path:
        out.append(f"    shrunk to {r.shrunk_path}")
    return out


def _fault_text(raw: dict[str, Any]) -> str:
    at = raw["at"]
    part = f" p{at['partition']}" if at.get("partition") is not None else ""
    return f"{raw['kind']} {at.get('when', 'before')} {at['step']} b{at['batch']}{part}"


def soak(scenario: Scenario, backend: str, seeds: Sequence[int], *, budget_min: float | None = None,
         out: Path | None = None, options: RunOptions = RunOptions(),
         run: Callable[[str, Scenario, RunOptions], Any] | None = None,
         say: Callable[[str], None] = lambda _line: None) -> SoakReport:
    """Run every seed of ``seeds`` on ``backend`` (until ``budget_min`` minutes have passed), judge each, shrink
    each violation and write it to ``out``."""
    if backend not in SOAK_KINDS:
        raise SoakError(f"--backend {backend}: the soak runs {' or '.join(SOAK_KINDS)}")
    if budget_min is not None and budget_min <= 0:
        raise SoakError(f"--budget {budget_min}: expected a positive number of minutes")
    if run is None:
        from experiments.backends import run_backend
        run = run_backend
    report = SoakReport(scenario.name, backend)
    started = time.perf_counter()
    for seed in seeds:
        if budget_min is not None and time.perf_counter() - started >= budget_min * 60.0:
            report.budget_stop = True
            break
        faults = draw_faults(scenario, backend, seed)
        faulted = replace(scenario, faults=faults)
        begun = time.perf_counter()
        result = SeedResult(seed, [f.to_dict() for f in faults], 0.0)
        try:
            outcome = run(backend, faulted, options)
            bad = failures(check_outcome(faulted, outcome.outcome, outcome.checkpoint))
            result.failed = [v.check for v in bad]
            result.error = outcome.outcome.error if bad else None
        except ScenarioRefused as exc:
            result.refused = str(exc)
        result.seconds = round(time.perf_counter() - begun, 3)
        if result.failed:
            smallest = shrink(faulted, backend, options, result.failed, run)
            result.shrunk = json.loads(smallest.to_json())
            if out is not None:
                path = output_file(out / f"soak-{backend}-seed{seed}.json", f"seed {seed}'s shrunk scenario")
                write_text(path, smallest.to_json(), f"seed {seed}'s shrunk scenario")
                result.shrunk_path = str(path)
        report.results.append(result)
        for line in seed_lines(result):
            say(line)
    report.seconds = time.perf_counter() - started
    return report


def cmd_soak(args: argparse.Namespace) -> int:
    """``lightspeed soak SCENARIO --backend B --seeds A..Z [--budget MIN] [--out DIR]``: exit 1 when a seed broke
    an oracle."""
    from experiments import exit_codes
    from experiments.input_files import load_scenario
    scenario = load_scenario(args.scenario)
    seeds = parse_seeds(args.seeds)
    out = output_dir(args.out, "the shrunk violations and the report (--out)")
    earlier = sorted(p.name for p in out.glob("soak-*.json")) if out.is_dir() else []
    if earlier and not args.overwrite:
        raise SoakError(f"{out}: holds an earlier soak's files ({', '.join(earlier[:3])}"
                        + (f" and {len(earlier) - 3} more" if len(earlier) > 3 else "")
                        + "); give another --out, or --overwrite to replace them")
    options = RunOptions(master=args.master) if args.master else RunOptions()
    print(f"soaking {scenario.name!r} on {args.backend}: seeds {seeds.start}..{seeds.stop - 1}"
          + (f", for at most {args.budget} min" if args.budget else ""), file=sys.stderr, flush=True)
    report = soak(scenario, args.backend, seeds, budget_min=args.budget, out=out, options=options,
                  say=lambda line: print(line, file=sys.stderr, flush=True))
    print("\n".join(report.lines()))
    write_text(out / "soak-report.json", json.dumps(report.to_dict(), indent=1), "the soak report")
    print(f"report written to {out / 'soak-report.json'}", file=sys.stderr)
    return exit_codes.CHECK_FAILED if report.violations else exit_codes.OK
