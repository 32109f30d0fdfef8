# One command each: `make run` (set up + main job) and `make test` (set up + every check).
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
MATURIN := VIRTUAL_ENV=$(abspath $(VENV)) PATH=$(abspath $(BIN)):$$PATH $(BIN)/maturin
LINT_PATHS := $(wildcard python tests benches plugins) conftest.py
PLUGINS := $(wildcard plugins/*/pyproject.toml)

.PHONY: run test setup build lint fmt pytest cargo-test bench clean

run: setup
	$(BIN)/ctxrules demo

test: setup lint cargo-test pytest

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# Rebuild when the Rust sources, the manifest or the plugins change.
$(STAMP): $(BIN)/python pyproject.toml Cargo.toml $(wildcard rust/*.rs rust/*/*.rs) $(PLUGINS) $(wildcard plugins/*/*/*.py)
	$(BIN)/pip install -q "maturin==1.16.0"
	$(MATURIN) develop --release --extras dev -q
	for p in $(dir $(PLUGINS)); do $(BIN)/pip install -q -e $$p || exit 1; done
	touch $(STAMP)

setup: $(STAMP)

# Re-build only the extension after editing Rust (faster than a full setup).
build: $(BIN)/python
	$(MATURIN) develop --release -q

lint: setup
	$(BIN)/ruff check $(LINT_PATHS)
	$(BIN)/ruff format --check $(LINT_PATHS)
	$(BIN)/mypy
	$(BIN)/python -m mypy.stubtest ctxrules._core
	cargo fmt --check
	cargo clippy --all-targets -q -- -D warnings
	cargo clippy --all-targets --features python -q -- -D warnings

fmt: setup
	$(BIN)/ruff format $(LINT_PATHS)
	$(BIN)/ruff check --fix $(LINT_PATHS)
	cargo fmt

cargo-test:
	cargo test -q

pytest: setup
	$(BIN)/pytest -q

bench: setup
	$(BIN)/pytest benches --benchmark-enable --benchmark-autosave --benchmark-columns=min,median,mean,ops -q

clean:
	rm -rf $(VENV) target .ctxrules
