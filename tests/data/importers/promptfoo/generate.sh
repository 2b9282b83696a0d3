#!/usr/bin/env bash
# Regenerates results.json with promptfoo itself (offline). Needs a promptfoo install:
#   PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm install --ignore-scripts promptfoo@0.118.0
#   npm rebuild better-sqlite3 --build-from-source --nodedir=/usr
# (promptfoo releases after 0.118 need Node.js 22.) PROMPTFOO=path/to/node_modules/.bin/promptfoo
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
promptfoo="${PROMPTFOO:-promptfoo}"
cd "$here"
export PROMPTFOO_DISABLE_TELEMETRY=1 PROMPTFOO_DISABLE_UPDATE=1 PROMPTFOO_CONFIG_DIR="$(mktemp -d)"
"$promptfoo" eval -c promptfooconfig.yaml --repeat 3 --no-cache -o results.json || true  # exits 100 when a test fails
"$promptfoo" --version > VERSION
node --version >> VERSION
