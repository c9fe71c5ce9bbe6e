#!/usr/bin/env bash
# Installs what the playground's browser tests drive, on first run: headless Chromium and
# ChromeDriver from Debian's packages (chromium, chromium-driver). Does nothing when both are
# there. The tests use /usr/bin/chromium and /usr/bin/chromedriver (or AGENTIC_CHROMIUM and
# AGENTIC_CHROMEDRIVER).
set -euo pipefail

chromium="${AGENTIC_CHROMIUM:-/usr/bin/chromium}"
driver="${AGENTIC_CHROMEDRIVER:-/usr/bin/chromedriver}"
if [[ -x "$chromium" && -x "$driver" ]]; then
    exit 0
fi
echo "installing Debian's chromium and chromium-driver for the browser tests" >&2
sudo=""
if [[ "$(id -u)" != 0 ]]; then sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
if ! $sudo apt-get install -y --no-install-recommends chromium chromium-driver >&2; then
    $sudo apt-get update >&2
    $sudo apt-get install -y --no-install-recommends chromium chromium-driver >&2
fi
"$chromium" --version >&2
"$driver" --version >&2
