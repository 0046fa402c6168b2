# Every target creates .venv when it is missing. `run` installs what running needs
# (requirements-runtime.lock); `test`, `lint` and `bench` add the extras, tests and tools
# (requirements.lock).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip install --quiet --disable-pip-version-check
RUNTIME := $(VENV)/.runtime-stamp
DEV := $(VENV)/.dev-stamp

.PHONY: install install-dev run test test-fast test-ts lint docs screenshots format bench clean

install: $(RUNTIME)

install-dev: $(DEV)

$(RUNTIME): requirements-runtime.lock pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) -r requirements-runtime.lock
	$(PIP) --no-deps -e .
	touch $(RUNTIME)

$(DEV): $(RUNTIME) requirements.lock
	$(PIP) -r requirements.lock
	touch $(DEV)

run: install
	$(BIN)/nexus serve

# On every core (pytest-xdist), a test module to a worker: module fixtures stay shared.
test: install-dev
	$(BIN)/python -m pytest -n auto --dist loadfile $(PYTEST_ARGS)

# The TypeScript client, built with tsc and tested against a real `nexus serve` (Node 20+).
test-ts: install-dev
	cd clients/typescript && npm ci --no-audit --no-fund && npm test

# Everything but the tests marked model, subprocess, postgresql, browser or slow.
test-fast: install-dev
	@start=$$(date +%s); \
	$(BIN)/python -m pytest -q -m "not (model or subprocess or postgresql or browser or slow)" $(PYTEST_ARGS); \
	status=$$?; echo "fast tier: $$(( $$(date +%s) - start )) s"; exit $$status

lint: install-dev
	$(BIN)/ruff check src tests benchmarks tools
	$(BIN)/ruff format --check src tests benchmarks tools
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache
	$(BIN)/python tools/sql_places.py
	$(BIN)/cog --check $(DOCS)

# The CLI, configuration, settings and endpoint references, generated from the code.
DOCS := docs/cli.md docs/configuration.md docs/retrieval.md docs/api.md
docs: install-dev
	$(BIN)/cog -r $(DOCS)

# docs/inspector.png, taken by the inspector's browser test (Debian's chromium).
screenshots: install-dev
	$(BIN)/python -m pytest -q tests/test_inspector.py -k keyword_slider
	cp test-artifacts/inspector-ask-moved.png docs/inspector.png

format: install-dev
	$(BIN)/ruff check --fix src tests benchmarks
	$(BIN)/ruff format src tests benchmarks

bench: install-dev
	$(BIN)/python -m benchmarks $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis clients/typescript/node_modules clients/typescript/dist
