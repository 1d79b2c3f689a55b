#!/usr/bin/env bash
# Installs what building and testing vramcalc needs, skipping whatever is already there, and
# downloads every crate the offline builds use. Everything comes from crates.io, npm, Debian or
# rustup's own server (like the wasm32 target): see docs/deploy.md and ../shared/TOOLCHAIN.md.
set -euo pipefail
cd "$(dirname "$0")/.."
CARGO_BIN="${CARGO_HOME:-$HOME/.cargo}/bin"
export PATH="$CARGO_BIN:$PATH"
source scripts/wasm-env.sh --quiet   # VRAMCALC_WASM_TOOLCHAIN, vramcalc_wasm_toolchain_ready

rustup target list --installed | grep -q '^wasm32-unknown-unknown$' || rustup target add wasm32-unknown-unknown
# The pinned nightly and its std sources build the smaller web bundles (scripts/wasm-env.sh).
# If it cannot be installed, the web build falls back to stable Rust (a larger bundle; see there).
if ! vramcalc_wasm_toolchain_ready; then
  rustup toolchain install "$VRAMCALC_WASM_TOOLCHAIN" --profile minimal --component rust-src ||
    echo "setup: could not install $VRAMCALC_WASM_TOOLCHAIN; the web app will build with stable Rust" >&2
fi

# Trunk and wasm-bindgen-cli are built from crates.io source (no prebuilt binaries can be fetched
# here). Built for speed of *building*: they only orchestrate and rewrite one wasm file, so we
# drop Trunk's fat LTO with one codegen unit (a long single-threaded link) and both tools' TLS
# stacks (rustls + ring's C code, used only to download tools, which we never do: Trunk runs with
# --offline). One target directory serves both installs and keeps finished crates if a first
# run is interrupted.
tools_missing=()
trunk --version 2>/dev/null | grep -q '0\.21\.14' || tools_missing+=(trunk)
wasm-bindgen --version 2>/dev/null | grep -q '0\.2\.130' || tools_missing+=(wasm-bindgen-cli)
if [ ${#tools_missing[@]} -gt 0 ]; then
  echo "setup: building ${tools_missing[*]} from source: first run only, about 12 min on 2 cores" >&2
  export CARGO_TARGET_DIR="$PWD/target/tools" CARGO_PROFILE_RELEASE_LTO=false \
    CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 CARGO_PROFILE_RELEASE_PANIC=unwind
  # Trunk 0.21.14: 0.22 needs a newer rustc than stable here.
  if [[ " ${tools_missing[*]} " == *" trunk "* ]]; then
    cargo install trunk --locked --version 0.21.14 --no-default-features
  fi
  # Must equal the `wasm-bindgen` pinned in Cargo.lock; no --locked (see ../shared/TOOLCHAIN.md).
  if [[ " ${tools_missing[*]} " == *" wasm-bindgen-cli "* ]]; then
    cargo install wasm-bindgen-cli --version 0.2.130 --no-default-features
  fi
  unset CARGO_TARGET_DIR CARGO_PROFILE_RELEASE_LTO CARGO_PROFILE_RELEASE_CODEGEN_UNITS CARGO_PROFILE_RELEASE_PANIC
fi
# wasm-opt (binaryen@132) and playwright-core, pinned in package-lock.json.
if [ ! -x node_modules/.bin/wasm-opt ] || [ ! -d node_modules/playwright-core ]; then
  npm ci --no-audit --no-fund
fi

# Trunk passes --offline to cargo, so every crate the wasm build compiles must be in the registry
# cache first: the workspace's (Cargo.lock) and, with -Zbuild-std, the standard library's own
# (its lockfile ships in rust-src). Then prove it: an offline fetch of both fails here, naming the
# crate, if any is missing — instead of the first `trunk build` failing on a newcomer's machine.
cargo fetch --locked --quiet
cargo fetch --locked --offline --quiet
# The build's wasm splitter (tools/wasm-split, its own lockfile), built offline by scripts/build.sh.
cargo fetch --locked --quiet --manifest-path tools/wasm-split/Cargo.toml
cargo fetch --locked --offline --quiet --manifest-path tools/wasm-split/Cargo.toml
if vramcalc_wasm_toolchain_ready; then
  std_manifest="$(rustup run "$VRAMCALC_WASM_TOOLCHAIN" rustc --print sysroot)/lib/rustlib/src/rust/library/Cargo.toml"
  rustup run "$VRAMCALC_WASM_TOOLCHAIN" cargo fetch --locked --quiet --manifest-path "$std_manifest"
  rustup run "$VRAMCALC_WASM_TOOLCHAIN" cargo fetch --locked --offline --quiet --manifest-path "$std_manifest"
fi
