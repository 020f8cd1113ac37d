# One command each (README "Quick start"):
#   make run    set up .venv (first time) and start the workbench
#   make test   set up .venv (first time) and run the test suite
# On these CPU machines torch 2.13.0 comes as a CPU build from local disk; the pins live here, not in
# pyproject (which keeps open lower bounds). On a GPU box without registry access use
#   pip install --no-deps --no-build-isolation -e .

PY ?= python3
VENV ?= .venv
BIN = $(VENV)/bin
ARGS ?=
PYTEST_ARGS ?=
# Pins for CPU machines: torch's CPU build from local disk; the GPU box's Triton, so PTX seen here
# is PTX that runs there.
PINS = torch==2.13.0 triton==3.6.0

.PHONY: setup run test clean

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
	@$(BIN)/python -m pytest -q $(PYTEST_ARGS)

clean:
	rm -rf $(VENV)
