#!/usr/bin/env bash
# Fails when a crate of the workspace declares a dependency its sources never use
# (cargo-machete: a text search of each crate's sources for the dependency's name). A false
# positive, e.g. a crate reached only through a macro or a feature, goes in that crate's
# `[package.metadata.cargo-machete] ignored = [...]`, with a comment saying why.
# cargo-machete is used from PATH when it is there in the pinned version; otherwise it is
# installed once from crates.io into the machine's tools folder (scripts/tools-dir.sh), so no
# clone after the first compiles it.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/tools-dir.sh
# With CARGO set (make exports it) cargo-machete takes its first argument for the name cargo
# ran it by, and `--version` would start an analysis instead.
unset CARGO

version=0.9.2
machete=cargo-machete
if [[ "$("$machete" --version 2>/dev/null)" != "$version" ]]; then
    root="$tools_dir/cargo-machete-$version"
    machete="$root/bin/cargo-machete"
    install_machete() {
        [[ "$("$machete" --version 2>/dev/null)" == "$version" ]] && return
        echo "== installing cargo-machete $version into $root"
        # Its own target folder: the workspace's build must not share its features.
        cargo install --quiet --locked --root "$root" --target-dir "$root/build" \
            --version "$version" cargo-machete
        rm -rf "$root/build"
    }
    with_tools_lock install_machete
fi
echo "== unused dependencies (cargo-machete $version)"
"$machete" --skip-target-dir
