# The paper (included from the Makefile).
#   make paper          paper/lightspeed-ref.pdf from the results files in paper/results/ (no Spark needed)
#   make paper-results  re-run the experiments at the paper's settings into paper/results/ (hours), then the paper
# PAPER_RESULTS_ARGS passes options to paper/collect_results.py, e.g. "--quick --backends sim" (minutes).
PAPER_RESULTS_ARGS ?=

.PHONY: paper paper-results

paper: $(STAMP)
	$(BIN)/python paper/build.py --pdf

paper-results: $(STAMP)
	$(BIN)/python paper/collect_results.py $(PAPER_RESULTS_ARGS)
	$(BIN)/python paper/build.py --pdf
