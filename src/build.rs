//! Build script: feature-detects core APIs that are still being written, so the app builds
//! against the core as it is today and picks them up as soon as they land.
//! `has_hf_import`: `vramcalc_core::import::hf::from_config_json` exists.

use std::path::Path;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(has_hf_import)");
    let hf = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/core/src/import/hf.rs");
    println!("cargo::rerun-if-changed={}", hf.display());
    if let Ok(text) = std::fs::read_to_string(&hf) {
        if text.contains("pub fn from_config_json") {
            println!("cargo::rustc-cfg=has_hf_import");
        }
    }
}
