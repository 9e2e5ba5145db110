# Mutation testing of reference/ and sim/ (included from the Makefile; not part of `make test`), incremental.
#   make mutation                          every module whose code or tests changed since its entry in
#                                          paper/results/mutation.json (all 79 from scratch: hours on two cores)
#   make mutation BUDGET=90                at most 90 minutes of it; the next call continues where it stopped
#   make mutation MODULES=oracles,logs     only those modules (of reference/; sim/latency names a sim module)
#   make mutation-plan                     what is up to date and what would run, running nothing
#   make mutation-report                   re-read the last sessions (.mutation/) and rewrite the result
# Writes paper/results/mutation.json; equivalent mutants are listed in tests/mutation/equivalent.json.
MODULES ?=
BUDGET ?=
MUTATION_STAMP := $(VENV)/.mutation-installed
MUTATION_ARGS = $(if $(MODULES),--modules $(MODULES)) $(if $(BUDGET),--budget $(BUDGET))

.PHONY: mutation mutation-report mutation-plan

$(MUTATION_STAMP): $(STAMP) tests/mutation/requirements.txt
	$(BIN)/pip install --quiet -r tests/mutation/requirements.txt
	touch $(MUTATION_STAMP)

mutation: $(MUTATION_STAMP)
	$(BIN)/python tests/mutation/run.py $(MUTATION_ARGS)

mutation-plan: $(MUTATION_STAMP)
	$(BIN)/python tests/mutation/run.py --plan $(MUTATION_ARGS)

mutation-report: $(MUTATION_STAMP)
	$(BIN)/python tests/mutation/run.py --report-only $(if $(MODULES),--modules $(MODULES))
