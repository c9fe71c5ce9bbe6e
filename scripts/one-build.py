#!/usr/bin/env python3
"""Fails when a dev-dependency changes the features of a crate the binaries use.

`make build` compiles the binaries, `make test` the tests too. Cargo resolves features once
per build, over the crates each build needs: if a dev-dependency turned on a feature of a
shared crate (tokio's `test-util`, say), the test build would get a different tokio, and with
it a second build of everything above it. This compares what `cargo tree` resolves for the
binaries with what it resolves with dev-dependencies, crate by crate: a crate in both must
have the same features; crates only tests use may come in new.
"""

import collections
import os
import subprocess
import sys


def features(edges):
    run = subprocess.run(
        [os.environ.get("CARGO", "cargo"), "tree", "--workspace", "--locked", "-e", edges, "--prefix", "none",
         "--format", "{p}|{f}"],
        capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"!! FAIL: cargo tree failed:\n{run.stderr}")
    tree = run.stdout
    resolved = collections.defaultdict(set)
    for line in tree.splitlines():
        if "|" not in line:
            continue
        package, _, flags = line.partition("|")
        # cargo tree marks a crate it has shown already with (*), a proc-macro with (proc-macro).
        package = package.split(" (")[0].strip()
        flags = flags.replace("(*)", "").strip()
        resolved[package].add(flags)
    return resolved


binaries = features("normal,build")
tests = features("normal,build,dev")
if not binaries or not tests:
    sys.exit("!! FAIL: cargo tree listed no crates; nothing was checked")
changed = [
    f"{package}: {sorted(binaries[package])} for the binaries, {sorted(tests[package])} with tests"
    for package in sorted(binaries)
    if binaries[package] != tests[package]
]
if changed:
    print("!! FAIL: dev-dependencies change the features of crates the binaries use, so the "
          "test build would compile them (and all above them) again:", file=sys.stderr)
    print("\n".join(changed), file=sys.stderr)
    sys.exit(1)
only_tests = sorted(set(tests) - set(binaries))
print(f"one build: the {len(binaries)} crates of the binaries keep their features in the test "
      f"build; {len(only_tests)} crates only tests use")
