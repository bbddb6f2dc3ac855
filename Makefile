# splitsched — every command a developer needs. `make help` lists them.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.DEFAULT_GOAL := help

.PHONY: help setup controlplane lint test test-unit test-realnode realnode-binaries demo bench bench-core soak cluster-up cluster-down cluster-status proto proto-check clean

help: ## list the commands
	@grep -E '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  make %-16s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found (Python 3.11 is required)"; exit 1; }
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP) controlplane ## install Python deps into .venv and build/reuse the control-plane binaries

controlplane: ## build (first time) or reuse kube-apiserver, kube-scheduler, kube-controller-manager, etcd, kwok, helm
	bash scripts/get-binaries.sh

proto: $(STAMP) ## regenerate the gRPC stubs from proto/
	bash scripts/gen-proto.sh

lint: $(STAMP) ## ruff, mypy --strict, import-linter, the shape check (files <= 500 lines, functions <= 60)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy splitsched services tests bench
	$(VENV)/bin/lint-imports
	$(PY) scripts/check-shape.py

test-unit: $(STAMP) ## the fast tiers only (unit and service), no control plane
	$(VENV)/bin/pytest -q tests/unit tests/service

test: setup lint ## everything CI runs: lint, unit, service, integration and e2e tiers
	$(VENV)/bin/pytest -q

realnode-binaries: ## build (first time) or reuse kubelet, kube-proxy, kubectl, CoreDNS
	bash scripts/get-binaries.sh kubelet kube-proxy kubectl coredns

test-realnode: setup realnode-binaries ## the chart on a real kubelet (root; installs its Debian packages; skipped otherwise)
	SPLITSCHED_REALNODE=1 $(VENV)/bin/pytest -q -rA --durations=0 -p no:cacheprovider tests/realnode

demo: setup ## run the demo (see README)
	$(PY) -m splitsched.demo

bench-core: $(STAMP) ## in-process core benchmark: 10,000 pods onto 5,000 nodes
	$(PY) -m bench.core

MINUTES ?= 30
soak: setup ## the soak: churn, restarts, hand-over, cut watches on 200 kwok nodes (MINUTES=30; SOAK_FLAGS=--record writes bench/results)
	$(PY) -m bench.soak --minutes $(MINUTES) $(SOAK_FLAGS)

bench: setup bench-core ## benchmarks: the core alone, then side by side with kube-scheduler (bench/README.md)
	$(PY) -m bench.sidebyside

cluster-up: setup ## start the local control plane (etcd, kube-apiserver, kwok)
	$(PY) -m splitsched.testing.controlplane up

cluster-down: $(STAMP) ## stop exactly what cluster-up started
	$(PY) -m splitsched.testing.controlplane down

cluster-status: $(STAMP) ## is the local control plane running?
	$(PY) -m splitsched.testing.controlplane status

clean: ## remove the virtualenv and caches (not the control-plane binaries)
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
