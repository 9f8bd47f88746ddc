# The two commands that do everything on a fresh machine (see README.md):
#   make demo   install what is needed, print a first answer, run LeNet-5 and VGG-16 on every backend, render
#               the report
#   make test   install what is needed, run the test suite
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test setup clean

setup: $(STAMP)

$(STAMP): pyproject.toml scripts/setup.sh
	scripts/setup.sh test,tensorflow,torch-cpu,farm,tinygrad,opencv
	touch $@

# REPORT_DIR=reports/pocl made the committed PoCL report.  REPEATS: a fixed count of timed passes for the
# full runs; empty, each backend's count is calibrated to a minimum time (compare/noise.py).
REPORT_DIR ?= reports/local
REPEATS ?=
# the backends that decide the answer, timed first on LeNet-5 so that it comes within minutes: CLBlast at its
# best, the hand-written kernels that are fastest on GPUs and CPUs, and the fastest peer
FIRST ?= clblast-best,vectorised-tiled,fused,torch
TIMED = $(if $(REPEATS),--repeats $(REPEATS))

demo: setup
	$(BIN)/compare devices
	@echo; echo "A first answer, from the backends that decide it on LeNet-5 (the rest and the report follow):"
	$(BIN)/compare run --net lenet --backends $(FIRST) --interleave --quiet --out $(REPORT_DIR)/lenet-first.json
	$(BIN)/compare peak
	$(BIN)/compare run --net lenet --backends all $(TIMED) --out $(REPORT_DIR)/lenet.json
	$(BIN)/compare run --net vgg16 --backends all $(TIMED) --out $(REPORT_DIR)/vgg16.json
	$(BIN)/compare report $(REPORT_DIR)/lenet.json $(REPORT_DIR)/vgg16.json --out $(REPORT_DIR)
	@echo; echo "The report: $(REPORT_DIR)/report.md (and report.html beside it). The answer:"
	@$(BIN)/compare answer $(REPORT_DIR)/lenet.json $(REPORT_DIR)/vgg16.json

# Under `make test` every backend must be available (none may skip), except
# those in COMPARE_OPTIONAL, whose libraries this machine need not have.
test: setup
	COMPARE_REQUIRE_ALL=1 COMPARE_OPTIONAL= $(BIN)/python -m pytest -q -n 2

clean:
	rm -rf $(VENV) results reports/local .pytest_cache
