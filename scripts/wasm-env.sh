# Sourced by the scripts that run Trunk (tests/serve.sh, tests/e2e.sh) and by scripts/setup.sh:
# how the web bundles are compiled. Sets VRAMCALC_WASM_ENV, an array of VAR=value for
# `env "${VRAMCALC_WASM_ENV[@]}" trunk …` (only Trunk gets them: the native CLI the browser tests
# call stays on stable). With the pinned nightly below (and its rust-src), the standard library is
# rebuilt with panic=immediate-abort: no panic messages, locations or formatting for them in the
# wasm, about 7 % off every bundle (measured: 354,198 -> 328,679 B gzipped for the app). A panic
# was already fatal in the browser; the code keeps avoiding them. Without that toolchain the build
# uses stable Rust and a larger bundle (a note says so, unless sourced with --quiet).
# `bash scripts/setup.sh` installs it, and fetches the std crates that -Zbuild-std compiles.
VRAMCALC_WASM_TOOLCHAIN=nightly-2026-05-20
vramcalc_wasm_toolchain_ready() {
  rustup run "$VRAMCALC_WASM_TOOLCHAIN" rustc --version >/dev/null 2>&1 &&
    [ -d "$(rustup run "$VRAMCALC_WASM_TOOLCHAIN" rustc --print sysroot)/lib/rustlib/src/rust/library" ]
}
if vramcalc_wasm_toolchain_ready; then
  VRAMCALC_WASM_ENV=(
    RUSTUP_TOOLCHAIN="$VRAMCALC_WASM_TOOLCHAIN"
    CARGO_UNSTABLE_BUILD_STD=std,panic_abort
    CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUSTFLAGS="-Zunstable-options -Cpanic=immediate-abort"
  )
else
  VRAMCALC_WASM_ENV=()
  [ "${1:-}" = --quiet ] ||
    echo "note: $VRAMCALC_WASM_TOOLCHAIN with rust-src is not installed; building the web app with stable Rust (a larger bundle). bash scripts/setup.sh installs it." >&2
fi
