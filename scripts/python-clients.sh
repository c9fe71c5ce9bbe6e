#!/usr/bin/env bash
# Installs the standard clients the end-to-end tests drive agentic with, none of them written
# here, from PyPI: grpcio with the official reflection client (grpcio-reflection), and
# openapi-python-client (with openapi-spec-validator) and what the client it generates imports. One virtualenv per pinned
# set, in the machine's tools folder (scripts/tools-dir.sh); a second run does nothing.
# Prints only the virtualenv's python (AGENTIC_TEST_PYTHON=…); fails loudly.
set -euo pipefail
source "$(dirname "$0")/tools-dir.sh"

packages=(
	"grpcio==1.76.0"
	"grpcio-reflection==1.76.0"
	"protobuf==6.33.1"
	"openapi-python-client==0.29.1"
	"openapi-spec-validator==0.9.0"
	# What a client openapi-python-client generates imports.
	"httpx==0.28.1"
	"attrs==26.1.0"
	"python-dateutil==4.0.0"
)
pins="$(printf '%s\n' "${packages[@]}" | sha256sum | cut -c1-12)"
venv="$tools_dir/python-clients-$pins"

install_clients() {
	if ! [ -f "$venv/.installed" ]; then
		rm -rf "$venv"
		python3 -m venv "$venv"
		"$venv/bin/pip" install --quiet --disable-pip-version-check "${packages[@]}" >&2
		touch "$venv/.installed"
	fi
}
with_tools_lock install_clients
echo "AGENTIC_TEST_PYTHON=$venv/bin/python"
