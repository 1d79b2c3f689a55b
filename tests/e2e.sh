#!/usr/bin/env bash
# Browser end-to-end tests of the web app, against the release build served on 127.0.0.1.
# Idempotent: installs npm deps if missing, builds with Trunk (local wasm-bindgen 0.2.130 and
# npm binaryen@132 wasm-opt, no downloads), serves dist/, runs `node --test tests/`.
# Screenshots land in test-artifacts/.
#
# Needs: trunk 0.21.14 and wasm-bindgen 0.2.130 on PATH, the wasm32 target, node ≥ 20, python3,
# Chromium at /usr/bin/chromium (or $CHROMIUM). Set SKIP_BUILD=1 to reuse an existing dist/.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -d node_modules ]; then
  if [ -f package-lock.json ]; then npm ci --no-audit --no-fund; else npm install --no-audit --no-fund; fi
fi
export PATH="$PWD/node_modules/.bin:${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"

if [ "${SKIP_BUILD:-0}" != 1 ] || [ ! -f dist/index.html ]; then
  SKIP_SETUP=1 bash scripts/build.sh
fi

PORT="${E2E_PORT:-$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')}"
python3 -m http.server --bind 127.0.0.1 "$PORT" --directory dist >/dev/null 2>&1 &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null || true' EXIT
for _ in $(seq 50); do
  python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$PORT/')" 2>/dev/null && break
  sleep 0.1
done

mkdir -p test-artifacts
export VRAMCALC_URL="http://127.0.0.1:$PORT/"
node --test --test-concurrency=1 tests/
