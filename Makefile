# The two commands: `make demo` and `make test`. See README.md.
SHELL := bash
CARGO ?= cargo
export CARGO
# One build serves lint, binaries and tests: every debug build compiles the workspace's own
# crates with clippy-driver (rustc plus clippy's lints), so `make build`, `make lint` and
# `make test` share their artifacts, and clippy needs no check build of its own. Release
# builds (`make bench`, the Dockerfile) use plain rustc.
export RUSTC_WORKSPACE_WRAPPER := clippy-driver
# Where cargo builds (CARGO_TARGET_DIR moves it, as .ci/run does).
TARGET_DIR := $(or $(CARGO_TARGET_DIR),target)
# End-to-end tests at once: they mostly wait for services, not for a CPU.
export E2E_THREADS ?= 4

.PHONY: all build run demo test bench validate lint deps fmt proto openapi clean

all: build

build:
	$(CARGO) build --workspace --bins --locked

## Start the five services (and the stand-in model when OPENAI_API_KEY is unset); Ctrl-C stops them.
run: build
	scripts/stack.sh run

## Run one prompt per mode through the stack and show their streams (starts the stack if it is not running).
demo: build
	scripts/stack.sh demo

## Every test (scripts/test.sh): unit and doc tests of each crate, the end-to-end suite against
## the real services (and against MCP servers from npm and PyPI, standard Python clients from
## PyPI (grpcio-reflection, openapi-python-client), and the web playground in headless
## Chromium, installed on first run) with its 10 slowest tests, the storage modules of
## it again on PostgreSQL, and offline checks of the delivery files (compose, Kubernetes)
## against what the binaries read. PostgreSQL: AGENTIC_TEST_POSTGRES_URL, which this target
## sets when a server answers on 127.0.0.1:5432 (user postgres, trust auth).
test: export AGENTIC_TEST_POSTGRES_URL ?= $(shell pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null && echo postgres://postgres@127.0.0.1:5432)
test:
	scripts/test.sh

## Benchmarks on a release build: prints a table (p50/p99 of each latency beside a loopback
## tonic round trip measured in the same run, target, PASS/MISS) and writes
## target/bench/results.json. BENCH_ARGS=--quick is a short smoke run; --strict exits non-zero
## on a miss. Sets AGENTIC_TEST_POSTGRES_URL like `make test`, else the PostgreSQL row is SKIPPED.
## Raises the open-files limit: items 9 and 9b hold ~10,000 connections to the stand-in model.
bench: export AGENTIC_TEST_POSTGRES_URL ?= $(shell pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null && echo postgres://postgres@127.0.0.1:5432)
bench: export RUSTC_WORKSPACE_WRAPPER :=
bench:
	$(CARGO) build --release --locked --workspace --bins
	ulimit -n 65536 2>/dev/null || ulimit -n "$$(ulimit -Hn)"; $(TARGET_DIR)/release/agentic-bench $(BENCH_ARGS)

## Only the delivery checks (needs the debug binaries: `make build`).
validate:
	scripts/validate-delivery.sh

## rustfmt, unused dependencies, one build for binaries and tests, clippy with warnings as
## errors on every target (inside that build), and buf lint, format and breaking (scripts/lint.sh).
lint:
	scripts/lint.sh

## Dependencies a crate declares but never uses (cargo-machete, installed on first use).
deps:
	scripts/unused-deps.sh

fmt:
	$(CARGO) fmt --all

## After changing a .proto file: regenerate agentic-proto's code and descriptor set (commit them).
proto:
	scripts/proto-gen.sh

## Writes the HTTP API's OpenAPI document (services/prompt-gateway/src/api/openapi.json) from the
## proto's routes and comments; a unit test fails while the checked-in one differs.
openapi:
	AGENTIC_WRITE_OPENAPI=1 $(CARGO) test --workspace --locked --lib -- the_checked_in_openapi_document

## The build and the stack's data (and the tool folders older clones kept inside); the tools
## the checks install stay in ~/.cache/agentic/tools.
clean:
	$(CARGO) clean
	rm -rf .run .venv-validate .buf-tools .cargo-tools .mcp-servers
