"""The experiments and the ``lightspeed`` command line: what drives every backend and draws the figures.

What it holds:

- ``backends.py``: the one registry of backends (reference, sim, spark, spark-native), the only place that
  imports a backend; ``get_backend``, ``run_backend``, ``snapshot_readers_for``.
- ``cli.py``: the entry point (``lightspeed``); the only place that turns typed errors into messages and exit
  codes (``exit_codes.py``). Nothing imports it. Its subcommands' work lives in ``diff.py`` (several backends,
  judged and compared), ``judging.py`` (outcome files and verdicts), ``checkpoint_dir.py`` (checkpoint
  directories: claiming, writing, opening), ``input_files.py`` (reading a file the user named),
  ``exploration.py`` (the explorer with a plan and a progress bar), ``demo.py`` and ``experiment_cli.py``.
- The named experiments: one folder each (``offset_management/``, ...: ``definition.py``, ``claims.py``,
  ``section.py``), ``experiment.py`` (Point, Check, RunContext, Experiment), ``registry.py`` (one line per
  experiment: its name and its folder), ``publications.py`` (the sources and the ``Claim`` type),
  ``claims.py`` (every experiment's claims in one table), ``scenario_builders.py`` and ``outcome_metrics.py``
  (the scenarios the experiments build and the numbers they read from outcomes), ``sweep.py`` (one run end to end), ``execution.py`` (points inline, in
  processes or as Spark tasks), ``measure.py`` (a point's run on its backend), ``profiles.py`` (simulator cost
  profiles), ``stats.py``, ``figures.py``, ``results.py`` (results.json and reproducing it), ``provenance.py``,
  ``progress.py`` (tqdm bars).
- The evidence (issue 39): ``ledger.py`` (every point x seed a unit, kept as it ends with its provenance;
  fresh, stale, dirty, noisy, failed or missing), ``staleness.py`` (the code a unit measured, as a key, in the
  working tree or at a commit), ``machine_load.py`` (the CPU other processes used while a unit ran) and
  ``stopping.py`` (a timed point runs until its p50 is precise or its budget ends).
- ``scenarios/``: example scenarios.

What it may import: every package of the project (``reference``, ``sim``, ``spark_impl``) and third-party
libraries (numpy, matplotlib, tqdm). A backend is reached only through ``backends.py``; what is not a
backend run is imported where it is used: the simulator's cost profiles (``profiles.py``) and its trace
(``measure.simulate_point``), and a SparkSession as a pool that runs points (``execution.py``). Nothing
outside ``experiments`` imports it.
"""
