#!/usr/bin/env bash
# Runs every test: native workspace tests (core, CLI, verifier on CPU, web app state and charts),
# the reference-accuracy table check, and the browser end-to-end tests in headless Chromium.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# Headless Chromium (Debian's) for the browser tests, and a CJK font for the 中文 screenshots
# (Noto Sans CJK SC, the stylesheet's Linux fallback; tests/a11y.test.mjs checks it renders).
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
  as_root apt-get update
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y chromium chromium-driver
fi
if ! fc-list 2>/dev/null | grep -q "Noto Sans CJK SC"; then
  as_root apt-get update
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y fonts-noto-cjk
fi
export PATH="$PWD/node_modules/.bin:${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"

# Warnings are errors here (RUSTFLAGS for the native build only: the wasm build keeps its own flags).
echo "== native tests (release: the verifier trains real models) =="
RUSTFLAGS="-D warnings" cargo test --release --workspace
# The app's own tests once more without the CLI's and verifier's features (no candle): the core
# as the app builds it, for the browser too (every feature but candle).
RUSTFLAGS="-D warnings" cargo test --release -p vramcalc-web
# The core without its default features (no candle, as the app builds it): the spec and the
# share-link codec.
RUSTFLAGS="-D warnings" cargo test --release -p vramcalc-core --no-default-features --lib -- spec:: share::

echo "== the README's generated sections match what their commands print =="
RUSTFLAGS="-D warnings" python3 tools/readme.py --check

echo "== browser end-to-end tests =="
bash tests/e2e.sh
