#!/usr/bin/env bash
# `make test`: every test, on the build `make build` and `make lint` share.
#  1. the tools the tests drive: MCP servers (npm, PyPI), headless Chromium (Debian);
#  2. one build of every target (a no-op after `make lint`; after `make build`, only the test
#     harnesses and the crates only tests use);
#  3. unit and doc tests of each crate;
#  4. the end-to-end suite, E2E_THREADS tests at a time, then its slowest tests;
#  5. the end-to-end modules whose behaviour depends on the storage backend again, with every
#     stack on PostgreSQL (`pg_modules` below; each must match tests; the tool-host's store
#     and the replicas run on PostgreSQL in step 4 already);
#  6. the offline checks of the delivery files.
# Every step runs even when one before it failed; the script fails at the end, naming them.
set -uo pipefail
cd "$(dirname "$0")/.."

cargo=${CARGO:-cargo}
threads=${E2E_THREADS:-4}
# Substrings of test names, as libtest filters; `--skip` drops modules whose names contain one
# of them but do not depend on the backend (walls::gateway, llm_faults, the playground's pages).
pg_modules=(queue:: triggers:: approvals:: expiry:: export:: listings:: deletion:: usage:: retention:: processes:: budgets:: recordings:: streams::
    conversations:: attachments::modes:: attachments::bounds:: answers:: agents:: sub_agents:: memory:: tidy:: cancel:: faults:: gateway:: --skip walls:: --skip llm_faults:: --skip playground::)
failed=()
times=()

step() {
    local name=$1 start=$SECONDS
    shift
    echo "== $name"
    if ! "$@"; then
        echo "!! FAILED: $name ($((SECONDS - start)) s)" >&2
        failed+=("$name")
        return 1
    fi
    times+=("$(printf '%4d s  %s' $((SECONDS - start)) "$name")")
}

quietly() {
    "$@" >/dev/null
}

e2e() {
    "$cargo" test --workspace --locked --test e2e -- --test-threads "$threads" "$@" 2>&1 |
        scripts/test-times.py "$threads" 10
}

# Each module of the PostgreSQL pass names tests: a renamed module fails here instead of
# leaving its tests out of the pass unnoticed.
pg_modules_exist() {
    local names module
    names=$("$cargo" test --workspace --locked --test e2e -- --list 2>/dev/null) || return 1
    for module in "${pg_modules[@]}"; do
        [[ $module == --skip || $module == walls:: || $module == llm_faults:: ]] && continue
        if ! grep -q "^$module" <<<"$names"; then
            echo "!! no end-to-end test is in module $module" >&2
            return 1
        fi
    done
}

if [[ -n "${AGENTIC_TEST_POSTGRES_URL:-}" ]]; then
    echo "== PostgreSQL tests run against $AGENTIC_TEST_POSTGRES_URL"
else
    echo "!! NO PostgreSQL (pg_isready -h 127.0.0.1 -p 5432 failed and AGENTIC_TEST_POSTGRES_URL is unset): the PostgreSQL test variants will be SKIPPED" >&2
fi
step "MCP servers for the tests" quietly scripts/mcp-servers.sh
step "Chromium for the browser tests" scripts/browser.sh
step "Python clients for the tests" quietly scripts/python-clients.sh
if ! step "build of every target" "$cargo" build --workspace --all-targets --locked; then
    echo "!! nothing to test without a build" >&2
    exit 1
fi
step "unit tests" "$cargo" test --workspace --locked --no-fail-fast --lib --bins
step "doc tests" "$cargo" test --workspace --locked --doc
step "end-to-end tests" e2e
if [[ -n "${AGENTIC_TEST_POSTGRES_URL:-}" ]]; then
    step "the PostgreSQL pass's modules exist" pg_modules_exist
    AGENTIC_TEST_STACK_DATABASE=postgres step "end-to-end tests of storage on PostgreSQL" \
        e2e "${pg_modules[@]}"
else
    echo "!! SKIPPED: the end-to-end tests of storage on PostgreSQL (no server)" >&2
fi
step "delivery checks" scripts/validate-delivery.sh

echo "== time per step (${SECONDS} s in all)"
printf '%s\n' "${times[@]}"
if ((${#failed[@]})); then
    printf '!! FAILED: %s\n' "${failed[@]}" >&2
    exit 1
fi
echo "== all tests passed"
