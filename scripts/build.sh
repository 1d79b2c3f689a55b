#!/usr/bin/env bash
# Builds the static site into dist/: the app, the embed page and the lazily loaded module, with
# relative URLs so the folder works at any path (docs/deploy.md). Sets up what is missing first.
# SKIP_SETUP=1 skips the setup check (the test scripts ran it already).
set -euo pipefail
cd "$(dirname "$0")/.."
[ "${SKIP_SETUP:-0}" = 1 ] || bash scripts/setup.sh
export PATH="$PWD/node_modules/.bin:${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
export TRUNK_SKIP_VERSION_CHECK=true
source scripts/wasm-env.sh
# --offline: Trunk must use the pinned tools on PATH, never download its own; setup.sh has
# fetched every crate the build compiles.
exec env "${VRAMCALC_WASM_ENV[@]}" trunk build --release --offline "$@"
