# rustbloom — `make run` and `make test` install what is missing (as root), build, and go.

SHELL := /bin/bash
.DEFAULT_GOAL := build

MODULE := target/release/librustbloom.so
DEB_PACKAGES := build-essential libclang-dev redis-server redis-tools
export RUSTBLOOM_MODULE := $(CURDIR)/$(MODULE)

.PHONY: deps build run test unit integration bench fmt clean

## deps: install the Debian packages the build and the tests need, when missing.
deps:
	@missing=""; \
	for pkg in $(DEB_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$pkg 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$pkg"; \
	done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" != 0 ]; then \
	    echo "missing packages:$$missing — run: sudo apt-get install -y$$missing"; exit 1; \
	  fi; \
	  echo "installing:$$missing"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get update -qq && apt-get install -y -qq $$missing >/dev/null || exit 1; \
	  case "$$missing" in *redis-server*) \
	    if command -v systemctl >/dev/null && systemctl is-active --quiet redis-server 2>/dev/null; then \
	      echo "stopping the packaged redis-server service so port 6379 is free for make run"; \
	      systemctl disable --now redis-server >/dev/null 2>&1 || true; \
	    fi;; \
	  esac; \
	fi
	@command -v cargo >/dev/null || { echo "cargo not found: install Rust from https://rustup.rs"; exit 1; }

## build: the module, release mode (target/release/librustbloom.so).
build: deps
	cargo build --release --lib

## run: start redis-server in the foreground with the module, on redis.conf.example (port 6379).
run: build
	cd $(CURDIR) && exec redis-server redis.conf.example

## test: unit tests of the core and integration tests against real redis-servers.
test: build
	cargo test --no-fail-fast

## bench: criterion benches of the core and load benches against a server.
bench: build
	cargo bench --bench core

fmt:
	cargo fmt --all

clean:
	cargo clean
