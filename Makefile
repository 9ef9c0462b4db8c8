# Two commands set up a fresh machine: `make demo` (train on the shipped data) and `make test`.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The CPU wheel of torch; installed first so nothing pulls a multi-GB CUDA build.
TORCH_PIN := torch==2.13.0

.PHONY: venv demo test test-all bench clean help

help:
	@echo "make demo      train the default experiment on zh_reviews (prints the run dir last)"
	@echo "make test      run the test suite (excludes -m slow)"
	@echo "make test-all  run every test, slow ones included"

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet $(TORCH_PIN)
	$(BIN)/pip install --quiet -e '.[loggers,launchers,dev]'
	@touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(BIN)/headlab-train experiment=demo

test: $(STAMP)
	$(BIN)/python -m pytest -q

test-all: $(STAMP)
	$(BIN)/python -m pytest -q -m "slow or not slow"

clean:
	rm -rf $(VENV) logs .pytest_cache
