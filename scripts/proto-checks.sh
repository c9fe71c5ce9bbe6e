#!/usr/bin/env bash
# The protobuf contracts' checks (part of `make lint`): the generated code is up to date with
# proto/ (what `make proto` recorded it was made from is what is there now), `buf lint`,
# `buf format`, and
# `buf breaking` against the last commit of main, since the proto is also the storage format
# (stored events and triggers are encoded protobuf). On main itself that is the commit before
# HEAD, so each landed change is held to what was there before it. buf is installed once from
# npm into the machine's tools folder (scripts/tools-dir.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/tools-dir.sh

version=1.75.0
root="$tools_dir/buf-$version"
buf="$root/node_modules/.bin/buf"
if [[ "$("$buf" --version 2>/dev/null)" != "$version" ]]; then
    echo "== installing buf $version into $root"
    mkdir -p "$root"
    npm install --silent --no-fund --no-audit --prefix "$root" "@bufbuild/buf@$version" >/dev/null
fi

echo "== protobuf contracts: generated code, buf lint, format and breaking"
recorded=shared/agentic-proto/src/generated/SOURCES.sha256
if ! scripts/proto-sources.sh | diff -u "$recorded" - >&2; then
    echo "!! FAIL: proto/ or tools/proto-gen changed since agentic-proto's code was generated: run \`make proto\` and commit what it writes" >&2
    exit 1
fi
"$buf" lint
"$buf" format --diff --exit-code

main=$(git rev-parse --verify --quiet origin/main || git rev-parse --verify --quiet main || true)
if [[ -z "$main" ]]; then
    echo "!! FAIL: no main branch to hold the protos against (git fetch origin main)" >&2
    exit 1
fi
if [[ "$(git rev-parse HEAD)" == "$main" ]]; then
    against=$(git rev-parse --verify --quiet "$main^" || true)
    if [[ -z "$against" ]]; then
        echo "main has no commit before HEAD: nothing to hold the protos against"
        exit 0
    fi
else
    against=$main
fi
"$buf" breaking --against ".git#ref=$against"
echo "proto checks passed (breaking: against $(git rev-parse --short "$against"))"
