# One command each: `make run` (set up + main job) and `make test` (set up + every check).
# `make run` installs what running needs (the library and its runtime dependencies);
# `make test` adds the dev extra (test tools, the SDKs and servers the tests start),
# the plugin packages and a headless browser.
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
RUN_STAMP := $(VENV)/.installed-run
STAMP := $(VENV)/.installed-test
SOURCES := pyproject.toml Cargo.toml $(wildcard rust/*.rs rust/*/*.rs)
MATURIN := VIRTUAL_ENV=$(abspath $(VENV)) PATH=$(abspath $(BIN)):$$PATH $(BIN)/maturin
LINT_PATHS := $(wildcard python tests benches plugins) conftest.py
PLUGINS := $(wildcard plugins/*/pyproject.toml)

.PHONY: run proxy test setup setup-run browser build lint fmt pytest cargo-test install-check bench bench-peers fuzz clean

run: setup-run
	$(BIN)/ctxrules demo

# The proxy's optional dependency (the `proxy` extra of pyproject.toml), then the proxy.
proxy: setup-run
	$(BIN)/pip install -q "aiohttp>=3.10,<4"
	$(BIN)/ctxrules proxy

test: setup lint cargo-test pytest install-check

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# Rebuild when the Rust sources, the manifest or the plugins change.
$(RUN_STAMP): $(BIN)/python $(SOURCES)
	$(BIN)/pip install -q "maturin==1.16.0"
	$(MATURIN) develop --release -q
	touch $(RUN_STAMP)

$(STAMP): $(BIN)/python $(SOURCES) $(PLUGINS) $(wildcard plugins/*/*/*.py)
	$(BIN)/pip install -q "maturin==1.16.0"
	$(MATURIN) develop --release --extras dev -q
	for p in $(dir $(PLUGINS)); do $(BIN)/pip install -q -e $$p || exit 1; done
	touch $(STAMP)

setup-run: $(RUN_STAMP)

setup: $(STAMP) browser

# The viewer's page is tested in a real headless Chromium: Debian's package, installed
# here when missing (as root with apt-get; with sudo when it needs no password).  Where
# neither works the browser tests skip and say why; a failed install does not stop setup.
# $CTXRULES_CHROMIUM names another browser for the tests (tests/chromium.py): then none
# is installed.
browser:
	@[ -n "$$CTXRULES_CHROMIUM" ] || command -v chromium >/dev/null 2>&1 \
	|| command -v chromium-browser >/dev/null 2>&1 || { \
		if [ "$$(id -u)" = 0 ]; then as=; elif sudo -n true 2>/dev/null; then as=sudo; else as=-; fi; \
		if ! command -v apt-get >/dev/null 2>&1; then \
			echo "make: no chromium and no apt-get: the viewer's browser tests will skip" >&2; \
		elif [ "$$as" = - ]; then \
			echo "make: chromium is missing (apt-get install chromium as root): the viewer's browser tests will skip" >&2; \
		else \
			$$as apt-get update -q && $$as env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
				--no-install-recommends chromium \
			|| echo "make: installing chromium failed: the viewer's browser tests will skip" >&2; \
		fi; }

# Re-build only the extension after editing Rust (faster than a full setup).
build: $(BIN)/python
	$(MATURIN) develop --release -q

lint: setup
	$(BIN)/ruff check $(LINT_PATHS)
	$(BIN)/ruff format --check $(LINT_PATHS)
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache
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
	$(BIN)/pytest -q -rs

# The wheel as a user gets it, in a clean virtualenv: only the runtime dependencies
# (no plotting library, no test tools), and the command line works.
INSTALL_CHECK := test-artifacts/install-check
install-check: setup
	rm -rf $(INSTALL_CHECK) && mkdir -p $(INSTALL_CHECK)
	$(MATURIN) build --release -q --out $(INSTALL_CHECK)/dist
	$(PY) -m venv $(INSTALL_CHECK)/venv
	$(INSTALL_CHECK)/venv/bin/pip install -q $(INSTALL_CHECK)/dist/*.whl
	$(INSTALL_CHECK)/venv/bin/ctxrules --help > /dev/null
	$(INSTALL_CHECK)/venv/bin/ctxrules --version
	echo "hello world" | $(INSTALL_CHECK)/venv/bin/ctxrules count
	! $(INSTALL_CHECK)/venv/bin/pip list 2>/dev/null | grep -iE '^(matplotlib|pytest|hypothesis|psycopg|litellm) '
	@echo "install-check: the wheel installs without plotting or test libraries and runs"

# Longer fuzzing of the core than `make test` does (there: 20,000 mutated commits in
# `cargo test`, 1,500 through the Python API and a hypothesis property in pytest).
# Here: the mutation test in release mode, the Python-API run in child processes, then
# libFuzzer (cargo-fuzz, on the stable toolchain through RUSTC_BOOTSTRAP=1) on both
# targets, seeded with the seed commits.  Findings land in fuzz/artifacts/.
FUZZ_ROUNDS ?= 1000000
FUZZ_COMMITS ?= 40000
FUZZ_SECONDS ?= 300
FUZZ_SEED ?= $(shell date +%s)
fuzz: setup
	CTXRULES_FUZZ_ROUNDS=$(FUZZ_ROUNDS) CTXRULES_FUZZ_SECONDS=$(FUZZ_SECONDS) CTXRULES_FUZZ_SEED=$(FUZZ_SEED) \
		cargo test --release -q --test fuzz_commits -- --nocapture
	$(BIN)/python tests/fuzz_core.py --commits $(FUZZ_COMMITS) --seed $(FUZZ_SEED)
	command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
	mkdir -p fuzz/corpus/commit fuzz/corpus/options
	for f in tests/data/commits/*.msgpack; do for b in 0 1 2; do \
		{ printf "\\x0$$b"; cat "$$f"; } > "fuzz/corpus/commit/$$b-$$(basename "$$f")"; done; done
	printf '{"model":"m","max_tokens":9,"system":[{"text":"s","layer":1}],"tools":[{"name":"ls","input_schema":{"type":"object"}}],"extra":{"t":0},"cache_ttl":"1h"}' \
		> fuzz/corpus/options/seed.json
	cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run -O -a commit corpus/commit -- \
		-max_total_time=$(FUZZ_SECONDS) -max_len=65536 -rss_limit_mb=2048 -print_final_stats=1
	cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run -O -a options corpus/options -- \
		-max_total_time=$(FUZZ_SECONDS) -max_len=4096 -rss_limit_mb=2048 -print_final_stats=1

bench: setup
	$(BIN)/pytest benches --benchmark-enable --benchmark-autosave --benchmark-columns=min,median,mean,ops -q

# The peers compared side by side that are not in the dev set (see pyproject's `peers`
# extra): installed into the virtualenv, then the fidelity benchmark.
bench-peers: setup
	$(BIN)/pip install -q "litellm>=1.60,!=1.82.7,!=1.82.8"
	$(BIN)/pytest benches/bench_fidelity.py --benchmark-enable -q -s

clean:
	rm -rf $(VENV) target .ctxrules test-artifacts
