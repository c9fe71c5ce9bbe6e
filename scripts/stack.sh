#!/usr/bin/env bash
# Starts the local stack from the built binaries: tool-host, classic-executor, code-executor,
# hosted-executor, prompt-gateway, and the stand-in model when no OPENAI_API_KEY (or, for
# hosted mode, no ANTHROPIC_API_KEY) is set. Data lives in .run/ (SQLite files).
#   scripts/stack.sh run    start everything in the foreground; Ctrl-C stops it
#   scripts/stack.sh demo   run one prompt through the stack (starting it if needed)
set -euo pipefail
cd "$(dirname "$0")/.."

bin="${CARGO_TARGET_DIR:-target}/debug"
# A development stack on this machine: every service on loopback, no internal token needed,
# and the gateway trusts the user name a client sends (`--dev`).
export AGENTIC_DEV="${AGENTIC_DEV:-true}"
data=.run
mkdir -p "$data"
gateway_url="${AGENTIC_SERVER:-http://127.0.0.1:50051}"
pids=()

stop_all() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
}

start() {
    local name=$1; shift
    "$@" >"$data/$name.log" 2>&1 &
    pids+=("$!")
}

gateway_up() {
    "$bin/agentic" --server "$gateway_url" modes >/dev/null 2>&1
}

start_stack() {
    if [[ -z "${OPENAI_API_KEY:-}" || -z "${ANTHROPIC_API_KEY:-}" ]]; then
        start stand-in-model "$bin/stand-in-model" --listen 127.0.0.1:8089
    fi
    if [[ -z "${OPENAI_API_KEY:-}" ]]; then
        echo "OPENAI_API_KEY is not set: using the STAND-IN MODEL (scripted answers, not a real LLM)." >&2
        export OPENAI_API_KEY=stand-in OPENAI_BASE_URL=http://127.0.0.1:8089/v1
    else
        echo "using the LLM at ${OPENAI_BASE_URL:-https://api.openai.com/v1}" >&2
    fi
    if [[ -z "${ANTHROPIC_API_KEY:-}" ]]; then
        echo "ANTHROPIC_API_KEY is not set: hosted mode uses the STAND-IN MODEL's Anthropic side." >&2
        export ANTHROPIC_API_KEY=stand-in ANTHROPIC_BASE_URL=http://127.0.0.1:8089
    fi
    start tool-host env TOOL_HOST_LISTEN=127.0.0.1:50054 TOOL_HOST_PLUGINS="${TOOL_HOST_PLUGINS:-artifact,interpreter,skill,trigger,human,memory,demo}" \
        TOOL_HOST_DATABASE_URL="sqlite://$data/tool-host.db?mode=rwc" GATEWAY_URL=http://127.0.0.1:50051 "$bin/tool-host"
    start classic-executor env CLASSIC_EXECUTOR_LISTEN=127.0.0.1:50052 TOOL_HOST_URL=http://127.0.0.1:50054 CODE_RUNNER_URL=http://127.0.0.1:50053 \
        "$bin/classic-executor"
    start code-executor env CODE_EXECUTOR_LISTEN=127.0.0.1:50053 TOOL_HOST_URL=http://127.0.0.1:50054 \
        "$bin/code-executor"
    start hosted-executor env HOSTED_EXECUTOR_LISTEN=127.0.0.1:50056 TOOL_HOST_URL=http://127.0.0.1:50054 CODE_RUNNER_URL=http://127.0.0.1:50053 \
        "$bin/hosted-executor"
    start prompt-gateway env GATEWAY_LISTEN=127.0.0.1:50051 GATEWAY_HTTP_LISTEN=127.0.0.1:8080 GATEWAY_MODES=classic=http://127.0.0.1:50052,code=http://127.0.0.1:50053,hosted=http://127.0.0.1:50056 TOOL_HOST_URL=http://127.0.0.1:50054 \
        GATEWAY_DATABASE_URL="sqlite://$data/gateway.db?mode=rwc" "$bin/prompt-gateway"
    for _ in $(seq 1 100); do
        if gateway_up; then
            echo "agentic is up: gateway $gateway_url, HTTP/JSON API http://127.0.0.1:8080/v1/ (logs in $data/*.log)" >&2
            echo "the playground: open http://127.0.0.1:8080/ in a browser" >&2
            "$bin/agentic" --server "$gateway_url" modes >&2
            return 0
        fi
        sleep 0.1
    done
    echo "the stack did not come up; last log lines:" >&2
    tail -n 5 "$data"/*.log >&2
    stop_all
    exit 1
}

case "${1:-run}" in
    run)
        trap stop_all EXIT INT TERM
        start_stack
        echo "try: $bin/agentic prompt \"Remember that I like tea\"   (Ctrl-C stops the stack)" >&2
        wait -n "${pids[@]}" || true
        echo "a service stopped; see $data/*.log" >&2
        ;;
    demo)
        if ! gateway_up; then
            trap stop_all EXIT INT TERM
            start_stack
        fi
        echo "\$ agentic prompt \"Remember that the demo ran today\"" >&2
        "$bin/agentic" --server "$gateway_url" prompt "Remember that the demo ran today"
        echo >&2
        echo "\$ agentic prompt -m code \"Store a note, then count my artifacts\"" >&2
        "$bin/agentic" --server "$gateway_url" prompt -m code "Store a note, then count my artifacts"
        echo >&2
        echo "\$ agentic prompt -m hosted \"Write a file in your container\"" >&2
        "$bin/agentic" --server "$gateway_url" prompt -m hosted "Write a file in your container"
        ;;
    *)
        echo "usage: $0 run|demo" >&2
        exit 2
        ;;
esac
