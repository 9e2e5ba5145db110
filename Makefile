# The two commands a newcomer needs: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-quick test-spark test-slow java soak typecheck install clean native-fs

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

# native Spark's checkpoint filesystem with modelled latency (spark_impl/native/checkpoint_fs.py): compiled with
# the JDK's javac against pyspark's Hadoop jar; fails naming javac or the jar when one is missing
NATIVE_FS_JAR := build/latency-fs/lightspeed-latency-fs.jar
NATIVE_FS_SRC := $(wildcard spark_impl/native/java/lightspeed/*/*.java)

$(NATIVE_FS_JAR): $(STAMP) $(NATIVE_FS_SRC) spark_impl/native/checkpoint_fs.py
	$(BIN)/python -m spark_impl.native.checkpoint_fs build --out $@
	touch $@

native-fs: $(NATIVE_FS_JAR)

demo: $(STAMP) $(NATIVE_FS_JAR)
	$(BIN)/lightspeed demo

# The tests, tiered by cost in folders (tests/README.md): quick (pure Python, no Java, under 2 minutes),
# spark (PySpark, a JVM or typst) and slow (soak and exhaustive forms). `make test` type-checks, then runs every
# tier, each in its own process (the quick tier alone, so the tier guard sees every pyspark import there), and
# fails at the end naming each tier that failed. The spark and slow tiers need Java 17 and javac: a machine
# without them fails there, naming what is missing.
TIERS := quick spark slow
# the quick tier is pure Python and its tests share nothing: one worker per core (pytest-xdist); each worker is a
# process of its own, so the tier guard still sees every pyspark import there
QUICK_ARGS := -n auto

test: $(STAMP) java $(NATIVE_FS_JAR)
	$(BIN)/mypy
	@failed=""; for tier in $(TIERS); do \
	  args=""; [ $$tier = quick ] && args="$(QUICK_ARGS)"; \
	  echo "== tests/$$tier"; $(BIN)/python -m pytest $$args tests/$$tier || failed="$$failed $$tier"; \
	done; \
	if [ -n "$$failed" ]; then echo "make test: the tiers that failed:$$failed"; exit 1; fi

test-quick: $(STAMP)
	$(BIN)/python -m pytest $(QUICK_ARGS) tests/quick

test-spark: $(STAMP) java $(NATIVE_FS_JAR)
	$(BIN)/python -m pytest tests/spark

test-slow: $(STAMP) java $(NATIVE_FS_JAR)
	$(BIN)/python -m pytest tests/slow

# Java 17, which PySpark needs: its absence fails here, naming it (spark_impl/session.py says what is missing)
java: $(STAMP)
	@$(BIN)/python -c "import sys; from spark_impl.session import missing; m = missing(); \
	sys.exit(f'make: the spark and slow tiers need {m}; install a JDK 17 (java and javac)' if m else 0)"

# the soak runs whole (tests/soak.py): every case of the exhaustive tests (make test runs a short form of each)
soak: $(STAMP)
	LIGHTSPEED_SOAK=1 $(BIN)/python -m pytest -m soak tests

typecheck: $(STAMP)
	$(BIN)/mypy

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis .mypy_cache results

include paper/paper.mk
include tests/mutation/mutation.mk
