"""Running one scenario on several backends, judging each outcome and comparing them (``lightspeed diff``).

Every backend that runs is judged with every oracle on its own checkpoint;
the outcomes are compared with ``reference.judge.compare.first_difference``. A
backend that refuses the scenario (``ScenarioRefused``: native Spark has no
pipelining, for example) or cannot run here (``BackendUnavailable``) is
reported with the reason, and the backends that did run are still compared.
"""

from __future__ import annotations

import time
from contextlib import ExitStack
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Sequence

from experiments import exit_codes
from experiments.backends import get_backend, run_backend
from experiments.checkpoint_dir import Claim, claimed
from experiments.judging import tally, verdict_lines
from experiments.output_paths import output_file, write_text
from reference.protocol.backend import BackendUnavailable, OptionRefused, RunOptions, RunResult, ScenarioRefused
from reference.judge.compare import first_difference
from reference.judge.oracles import Verdict, check_outcome, failures
from reference.language.scenario import Scenario


@dataclass
class BackendRun:
    """One backend's part of a comparison: its result and verdicts, or why it did not run."""

    name: str
    result: RunResult | None = None
    verdicts: list[Verdict] = field(default_factory=list)
    wall_s: float = 0.0
    refused: str | None = None          # the backend refused the scenario or an option (and why)
    unavailable: str | None = None      # the backend cannot run here (and what is missing)

    @property
    def failed(self) -> list[Verdict]:
        return failures(self.verdicts)


@dataclass
class Comparison:
    scenario: Scenario
    runs: list[BackendRun]
    differences: list[tuple[str, str, str | None]]   # (first backend, other backend, first difference or None)

    @property
    def ran(self) -> list[BackendRun]:
        return [r for r in self.runs if r.result is not None]

    @property
    def exit_code(self) -> int:
        """1 when an oracle failed or two backends differ; else 3 when a backend was unavailable, 2 when one
        refused the scenario; else 0."""
        failed = any(r.failed for r in self.runs) or any(d is not None for _a, _b, d in self.differences)
        return exit_codes.worst(exit_codes.CHECK_FAILED if failed else exit_codes.OK,
                                *(exit_codes.UNAVAILABLE for r in self.runs if r.unavailable),
                                *(exit_codes.BAD_INPUT for r in self.runs if r.refused))


def options_per_backend(names: Sequence[str], given: RunOptions) -> dict[str, RunOptions]:
    """Each backend's share of the options given: those it takes. ``OptionRefused`` for an option that none of
    the named backends takes (as far as the ones that can be imported here tell)."""
    takes: dict[str, frozenset[str]] = {}
    unknown = False
    for name in names:
        try:
            takes[name] = get_backend(name).options
        except BackendUnavailable:
            unknown = True
    wanted = given.given()
    if not unknown:
        for option in wanted:
            if not any(option in options for options in takes.values()):
                raise OptionRefused(", ".join(names), option, frozenset().union(*takes.values()))
    out = {}
    for name in names:
        own = {f.name: getattr(given, f.name) for f in fields(given) if f.name in wanted
               and f.name in takes.get(name, frozenset())}
        out[name] = RunOptions(**own)
    return out


@dataclass
class Keep:
    """Where a comparison keeps what each backend gave: ``out/outcome-<backend>.json``, and its checkpoint, where
    the backend keeps one, in ``out/checkpoint-<backend>/``, a directory claimed before anything ran
    (``checkpoint_dir.claimed``: written only when the run's checkpoint replaces it)."""

    out: Path
    claims: dict[str, Claim]

    def __call__(self, result: RunResult, name: str) -> None:
        write_text(self.out / f"outcome-{name}.json", result.outcome.to_json(), f"the outcome of {name}")
        self.claims[name].write(result.checkpoint)


def claim_outputs(stack: ExitStack, out: Path, names: Sequence[str], scenario: Scenario, *,
                  overwrite: bool = False) -> Keep:
    """Check, before any backend runs, that ``out`` can take each backend's outcome file and checkpoint
    directory (``checkpoint-<backend>/`` claimed as ``run --checkpoint`` claims one, held until ``stack``
    closes); a ``Keep`` that keeps each run there."""
    claims = {}
    for name in names:
        claims[name] = stack.enter_context(claimed(out / f"checkpoint-{name}", scenario, overwrite=overwrite))
        output_file(out / f"outcome-{name}.json", f"the outcome of {name}", replace=overwrite)
    return Keep(out, claims)


def compare_backends(scenario: Scenario, names: Sequence[str], options: dict[str, RunOptions],
                     keep: Keep | None = None, announce: Callable[[str], Any] = lambda _name: None) -> Comparison:
    """Run ``scenario`` on each backend in turn, judge each, and compare every one that ran with the first.

    With ``keep`` each outcome and checkpoint is kept as it says.
    """
    runs = []
    for name in names:
        announce(name)
        run = BackendRun(name)
        started = time.perf_counter()
        try:
            run.result = run_backend(name, scenario, options.get(name, RunOptions()))
        except BackendUnavailable as exc:
            run.unavailable = str(exc)
        except (ScenarioRefused, OptionRefused) as exc:
            run.refused = str(exc)
        run.wall_s = time.perf_counter() - started
        if run.result is not None:
            run.verdicts = check_outcome(scenario, run.result.outcome, run.result.checkpoint)
            if keep is not None:
                keep(run.result, name)
        runs.append(run)
    ran = [r for r in runs if r.result is not None]
    differences = []
    for other in ran[1:]:
        assert ran[0].result is not None and other.result is not None
        differences.append((ran[0].name, other.name, first_difference(ran[0].result.outcome, other.result.outcome,
                                                                       scenario.sink_mode)))
    return Comparison(scenario, runs, differences)


def comparison_lines(comparison: Comparison) -> list[str]:
    """A table (oracles, re-run batches, p50 latency, wall time per backend), each failed verdict, each refusal,
    and whether the backends that ran agree."""
    lines = [f"{'backend':<14}{'oracles':<36}{'re-run batches':<17}{'p50 latency':<13}wall time"]
    notes: list[str] = []
    for run in comparison.runs:
        if run.result is None:
            why = f"REFUSED: {run.refused}" if run.refused else f"NOT AVAILABLE: {run.unavailable}"
            lines.append(f"{run.name:<14}{why}")
            continue
        outcome = run.result.outcome
        rerun = str([list(r.rerun_batches) for r in outcome.recoveries])
        p50 = outcome.latency().p50
        latency = "-" if p50 is None else f"{p50:.0f} ms"
        lines.append(f"{run.name:<14}{tally(run.verdicts):<36}{rerun:<17}{latency:<13}{run.wall_s:.2f} s")
        if outcome.error:
            notes.append(f"{run.name} stopped with an error: {outcome.error}")
        if run.failed:
            notes.append(f"{run.name}:")
            notes += verdict_lines(run.failed)
    lines += notes
    for first, other, difference in comparison.differences:
        lines.append(f"{first} and {other} " + ("agree on batches, state and sink" if difference is None
                                                 else f"DIFFER at {difference}"))
    if len(comparison.ran) < 2:
        ran = comparison.ran[0].name if comparison.ran else "no backend"
        lines.append(f"only {ran} ran: nothing to compare")
    return lines
