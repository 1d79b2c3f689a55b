#!/usr/bin/env bash
# Sets up what is missing, then builds and serves the app on http://127.0.0.1:8080/ (PORT=… to
# change; DEV=1 for `trunk serve` with live reload). The first run on a fresh machine compiles
# Trunk and wasm-bindgen-cli from source, then the app: about 20 min on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f dist/index.html ] || echo "vramcalc: first run: installing the build tools and compiling the app (about 20 min on 2 cores; later runs take seconds)" >&2
bash scripts/setup.sh
exec bash tests/serve.sh
