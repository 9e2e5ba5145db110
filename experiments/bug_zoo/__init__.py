"""The bug-zoo experiment, one folder: ``definition`` (each real Spark state-store bug of spec section 6 planted
in a copy of the RocksDB store, and the check that catches it; ``EXPERIMENT``), ``claims`` (none) and ``section``
(its table in the paper). ``experiments.registry`` lists it by one line; ``lightspeed zoo`` runs the same bugs
from the command line (``experiments.zoo``)."""
