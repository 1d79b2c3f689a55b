//! Diffusion pipelines: parameter counts of every preset component against diffusers and
//! transformers (`tools/diffusion_param_counts.py`, data in `tests/data/diffusion_params.json`),
//! and the pipeline's stages per offload mode.

use vramcalc_core::diffusion::pipeline::component_params;
use vramcalc_core::diffusion::{presets, Component};

fn counts() -> serde_json::Value {
    serde_json::from_str(include_str!("data/diffusion_params.json")).unwrap()
}

#[test]
fn every_preset_component_has_its_exact_parameter_count() {
    let counts = counts();
    let mut bad = Vec::new();
    for (id, _, _, comps) in presets::PIPELINES {
        for (name, text) in comps.iter() {
            let key = format!("{id}/{name}");
            let want = counts[&key]["params"].as_u64().unwrap_or_else(|| panic!("{key} not measured"));
            let c = Component::from_json(text).unwrap_or_else(|e| panic!("{key}: {e}"));
            let got = component_params(&c).unwrap_or_else(|e| panic!("{key}: {e}"));
            if got != want {
                bad.push(format!("{key}: {got} != {want} ({:+})", got as i64 - want as i64));
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}


