#!/usr/bin/env bash
# Installs what building and testing vramcalc needs, skipping whatever is already there.
# Everything comes from crates.io, npm, Debian or rustup's own server (like the wasm32 target):
# see ../shared/TOOLCHAIN.md.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"

rustup target list --installed | grep -q '^wasm32-unknown-unknown$' || rustup target add wasm32-unknown-unknown
# The pinned nightly and its std sources build the smaller web bundles (scripts/wasm-env.sh).
if ! rustup run nightly-2026-05-20 rustc --version >/dev/null 2>&1 ||
  ! rustup component list --toolchain nightly-2026-05-20 --installed | grep -q '^rust-src'; then
  rustup toolchain install nightly-2026-05-20 --profile minimal --component rust-src
fi

# Trunk 0.21.14 (0.22 needs a newer rustc); ~15 min to build the first time.
if ! trunk --version 2>/dev/null | grep -q '0\.21\.14'; then
  cargo install trunk --locked --version 0.21.14
fi
# wasm-bindgen CLI must equal the `wasm-bindgen` pinned in Cargo.lock; no --locked (see TOOLCHAIN.md).
if ! wasm-bindgen --version 2>/dev/null | grep -q '0\.2\.130'; then
  cargo install wasm-bindgen-cli --version 0.2.130
fi
# wasm-opt (binaryen@132) and playwright-core, pinned in package-lock.json.
if [ ! -x node_modules/.bin/wasm-opt ] || [ ! -d node_modules/playwright-core ]; then
  npm ci --no-audit --no-fund
fi
