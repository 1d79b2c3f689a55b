#!/usr/bin/env bash
# Build (if needed) and serve the web app on http://127.0.0.1:8080/ — the first command to run.
# Uses the release build served by Python (no live reload); set DEV=1 for `trunk serve` with
# live reload instead. Tools: see ../shared/TOOLCHAIN.md (trunk 0.21.14, wasm-bindgen 0.2.130,
# npm binaryen@132 from `npm ci`).
set -euo pipefail
cd "$(dirname "$0")/.."
PORT="${PORT:-8080}"
if [ ! -d node_modules ]; then
  if [ -f package-lock.json ]; then npm ci --no-audit --no-fund; else npm install --no-audit --no-fund; fi
fi
export PATH="$PWD/node_modules/.bin:${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
export TRUNK_SKIP_VERSION_CHECK=true
source scripts/wasm-env.sh
if [ "${DEV:-0}" = 1 ]; then
  exec env "${VRAMCALC_WASM_ENV[@]}" trunk serve --offline --port "$PORT"
fi
# Rebuild when any source is newer than the bundle.
if [ ! -f dist/index.html ] || [ -n "$(find src crates/core/src index.html static Cargo.toml Trunk.toml scripts/wasm-env.sh -newer dist/index.html -print -quit)" ]; then
  SKIP_SETUP=1 bash scripts/build.sh
fi
echo "vramcalc: http://127.0.0.1:$PORT/"
exec python3 -m http.server --bind 127.0.0.1 "$PORT" --directory dist
