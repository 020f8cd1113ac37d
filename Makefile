# matplotlib (the optional `plot` extra, `workbench --plot`) is never a hard dependency: setup does not
# install it and tests/test_plot.py's renderings skip without it (pip install -e '.[plot]' to run them).
# One command each (README "Quick start"):
#   make run          set up .venv (first time) and start the workbench
#   make test         set up .venv (first time) and run the test suite
#   make test-newest  the quick tests (not slow) in .venv-newest, with the newest Triton release
# On these CPU machines torch 2.13.0 comes as a CPU build from local disk; the pins live here, not in
# pyproject (which keeps open lower bounds). On a GPU box without registry access use
#   pip install --no-deps --no-build-isolation -e .

PY ?= python3
VENV ?= .venv
BIN = $(VENV)/bin
ARGS ?=
PYTEST_ARGS ?=
# pytest-xdist workers: a file runs whole on one of them (--dist loadfile, so its module fixtures run
# once); tests/conftest.py hands out the longest files first. JOBS=0 runs in this process.
JOBS ?= 2
XDIST = $(if $(filter 0,$(JOBS)),,-n $(JOBS) --dist loadfile)
# Pins for CPU machines: torch's CPU build from local disk; the GPU box's Triton, so PTX seen here
# is PTX that runs there.
PINS = torch==2.13.0 triton==3.6.0
# The newest Triton release pyproject allows, tested by CI's second job (the AOT path and the
# interpreter must work on both ends of the range); raise it when a new release is out.
NEWEST_PINS = torch==2.13.0 triton==3.9.0
VENV_NEWEST ?= .venv-newest

.PHONY: setup run test test-newest clean

$(BIN)/workbench: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q $(PINS)
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $(BIN)/workbench

setup: $(BIN)/workbench

run: setup
	@$(BIN)/workbench $(ARGS)

test: setup
	@$(BIN)/python -m pytest -q $(XDIST) $(PYTEST_ARGS)

$(VENV_NEWEST)/bin/workbench: pyproject.toml
	$(PY) -m venv $(VENV_NEWEST)
	$(VENV_NEWEST)/bin/python -m pip install -q --upgrade pip
	$(VENV_NEWEST)/bin/python -m pip install -q $(NEWEST_PINS)
	$(VENV_NEWEST)/bin/python -m pip install -q -e '.[test]'
	touch $(VENV_NEWEST)/bin/workbench

test-newest: $(VENV_NEWEST)/bin/workbench
	@$(VENV_NEWEST)/bin/python -m pytest -q -m "not slow" $(XDIST) $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) $(VENV_NEWEST)
