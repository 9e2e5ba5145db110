"""The explorer experiment, one folder: ``definition`` (every crash cut and single fault of the example scenarios,
through the reference model; ``EXPERIMENT``), ``claims`` (none: it checks the oracles, not a published number)
and ``section`` (its table and scope in the paper). ``experiments.registry`` lists it by one line."""
