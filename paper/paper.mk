# The paper (included from the Makefile).
#   make paper                      the ledger's status of every unit the paper uses (fresh, stale, dirty, noisy,
#                                   failed, missing), then paper/lightspeed-ref.pdf from paper/results/ (no Spark)
#   make paper-results BUDGET=90    measure, for at most 90 minutes, the units that are not fresh (native Spark's
#                                   first; a later call resumes), then the status and the paper; without BUDGET it
#                                   runs until every unit is fresh (hours)
#   make paper-status               the status alone; writes paper/results/README.md, fails unless all is fresh
# PAPER_RESULTS_ARGS passes options to paper/collect_results.py, e.g. "--quick --backends sim" (minutes).
PAPER_RESULTS_ARGS ?=
BUDGET ?=

.PHONY: paper paper-results paper-status

paper: $(STAMP)
	-$(BIN)/python paper/collect_results.py --status --no-readme $(PAPER_RESULTS_ARGS)
	$(BIN)/python paper/build.py --pdf

paper-results: $(STAMP)
	$(BIN)/python paper/collect_results.py $(if $(BUDGET),--budget $(BUDGET)) $(PAPER_RESULTS_ARGS)
	-$(BIN)/python paper/collect_results.py --status $(PAPER_RESULTS_ARGS)
	$(BIN)/python paper/build.py --pdf

paper-status: $(STAMP)
	$(BIN)/python paper/collect_results.py --status $(PAPER_RESULTS_ARGS)
