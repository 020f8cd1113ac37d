# matplotlib (the optional `plot` extra, `workbench --plot`) is never a hard dependency of the package;
# setup installs it through the test extra, so `make test` renders figures (tests/test_plot.py skips without it).
# One command each (README "Quick start"):
#   make run          set up .venv (first time) and start the workbench
#   make test         set up .venv (first time) and run the test suite
# CI's extra jobs (.ci/run), each in a venv of its own:
#   make test-newest  the quick tests (not slow) with the newest Triton release (CPU-only pair)
#   make test-triton36 the quick tests with Triton 3.6, the GPU box's (CPU-only pair)
#   make check-pins   the pins below against torch's Linux x86_64 wheel on PyPI (metadata only)
#   make wheel-check  build the wheel and sdist, install the wheel into a fresh venv, run it outside the checkout
#   make lint         ruff (pyproject's [tool.ruff]); the layer contracts are tests/test_import_contracts.py
#   make typecheck    mypy on workbench/, screens/, kernels/ (pyproject's [tool.mypy])
# The pins live here, not in pyproject (which keeps floors only, so an installed torch is kept).
# A box with its own torch: python3 -m pip install -e .   (no registry: README "Install")

PY ?= python3
VENV ?= .venv
BIN = $(VENV)/bin
ARGS ?=
PYTEST_ARGS ?=
# pytest-xdist workers: a file runs whole on one of them (--dist loadfile, so its module fixtures run
# once); tests/conftest.py hands out the longest files first. JOBS=0 runs in this process.
JOBS ?= 2
XDIST = $(if $(filter 0,$(JOBS)),,-n $(JOBS) --dist loadfile)
# The pair make setup installs (make run, make test): torch 2.13.0 and the Triton its Linux x86_64
# wheel requires (Requires-Dist: triton==3.7.1), so the pair resolves on a GPU box with the public
# registry. On these CPU machines torch 2.13.0 comes as a CPU build from local disk, which requires
# no triton; triton 3.7.1 comes from PyPI. .ci/check_pins.py fails CI if this pair stops resolving.
PINS = torch==2.13.0 triton==3.7.1
# CPU-only pairs (the CPU_ONLY_ prefix tells .ci/check_pins.py so): torch's CPU build requires no
# triton, so any Triton installs beside it; on a GPU box torch 2.13.0 would refuse both. They keep
# both ends of the Triton range pyproject allows under test:
# - Triton 3.6.0, the GPU box's own (torch 2.11.0 + triton 3.6.0 there; torch 2.11 has no CPU build
#   on this box's disk), so code and PTX that work here work there;
# - Triton 3.9.0, the newest release (on a GPU box it pairs with torch 2.15.0 only, which this box's
#   pip constraint torch<=2.14.1 keeps out); raise it when a new release is out (check-pins says so).
CPU_ONLY_TRITON36_PINS = torch==2.13.0 triton==3.6.0
CPU_ONLY_NEWEST_PINS = torch==2.13.0 triton==3.9.0
VENV_NEWEST ?= .venv-newest
VENV_TRITON36 ?= .venv-triton36

# pip stays quiet (-q); what is left on these machines is a warning per package about the local
# index's missing folders ("Location ... is ignored", from this box's pip config) and setuptools'
# deprecation notices: filtered, errors still show and still fail the step (pipefail).
SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -c
QUIET = 2>&1 | { grep -v -e "is ignored: it is neither a file nor a directory" || true; }
PIP = PYTHONWARNINGS=ignore PIP_DISABLE_PIP_VERSION_CHECK=1

.PHONY: setup run test test-newest test-triton36 check-pins wheel-check lint typecheck clean

# $(call make_venv,VENV,PINS): a venv with PINS, then this package editable with its test extra
define make_venv
	@echo "setting up $(1): $(2), then this package (-e '.[test]')"
	@$(PY) -m venv $(1)
	@$(PIP) $(1)/bin/python -m pip install -q --upgrade pip $(QUIET)
	@$(PIP) $(1)/bin/python -m pip install -q $(2) $(QUIET)
	@$(PIP) $(1)/bin/python -m pip install -q -e '.[test]' $(QUIET)
	@touch $(1)/bin/workbench
endef

$(BIN)/workbench: pyproject.toml
	$(call make_venv,$(VENV),$(PINS))

setup: $(BIN)/workbench

run: setup
	@$(BIN)/workbench $(ARGS)

test: setup
	@$(BIN)/python -m pytest -q $(XDIST) $(PYTEST_ARGS)

$(VENV_NEWEST)/bin/workbench: pyproject.toml
	$(call make_venv,$(VENV_NEWEST),$(CPU_ONLY_NEWEST_PINS))

test-newest: $(VENV_NEWEST)/bin/workbench
	@$(VENV_NEWEST)/bin/python -m pytest -q -m "not slow" $(XDIST) $(PYTEST_ARGS)

$(VENV_TRITON36)/bin/workbench: pyproject.toml
	$(call make_venv,$(VENV_TRITON36),$(CPU_ONLY_TRITON36_PINS))

test-triton36: $(VENV_TRITON36)/bin/workbench
	@$(VENV_TRITON36)/bin/python -m pytest -q -m "not slow" $(XDIST) $(PYTEST_ARGS)

check-pins: setup
	@$(BIN)/python .ci/check_pins.py --table

wheel-check: setup
	@PY=$(PY) PINS="$(PINS)" bash .ci/wheel_check.sh

lint: setup
	@$(BIN)/python -m ruff --version > /dev/null 2>&1 || { $(PIP) $(BIN)/python -m pip install -q -e '.[lint]' $(QUIET); }
	@$(BIN)/python -m ruff check .

typecheck: setup
	@$(BIN)/python -m mypy --version > /dev/null 2>&1 || { $(PIP) $(BIN)/python -m pip install -q -e '.[lint]' $(QUIET); }
	@$(BIN)/python -m mypy

clean:
	rm -rf $(VENV) $(VENV_NEWEST) $(VENV_TRITON36) dist build
