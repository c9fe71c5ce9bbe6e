#!/usr/bin/env bash
# `make lint`: rustfmt, unused dependencies, one build for binaries and tests, clippy with
# warnings as errors on every target, a check build of the production packages alone, and
# the protobuf contracts' checks.
#
# Clippy runs inside the build: the Makefile sets RUSTC_WORKSPACE_WRAPPER=clippy-driver, so
# each workspace crate is compiled by rustc with clippy's lints (and the configuration in
# [workspace.lints] and clippy.toml) as part of the one build that `make build` and
# `make test` use too; `cargo clippy` would check every dependency again in a build of its
# own. Cargo replays a crate's warnings when the crate is fresh, so any warning line in the
# build's output fails, as `clippy -- -D warnings` would.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo=${CARGO:-cargo}

if [[ "${RUSTC_WORKSPACE_WRAPPER:-}" != clippy-driver ]]; then
    echo "!! FAIL: run this through \`make lint\` (RUSTC_WORKSPACE_WRAPPER=clippy-driver), or clippy's lints would not run" >&2
    exit 1
fi

echo "== rustfmt"
"$cargo" fmt --all --check
scripts/unused-deps.sh
echo "== features of the binaries' crates in the test build"
scripts/one-build.py
echo "== every target, built through clippy (warnings are errors)"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# Uncoloured, so that the warnings it replays are seen whatever CARGO_TERM_COLOR says.
"$cargo" build --workspace --all-targets --locked --color never 2>&1 | tee "$log"
echo "== the production image's packages alone, with the features they resolve without the tests'"
# The Dockerfile builds them with -p, where the tests' dependencies turn on no feature: a
# check build here finds code that compiles only thanks to one of those.
"$cargo" check --locked --color never -p prompt-gateway -p classic-executor -p code-executor \
    -p hosted-executor -p tool-host -p agentic-client --bins 2>&1 | tee -a "$log"
if grep -Eq '^(warning|error)(\[[A-Za-z0-9_:-]+\])?:' "$log"; then
    echo "!! FAIL: the build has warnings (clippy's or rustc's); fix them or allow one with a reason" >&2
    exit 1
fi
scripts/proto-checks.sh
