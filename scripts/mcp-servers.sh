#!/usr/bin/env bash
# Installs the MCP servers the end-to-end tests run against, none of them written here:
# @modelcontextprotocol/server-everything (npm; stdio and Streamable HTTP) and mcp-server-time
# (PyPI; stdio), into the machine's tools folder (scripts/tools-dir.sh), one folder per pinned
# version; a second run, from any clone, does nothing.
# Prints nothing on success but the paths the tests read (AGENTIC_TEST_MCP_*); fails loudly.
set -euo pipefail
source "$(dirname "$0")/tools-dir.sh"

everything_version="2026.8.31"
time_version="2026.10.19"
dir="$tools_dir/mcp-servers-$everything_version-$time_version"

everything="$dir/npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
time_bin="$dir/venv/bin/mcp-server-time"

install_servers() {
	mkdir -p "$dir"
	if ! [ -f "$dir/npm/.installed-$everything_version" ]; then
		command -v npm >/dev/null || { echo "mcp-servers: npm is needed to install server-everything" >&2; exit 1; }
		mkdir -p "$dir/npm"
		(cd "$dir/npm" && [ -f package.json ] || echo '{"private": true}' > package.json)
		(cd "$dir/npm" && npm install --silent --no-audit --no-fund \
			"@modelcontextprotocol/server-everything@$everything_version" >&2)
		touch "$dir/npm/.installed-$everything_version"
	fi
	if ! [ -f "$dir/venv/.installed-$time_version" ]; then
		python3 -m venv "$dir/venv"
		"$dir/venv/bin/pip" install --quiet --disable-pip-version-check "mcp-server-time==$time_version" >&2
		touch "$dir/venv/.installed-$time_version"
	fi
}
with_tools_lock install_servers
[ -f "$everything" ] || { echo "mcp-servers: $everything is missing after the install" >&2; exit 1; }
[ -x "$time_bin" ] || { echo "mcp-servers: $time_bin is missing after the install" >&2; exit 1; }
echo "AGENTIC_TEST_MCP_EVERYTHING=$everything"
echo "AGENTIC_TEST_MCP_TIME=$time_bin"
