"""``lightspeed demo``: the README's main job, in three parts.

1. A running count whose driver crashes right after writing ``offsets/3``,
   replayed on every backend asked for, each outcome judged by every oracle
   on its own checkpoint, and the outcomes compared (``diff.py``).
2. Every single-fault schedule of the same scenario explored on the
   reference model, with its plan up front and a progress bar.
3. The quick ``offset-management`` experiment on the simulator with the
   published cluster profile, with a progress bar, its table against the
   published claims.

Outcomes, checkpoints, results.json and the figures go under ``--out``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

from experiments import exit_codes
from experiments.backends import check_master, on_spark, parse_backend_list
from experiments.diff import claim_outputs, compare_backends, comparison_lines
from experiments.experiment import RunContext
from experiments.experiment_cli import print_result
from experiments.exploration import explore_with_progress, report_lines
from experiments.input_files import load_scenario
from experiments.output_paths import make_dir, output_dir
from experiments.sweep import run_experiment
from reference.protocol.backend import RunOptions

SCENARIOS = Path(__file__).parent / "scenarios"
SCENARIO = SCENARIOS / "running-count-crash-after-wal.json"
EXPERIMENT = "offset-management"


def cmd_demo(args: argparse.Namespace) -> int:
    names = parse_backend_list(args.backends)
    check_master(args.master)
    scenario = load_scenario(str(SCENARIO))
    out = make_dir(output_dir(args.out, "the demo's outcomes, checkpoints and figures (--out)"), "the demo")
    print(f"== 1. Failure and replay on every backend: {scenario.name} (seed {scenario.seed})")
    print("   A running count over 2 partitions, 6 batches; the driver crashes right after writing offsets/3.",
          flush=True)
    # a Spark backend resumes the checkpoint of its work directory: each demo replays the crash in a new one
    options = {name: RunOptions(master=args.master, workdir=tempfile.mkdtemp(prefix=f"{name}-work-", dir=out))
               if on_spark(name)
               else RunOptions() for name in names}
    with ExitStack() as stack:   # the demo's own output directory: a run of it replaces its checkpoints
        keep = claim_outputs(stack, out, names, scenario, overwrite=True)
        comparison = compare_backends(scenario, names, options, keep,
                                      announce=lambda name: print(f"   running on {name} ...", flush=True))
    print()
    for line in comparison_lines(comparison):
        print("   " + line)
    errors = [r.name for r in comparison.ran if r.result is not None and r.result.outcome.error]
    codes = [comparison.exit_code, exit_codes.CHECK_FAILED if errors else exit_codes.OK]

    print(f"\n== 2. Explorer: every single-fault schedule of {scenario.name} on the reference model", flush=True)
    report = explore_with_progress(scenario, say=lambda line: print("   " + line, flush=True))
    for line in report_lines(report):
        print("   " + line)
    codes.append(exit_codes.CHECK_FAILED if report.violations or report.truncated else exit_codes.OK)

    print(f"\n== 3. Experiment {EXPERIMENT} (quick) on the simulator with the published cluster profile",
          flush=True)
    result = run_experiment(EXPERIMENT, RunContext(backend="sim", quick=True, executor="processes",
                                                   out_dir=out / EXPERIMENT))
    print_result(result, indent="   ")
    codes.append(result.exit_code)

    first = comparison.ran[0].name if comparison.ran else None
    print(f"\nWritten under {out}: outcome-<backend>.json, checkpoint-<backend>/, "
          f"{result.results_path.relative_to(out)} and the figures")
    if first is not None:
        print(f"Check an outcome again with: lightspeed check {out / ('outcome-' + first + '.json')} "
              f"--scenario {SCENARIO} --checkpoint {out / ('checkpoint-' + first)}")
    sys.stdout.flush()
    return exit_codes.worst(*codes)
