"""The Spark backends: the protocol on PySpark (``engine``), Spark's own Structured Streaming (``native``).

- ``engine/``: the reference's step graph executed on a Spark cluster, state in
  ``state_store/`` (RocksDB) on the executors (``--backend spark``);
- ``native/``: the scenario's query on Spark's own operators and state store
  (``--backend spark-native``);
- ``state_store/``: the RocksDB state store with changelog checkpointing;
- ``session.py``: the one SparkSession per process; ``cluster.py``: a
  standalone cluster on localhost; ``snapshot_reader.py``: the reader of the
  store's snapshots for the reference's oracles; ``latency.py``: end-to-end
  latency from sink deliveries.

May import: ``reference``, pyspark, rocksdict, numpy, pandas and pyarrow.
Never ``sim`` or ``experiments``.
"""
