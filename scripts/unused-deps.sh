#!/usr/bin/env bash
# Fails when a crate of the workspace declares a dependency its sources never use
# (cargo-machete: a text search of each crate's sources for the dependency's name). A false
# positive, e.g. a crate reached only through a macro or a feature, goes in that crate's
# `[package.metadata.cargo-machete] ignored = [...]`, with a comment saying why.
# cargo-machete is installed once into .cargo-tools from crates.io; after that nothing needs
# the network.
set -euo pipefail
cd "$(dirname "$0")/.."

version=0.9.2
tools=.cargo-tools
if [[ "$("$tools/bin/cargo-machete" --version 2>/dev/null)" != "$version" ]]; then
    echo "== installing cargo-machete $version into $tools"
    cargo install --quiet --locked --root "$tools" --version "$version" cargo-machete
fi
echo "== unused dependencies (cargo-machete $version)"
"$tools/bin/cargo-machete" --skip-target-dir
