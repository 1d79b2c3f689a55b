#!/usr/bin/env bash
# Builds the static site into dist/: the app and the embed page, with
# relative URLs so the folder works at any path (docs/deploy.md). Sets up what is missing first.
# SKIP_SETUP=1 skips the setup check (the test scripts ran it already).
set -euo pipefail
cd "$(dirname "$0")/.."
[ "${SKIP_SETUP:-0}" = 1 ] || bash scripts/setup.sh
export PATH="$PWD/node_modules/.bin:${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
export TRUNK_SKIP_VERSION_CHECK=true
source scripts/wasm-env.sh
# Trunk builds its four Rust assets (index.html's links) as cargo processes at once on one
# target directory. Under load one of them once failed with exit 101 and no message while the
# others compiled the same std and host crates; concurrent cross builds sharing host artifacts are
# a known source of such failures (rust-lang/cargo#5968). Built one after another first, with the
# arguments Trunk passes, Trunk's own cargo calls find everything fresh and only package.
for asset in "Cargo.toml --bin vramcalc-web" "Cargo.toml --bin vramcalc-embed" "Cargo.toml --bin vramcalc-card" "Cargo.toml --bin vramcalc-worker"; do
  # shellcheck disable=SC2086 # the manifest and its --bin are two words on purpose
  env "${VRAMCALC_WASM_ENV[@]}" cargo build --target=wasm32-unknown-unknown --profile wasm-release --offline --manifest-path $asset
done
# --offline: Trunk must use the pinned tools on PATH, never download its own; setup.sh has
# fetched every crate the build compiles.
env "${VRAMCALC_WASM_ENV[@]}" trunk build --release --offline "$@"
# The app's views that no link's first answer needs, cut out of its wasm into files fetched on
# first use (src/split.rs; tools/wasm-split, which also runs wasm-opt on every part: Trunk's
# wasm-opt is off for this bundle, as the splitter needs wasm-bindgen's output as it is).
cargo build --release --offline --locked --quiet --manifest-path tools/wasm-split/Cargo.toml --target-dir target/tools
app_wasm=(dist/vramcalc-web-*_bg.wasm)
[ ${#app_wasm[@]} = 1 ] || { echo "build: expected one dist/vramcalc-web-*_bg.wasm, found ${app_wasm[*]}" >&2; exit 1; }
target/tools/release/vramcalc-wasm-split --original target/wasm32-unknown-unknown/wasm-release/vramcalc-web.wasm \
  --bindgened "${app_wasm[0]}" --wasm "${app_wasm[0]}" --glue "${app_wasm[0]%_bg.wasm}.js" --wasm-opt wasm-opt -- -Oz
# The first screen as HTML (src/bin/prerender.rs): the default page, rendered natively (stable
# Rust, debug profile) into dist/index.html, so the first chart shows before the wasm arrives.
cargo run --offline --quiet --bin vramcalc-prerender -- dist/index.html
