//! The presets of published Hugging Face configs as specs, built at compile time (issue 23, load
//! times): the core's importer runs here, natively, on each preset's `config.json`
//! (`vramcalc_core::import::preset`), and the app and the embed card deserialise its output
//! (`src/presets.rs`) instead of linking the importer for a preset link. The importer (about a
//! seventh of the app's code) is then only needed where a user's own config is read: a hub id or
//! a pasted `config.json`. `src/presets.rs`'s test checks each spec equals the importer's.
use std::fmt::Write;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    // The app's wasm keeps its relocations: `tools/wasm-split` reads its call graph from them to
    // cut the lazily loaded views (`src/split.rs`) into files of their own.
    if std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() == Ok("wasm32") {
        println!("cargo:rustc-link-arg-bin=vramcalc-web=--emit-relocs");
    }
    let mut out = String::from("/// Each published config's preset as the importer builds it (compact JSON), by id.\n");
    out.push_str("pub fn spec_json(id: &str) -> Option<&'static str> {\n    Some(match id {\n");
    for p in vramcalc_core::presets::list() {
        if vramcalc_core::presets::hf_config(p.id).is_none() {
            continue;
        }
        let spec = vramcalc_core::import::preset(p.id).unwrap_or_else(|e| panic!("preset {}: {e}", p.id));
        let json = serde_json::to_string(&spec).expect("a spec serialises");
        writeln!(out, "        {:?} => {:?},", p.id, json).unwrap();
    }
    out.push_str("        _ => return None,\n    })\n}\n");
    let dir = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR");
    std::fs::write(format!("{dir}/preset_specs.rs"), out).expect("OUT_DIR is writable");
}
