#!/usr/bin/env bash
# What agentic-proto's generated code is made from (the protos and the generator: its code and
# its locked dependencies) and what it is (the generated files), one SHA-256 per file. `make
# proto` records it beside the code; `make lint` fails when any of them changed since.
set -euo pipefail
cd "$(dirname "$0")/.."
export LC_ALL=C
generated=shared/agentic-proto/src/generated
sha256sum proto/agentic/v1/*.proto proto/google/api/*.proto tools/proto-gen/Cargo.toml tools/proto-gen/Cargo.lock \
    tools/proto-gen/src/main.rs "$generated/agentic.v1.rs" "$generated/google.api.rs" \
    "$generated/agentic_descriptor.bin"
