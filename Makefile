# The two commands: `make run` (or `make demo`) and `make test`. See README.md.
CARGO ?= cargo

.PHONY: all build run demo test bench validate lint deps fmt clean

all: build

build:
	$(CARGO) build --workspace --bins

## Start the four services (and the stand-in model when OPENAI_API_KEY is unset); Ctrl-C stops them.
run: build
	scripts/stack.sh run

## Run one prompt through the stack and show its stream (starts the stack if it is not running).
demo: build
	scripts/stack.sh demo

## Every test: unit tests of each crate, the end-to-end suite against the real services (and
## against MCP servers from npm and PyPI, installed into .mcp-servers/ on first run; the web
## playground in headless Chromium, Debian's chromium and chromium-driver installed on first
## run), and
## offline checks of the delivery files (compose, Kubernetes) against what the binaries read.
## With PostgreSQL (AGENTIC_TEST_POSTGRES_URL, which this target sets when a server answers on
## 127.0.0.1:5432, user postgres, trust auth) the store and replica tests run on it, and the
## whole end-to-end suite runs a second time with every stack on PostgreSQL.
test: export AGENTIC_TEST_POSTGRES_URL ?= $(shell pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null && echo postgres://postgres@127.0.0.1:5432)
test:
	@if [ -n "$$AGENTIC_TEST_POSTGRES_URL" ]; then \
		echo "== PostgreSQL tests run against $$AGENTIC_TEST_POSTGRES_URL"; \
	else \
		echo "!! NO PostgreSQL (pg_isready -h 127.0.0.1 -p 5432 failed and AGENTIC_TEST_POSTGRES_URL is unset): the PostgreSQL test variants will be SKIPPED" >&2; \
	fi
	scripts/mcp-servers.sh >/dev/null
	scripts/browser.sh
	$(CARGO) build --workspace --all-targets --locked
	$(CARGO) test --workspace --locked --no-fail-fast
	@if [ -n "$$AGENTIC_TEST_POSTGRES_URL" ]; then \
		echo "== the end-to-end suite again, every stack on PostgreSQL"; \
		AGENTIC_TEST_STACK_DATABASE=postgres $(CARGO) test --workspace --locked --test e2e; \
	else \
		echo "!! SKIPPED: the end-to-end suite on PostgreSQL (no server)" >&2; \
	fi
	scripts/validate-delivery.sh

## Benchmarks on a release build: prints a table (p50/p99 of each latency beside a loopback
## tonic round trip measured in the same run, target, PASS/MISS) and writes
## target/bench/results.json. BENCH_ARGS=--quick is a short smoke run; --strict exits non-zero
## on a miss. Sets AGENTIC_TEST_POSTGRES_URL like `make test`, else the PostgreSQL row is SKIPPED.
## Raises the open-files limit: items 9 and 9b hold ~10,000 connections to the stand-in model.
bench: export AGENTIC_TEST_POSTGRES_URL ?= $(shell pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null && echo postgres://postgres@127.0.0.1:5432)
bench:
	$(CARGO) build --release --locked --workspace --bins
	ulimit -n 65536 2>/dev/null || ulimit -n "$$(ulimit -Hn)"; target/release/agentic-bench $(BENCH_ARGS)

## Only the delivery checks (needs the debug binaries: `make build`).
validate:
	scripts/validate-delivery.sh

## rustfmt check, clippy with warnings as errors, and no unused dependencies (`make deps`).
lint: deps
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings

## Dependencies a crate declares but never uses (cargo-machete, installed into .cargo-tools
## on first use).
deps:
	scripts/unused-deps.sh

fmt:
	$(CARGO) fmt --all

clean:
	$(CARGO) clean
	rm -rf .run .venv-validate .buf-tools .cargo-tools .mcp-servers
