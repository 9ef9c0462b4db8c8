# Two commands set up a fresh machine: `make demo` (train on the shipped data) and `make test`.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The CPU wheel of torch; installed first so nothing pulls a multi-GB CUDA build.
TORCH_PIN := torch==2.13.0

.PHONY: venv demo test test-all bench clean help sweep sweep-smoke browser-deps

help:
	@echo "make demo      train the default experiment on zh_reviews (prints the run dir last)"
	@echo "make test      run the test suite (excludes -m slow)"
	@echo "make test-all  run every test, slow ones included"
	@echo "make bench     speed and measurement-overhead benchmark (BENCH_ARGS='--quick' for 1 min)"
	@echo "make sweep-smoke   8 tiny jobs through joblib, then headlab-aggregate (prints the sweep dir last)"
	@echo "make sweep SWEEP=heads [LAUNCHER=joblib] [ARGS='seed=0,1,2,3,4 experiment=sweep_zh']"
	@echo "make reproduce-quick   every claim of the article at CPU scale, exploratory (~32 min on 2 cores, resumable) -> reports/<date>/"
	@echo "make reproduce SCALE=suites [SUITE=NAME|DIR] [DRY_RUN=1]   C1 C2 C4 C14 C17 on public checkpoint suites (docs/pretrained.md)"
	@echo "make reproduce-cpu     the confirmatory CPU run: 13 claims on fresh seeds, about 100 min on 2 cores (resumable)"
	@echo "make reproduce [DRY_RUN=1] [LAUNCHER=slurm] [OVERRIDE='trainer.accelerator=gpu ...']   the article's scale"
	@echo "make reproduce-jobs [SCALE=quick|cpu|full]   print the commands a reproduce target runs (runs nothing)"
	@echo "make reproduce-report [SCALE=quick|cpu|full]   verdicts of every claim from the sweeps on disk -> reports/<date>/"

$(STAMP): pyproject.toml setup.py
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet $(TORCH_PIN)
	$(BIN)/pip install --quiet -e '.[loggers,launchers,dev,hf,tl,llc]'
	@touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(BIN)/headlab-train experiment=demo

# Two pytest-xdist workers, each test file on one of them (module fixtures are built once).
test: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 --dist loadfile

# What the report's browser test needs (tests/reproduce/test_report.py; skipped without it):
# Debian's chromium (needs root and apt) and playwright to drive it. CI runs this before `make test`.
browser-deps: $(STAMP)
	@command -v chromium >/dev/null || command -v chromium-browser >/dev/null || \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-wqy-microhei >/dev/null; }
	$(BIN)/pip install --quiet -e '.[browser]'

test-all: $(STAMP)
	$(BIN)/python -m pytest -q -m "slow or not slow"

# Speed vs nn.TransformerEncoder and HF BERT, measurement overhead, probe memory (see BENCHMARKS.md).
# BENCH_ARGS='--quick' for a 1-minute check; '--device cuda --amp bf16' on a GPU.
BENCH_ARGS ?=
bench: $(STAMP)
	$(BIN)/pip install --quiet -e '.[bench]'
	$(BIN)/python -m benchmarks $(BENCH_ARGS)

# A versioned sweep from conf/sweep/, then its aggregation. The stamp makes the sweep
# dir known here: $HEADLAB_LOG_DIR (default logs)/sweeps/<sweep_name>/<stamp>; printed last.
SWEEP ?= smoke
LAUNCHER ?= joblib
ARGS ?=

# Failed jobs do not skip the aggregation (it reports them); the exit status is the worst of both.
sweep: $(STAMP)
	@stamp=$$(date +%Y-%m-%d_%H-%M-%S_%6N); rc=0; \
	$(BIN)/headlab-train -m sweep=$(SWEEP) hydra/launcher=$(LAUNCHER) \
		'hydra.sweep.dir=$${paths.log_dir}/sweeps/$${sweep_name}/'$$stamp $(ARGS) || rc=$$?; \
	dir=$$(ls -d "$${HEADLAB_LOG_DIR:-logs}"/sweeps/*/$$stamp 2>/dev/null); \
	if [ -z "$$dir" ]; then echo "no sweep dir was created" >&2; exit $$(( rc ? rc : 1 )); fi; \
	$(BIN)/headlab-aggregate "$$dir" || rc=$$(( rc ? rc : $$? )); \
	echo "$$dir"; exit $$rc

sweep-smoke:
	@$(MAKE) --no-print-directory sweep SWEEP=smoke LAUNCHER=joblib

# The founding article's claims (conf/reproduce/, docs/reproduce.md): run what each claim needs into
# fixed folders (<log dir>/sweeps/<sweep_name>/reproduce; a second call redoes only what is missing),
# then write reports/<date>/. The full scale goes through SLURM unless LAUNCHER says otherwise
# (LAUNCHER=basic OVERRIDE=trainer.accelerator=gpu on one GPU: OVERRIDE's words are appended to every
# sweep, headlab-reproduce's override=[...]); DRY_RUN=1 prints its commands; ARGS: more key=value.
# reproduce-cpu is the confirmatory run (seeds no earlier run used; `jobs=true scale=cpu` prints its plan
# and the wall time estimated from the quick run's step times); LANES=N for more cores.
# SCALE=suites: the claims with evidence.suites on public checkpoint suites (headlab-analyze-hf suite=...,
# downloads with network); SUITE=NAME|DIR puts another suite, e.g. a local tiny one, in their place.
.PHONY: reproduce reproduce-quick reproduce-cpu reproduce-jobs reproduce-report
SCALE ?= quick
LANES ?= 2
comma := ,
empty :=
space := $(empty) $(empty)
# OVERRIDE='a=1 b=2' -> "override=['a=1','b=2']" (each item quoted: a value may hold = or ,)
override_arg = $(if $(OVERRIDE),"override=[$(subst $(space),$(comma),$(foreach o,$(OVERRIDE),'$(o)'))]")
reproduce-quick: $(STAMP)
	$(BIN)/headlab-reproduce run=true scale=quick $(override_arg) $(ARGS)

reproduce-cpu: $(STAMP)
	$(BIN)/headlab-reproduce run=true scale=cpu lanes=$(LANES) $(override_arg) $(ARGS)

reproduce: $(STAMP)
	$(BIN)/headlab-reproduce run=true scale=$(if $(filter suites,$(SCALE)),suites,full) $(if $(SUITE),use_suite=$(SUITE)) $(if $(DRY_RUN),dry_run=true) $(if $(filter-out joblib,$(LAUNCHER)),launcher=$(LAUNCHER)) $(override_arg) $(ARGS)

reproduce-jobs: $(STAMP)
	$(BIN)/headlab-reproduce jobs=true scale=$(SCALE)

reproduce-report: $(STAMP)
	$(BIN)/headlab-reproduce scale=$(SCALE)

clean:
	rm -rf $(VENV) logs .pytest_cache
