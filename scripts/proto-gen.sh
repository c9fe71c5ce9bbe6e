#!/usr/bin/env bash
# `make proto`: regenerates agentic-proto's checked-in code and descriptor set from proto/
# (tools/proto-gen, a small project of its own that compiles the protos with protox), and
# records what it was made from in SOURCES.sha256, which `make lint` holds the sources to.
# Run it after changing a .proto file, and commit what it writes.
set -euo pipefail
cd "$(dirname "$0")/.."

"${CARGO:-cargo}" run --quiet --locked --manifest-path tools/proto-gen/Cargo.toml \
    --target-dir "${CARGO_TARGET_DIR:-target}/proto-gen"
scripts/proto-sources.sh >shared/agentic-proto/src/generated/SOURCES.sha256
