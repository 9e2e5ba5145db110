# Mutation testing of the judge (included from the Makefile; not part of `make test`).
#   make mutation                          every module of tests/mutation/run.py's MODULES (about two hours on two cores)
#   make mutation MODULES=oracles,logs     only those modules (of reference/; sim/latency names a sim module)
#   make mutation-report                   re-read the last sessions (.mutation/) and rewrite the result
# Writes paper/results/mutation.json; equivalent mutants are listed in tests/mutation/equivalent.json.
MODULES ?=
MUTATION_STAMP := $(VENV)/.mutation-installed

.PHONY: mutation mutation-report

$(MUTATION_STAMP): $(STAMP) tests/mutation/requirements.txt
	$(BIN)/pip install --quiet -r tests/mutation/requirements.txt
	touch $(MUTATION_STAMP)

mutation: $(MUTATION_STAMP)
	$(BIN)/python tests/mutation/run.py $(if $(MODULES),--modules $(MODULES))

mutation-report: $(MUTATION_STAMP)
	$(BIN)/python tests/mutation/run.py --report-only $(if $(MODULES),--modules $(MODULES))
