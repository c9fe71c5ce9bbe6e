#!/usr/bin/env bash
# The protobuf contracts' checks (part of `make lint`): the generated code is what `make proto`
# made from proto/ (what it recorded is what is there now), `buf lint`, `buf format`, and
# `buf breaking` against main where this branch left it (the merge-base), since the proto is
# also the storage format (stored events and triggers are encoded protobuf). On main itself
# that is the commit before HEAD, so each landed change is held to what was there before it;
# a shallow clone has no history to compare with, and fails. buf is installed once from npm
# into the machine's tools folder (scripts/tools-dir.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/tools-dir.sh

version=1.75.0
root="$tools_dir/buf-$version"
buf="$root/node_modules/.bin/buf"
install_buf() {
    [[ "$("$buf" --version 2>/dev/null)" == "$version" ]] && return
    echo "== installing buf $version into $root"
    mkdir -p "$root"
    npm install --silent --no-fund --no-audit --prefix "$root" "@bufbuild/buf@$version" >/dev/null
}
with_tools_lock install_buf

echo "== protobuf contracts: generated code, buf lint, format and breaking"
recorded=shared/agentic-proto/src/generated/SOURCES.sha256
if ! scripts/proto-sources.sh | diff -u "$recorded" - >&2; then
    echo "!! FAIL: proto/, tools/proto-gen or the generated code changed since \`make proto\` made it: run \`make proto\` and commit what it writes" >&2
    exit 1
fi
"$buf" lint
"$buf" format --diff --exit-code

if [[ "$(git rev-parse --is-shallow-repository)" == true ]]; then
    echo "!! FAIL: a shallow clone: buf breaking needs main's history (git fetch --unshallow)" >&2
    exit 1
fi
main=$(git rev-parse --verify --quiet origin/main || git rev-parse --verify --quiet main || true)
if [[ -z "$main" ]]; then
    echo "!! FAIL: no main branch to hold the protos against (git fetch origin main)" >&2
    exit 1
fi
against=$(git merge-base HEAD "$main")
if [[ "$against" == "$(git rev-parse HEAD)" ]]; then
    against=$(git rev-parse --verify --quiet "HEAD^" || true)
    if [[ -z "$against" ]]; then
        echo "HEAD is the first commit: nothing to hold the protos against"
        exit 0
    fi
fi
"$buf" breaking --against ".git#ref=$against"
echo "proto checks passed (breaking: against $(git rev-parse --short "$against"))"
