# The two commands that do everything on a fresh machine (see README.md):
#   make demo   install what is needed, run LeNet-5 and VGG-16 on every backend, render the report
#   make test   install what is needed, run the test suite
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test setup clean

setup: $(STAMP)

$(STAMP): pyproject.toml scripts/setup.sh
	scripts/setup.sh test,tensorflow,torch-cpu,farm,tinygrad,opencv
	touch $@

# REPORT_DIR=reports/pocl made the committed PoCL report.
REPORT_DIR ?= reports/local
REPEATS ?= 5

demo: setup
	$(BIN)/compare devices
	$(BIN)/compare peak
	$(BIN)/compare run --net lenet --backends all --repeats $(REPEATS) --out $(REPORT_DIR)/lenet.json
	$(BIN)/compare run --net vgg16 --backends all --repeats $(REPEATS) --out $(REPORT_DIR)/vgg16.json
	$(BIN)/compare report $(REPORT_DIR)/lenet.json $(REPORT_DIR)/vgg16.json --out $(REPORT_DIR)
	@echo; echo "The report: $(REPORT_DIR)/report.md (and report.html beside it). The answer:"
	@$(BIN)/compare answer $(REPORT_DIR)/lenet.json $(REPORT_DIR)/vgg16.json

# Under `make test` every backend must be available (none may skip), except
# those in COMPARE_OPTIONAL, whose libraries this machine need not have.
test: setup
	COMPARE_REQUIRE_ALL=1 COMPARE_OPTIONAL= $(BIN)/python -m pytest -q -n 2

clean:
	rm -rf $(VENV) results reports/local .pytest_cache
