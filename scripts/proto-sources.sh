#!/usr/bin/env bash
# What agentic-proto's generated code is made from: the protos and the generator (its code and
# its locked dependencies), one SHA-256 per file. `make proto` records it beside the code;
# `make lint` fails when the files have changed since.
set -euo pipefail
cd "$(dirname "$0")/.."
sha256sum proto/agentic/v1/*.proto tools/proto-gen/Cargo.toml tools/proto-gen/Cargo.lock \
    tools/proto-gen/src/main.rs
