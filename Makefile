# Developer verbs. Everything that talks to the local control plane runs inside a
# loopback-only network namespace (hack/netns-run.sh): see docs/development.md.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
NETNS_RUN := hack/netns-run.sh
PYTEST_ARGS ?=

.PHONY: help venv control-plane test test-unit run demo cluster-up cluster-down lint generate verify bundle bench clean

help:
	@echo "make test          install, build or reuse the control plane, run every test"
	@echo "make run           run the operator (against \$$KUBECONFIG, or a local control plane)"
	@echo "make demo          show the operator installing the stack on a local control plane"
	@echo "make cluster-up    start the local control plane (hack/local-cluster.sh up)"
	@echo "make cluster-down  stop it"
	@echo "make lint          ruff and mypy"
	@echo "make generate      regenerate CRDs, API docs and the bundle"
	@echo "make verify        fail if generated files are stale"
	@echo "make bench         measure speed and footprint (bench/results, docs/performance.md)"

$(VENV)/.installed: pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "$(PYTHON) is required"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

venv: $(VENV)/.installed

control-plane:
	bash hack/build-control-plane.sh

test: venv control-plane
	$(NETNS_RUN) $(VENV)/bin/pytest $(PYTEST_ARGS)

test-unit: venv
	$(VENV)/bin/pytest tests/unit $(PYTEST_ARGS)

run: venv
	@if [ -n "$$KUBECONFIG" ]; then \
	  $(PY) -m manager run; \
	else \
	  bash hack/build-control-plane.sh >/dev/null && $(NETNS_RUN) $(PY) -m manager run --local; \
	fi

cluster-up: venv
	hack/local-cluster.sh up

cluster-down: venv
	hack/local-cluster.sh down

lint: venv
	$(VENV)/bin/ruff check manager tests hack bench
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
