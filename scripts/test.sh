#!/usr/bin/env bash
# Runs every test: native workspace tests (core, CLI, verifier on CPU, web app state and charts),
# the reference-accuracy table check, and the browser end-to-end tests in headless Chromium.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$PWD/node_modules/.bin:$HOME/.cargo/bin:$PATH"

echo "== native tests (release: the verifier trains real models) =="
cargo test --release --workspace

echo "== browser end-to-end tests =="
bash tests/e2e.sh
