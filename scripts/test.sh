#!/usr/bin/env bash
# Runs every test: native workspace tests (core, CLI, verifier on CPU, web app state and charts),
# the reference-accuracy table check, and the browser end-to-end tests in headless Chromium.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each phase's start, with the seconds since this script began: CI's budget is 40 min on 2 cores.
phase() { echo "== $* == (at ${SECONDS} s)"; }
trap 'echo "== done == (at ${SECONDS} s)"' EXIT
phase setup
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
phase "native tests (release: the verifier trains real models)"
RUSTFLAGS="-D warnings" cargo test --release --workspace
# The app's own tests once more without the CLI's and verifier's features (no candle): the core
# as the app builds it, for the browser too (every feature but candle).
phase "the app's tests without candle"
RUSTFLAGS="-D warnings" cargo test --release -p vramcalc-web
# The core without its default features (no candle, as the app builds it): the spec and the
# share-link codec.
phase "the core without its default features"
RUSTFLAGS="-D warnings" cargo test --release -p vramcalc-core --no-default-features --lib -- spec:: share::

phase "the build's wasm splitter (tools/wasm-split; scripts/build.sh reuses its build)"
cargo test --release --offline --locked --quiet --manifest-path tools/wasm-split/Cargo.toml --target-dir target/tools
phase "the README's generated sections match what their commands print"
RUSTFLAGS="-D warnings" python3 tools/readme.py --check

phase "browser end-to-end tests"
bash tests/e2e.sh
