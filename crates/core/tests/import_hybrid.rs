//! Issue 25's decoders with layers of more than one kind (Mamba, Mamba-2, Qwen3-Next, Llama 4's
//! text model): `hybrid_counts.json` (`tools/hf_param_counts.py --seed 26 --per-type 4
//! --full-dict --types mamba mamba2 qwen3_next llama4_text`: each class at its library defaults,
//! as causal LM and as bare model, plus 4 random valid configs each, written as
//! `to_json_string(use_diff=False)` does) imports as the class built with exactly
//! `sum(p.numel() for p in model.parameters())` of transformers 5.24 on the meta device.

#[path = "common/hf.rs"]
mod hf;
use hf::{import_err, params};
use vramcalc_core::import::hf::from_config_json;
use vramcalc_core::ModelSpec;

fn import(text: &str) -> ModelSpec {
    from_config_json(text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

#[test]
fn hybrid_decoders_have_pytorch_parameter_counts() {
    let all: serde_json::Value = serde_json::from_str(&hf::data("hf/hybrid_counts.json")).unwrap();
    let all = all.as_object().unwrap();
    assert_eq!(all.len(), 4 * 6);
    for (name, want) in all {
        let spec = import(&want["config"].to_string());
        assert_eq!(spec.name.as_deref(), want["architecture"].as_str(), "{name}");
        assert_eq!(params(&spec), want["params"].as_u64().unwrap(), "{name}");
        assert_eq!(ModelSpec::from_json(&spec.to_json_pretty()).unwrap(), spec, "{name}: JSON round trip");
    }
}

#[test]
fn unmodelled_layer_kinds_are_refused_by_name() {
    let m = import_err(r#"{"model_type": "qwen3_next", "num_hidden_layers": 2, "layer_types": ["linear_attention", "sliding_attention"]}"#);
    assert!(m.contains("layer_types") && m.contains("sliding_attention"), "{m}");
    let m = import_err(r#"{"model_type": "mamba2", "hidden_size": 64, "num_heads": 3, "head_dim": 16}"#);
    assert!(m.contains("num_heads × head_dim"), "{m}");
    let m = import_err(r#"{"model_type": "mamba", "hidden_act": "gelu"}"#);
    assert!(m.contains("hidden_act"), "{m}");
}
