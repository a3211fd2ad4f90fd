# Quick start (README): `make plan STACK=dev` and `make test`. Each target creates .venv when needed.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STACK ?= dev
STAMP := $(VENV)/.installed

.PHONY: venv plan plan-all capacity test test-unit lint integration integration-deps clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

venv: $(STAMP)

plan: $(STAMP)
	$(PY) -m infra.offline.cli plan --stack $(STACK)

plan-all: $(STAMP)
	for s in dev dev-cloudrun dev-cohost dev-cohost-gke dev-multiregion staging staging-vertex prod; do $(PY) -m infra.offline.cli plan --stack $$s || exit 1; done

capacity: $(STAMP)
	$(PY) -m infra.offline.cli capacity --stack $(STACK)

# The full suite: unit tier, then the integration tier against the real vLLM / Prometheus.
test: test-unit integration

# Static checks first (seconds once mypy's cache is warm), then the unit tier.
test-unit: $(STAMP) lint
	$(PY) -m pytest -q -n 2

# ruff (lint + format check), mypy (pydantic plugin; strict floor on the config and planning code), import-linter.
lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy
	$(VENV)/bin/lint-imports

# One process (no xdist): the session starts one real vLLM (~3 GB) that every integration test shares.
# REQUIRE_VLLM=1 / REQUIRE_PROMETHEUS=1 turn a missing install into a failure instead of a skip.
integration: $(STAMP) integration-deps
	REQUIRE_VLLM=1 REQUIRE_PROMETHEUS=1 $(PY) -m pytest -q -m integration tests

clean:
	rm -rf build
-include mk/*.mk

# Extended by mk/*.mk (each adds its own `integration-deps::` recipe: real vLLM venv, Prometheus, ...).
integration-deps:: $(STAMP)
