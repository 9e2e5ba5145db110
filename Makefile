# The two commands a newcomer needs: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test soak typecheck install clean native-fs

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

test: $(STAMP) $(NATIVE_FS_JAR)
	$(BIN)/mypy
	$(BIN)/python -m pytest

# the soak runs whole (tests/soak.py): every case of the exhaustive tests (make test runs a short form of each)
soak: $(STAMP)
	LIGHTSPEED_SOAK=1 $(BIN)/python -m pytest -m soak

typecheck: $(STAMP)
	$(BIN)/mypy

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis .mypy_cache results

include paper/paper.mk
include tests/mutation/mutation.mk
