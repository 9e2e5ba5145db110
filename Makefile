# The two commands a newcomer needs: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test soak typecheck install clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/lightspeed demo

test: $(STAMP)
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
