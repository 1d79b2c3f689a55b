//! Issue 25's dense decoders: `dense_more_counts.json` (`tools/hf_param_counts.py --seed 27
//! --per-type 4 --full-dict --types ernie4_5 hunyuan_v1_dense cohere2 nemotron exaone4`: each class at its library
//! defaults, as causal LM and bare model, plus 4 random valid configs each, as
//! `to_json_string(use_diff=False)` writes them) imports as the class built, with exactly
//! `sum(p.numel() for p in model.parameters())` of transformers 5.24 on the meta device.

#[path = "common/hf.rs"]
mod hf;
use hf::{import_err, params};
use vramcalc_core::import::hf::from_config_json;
use vramcalc_core::ModelSpec;

fn import(text: &str) -> ModelSpec {
    from_config_json(text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// The `model_type`s `dense_more_counts.json` covers.
const TYPES: &[&str] = &["ernie4_5", "hunyuan_v1_dense", "cohere2", "nemotron", "exaone4"];

#[test]
fn dense_decoders_have_pytorch_parameter_counts() {
    let all: serde_json::Value = serde_json::from_str(&hf::data("hf/dense_more_counts.json")).unwrap();
    let all = all.as_object().unwrap();
    assert_eq!(all.len(), TYPES.len() * 6);
    for t in TYPES {
        assert!(all.contains_key(&format!("{t}-default")), "{t}");
    }
    for (name, want) in all {
        let spec = import(&want["config"].to_string());
        assert_eq!(spec.name.as_deref(), want["architecture"].as_str(), "{name}");
        assert_eq!(params(&spec), want["params"].as_u64().unwrap(), "{name}");
    }
}

#[test]
fn settings_transformers_cannot_build_are_refused() {
    let m = import_err(r#"{"model_type": "hunyuan_v1_dense", "hidden_size": 64, "num_attention_heads": 4}"#);
    assert!(m.contains("head_dim"), "{m}");
    let m = import_err(r#"{"model_type": "nemotron", "hidden_size": 64, "num_attention_heads": 4}"#);
    assert!(m.contains("num_key_value_heads"), "{m}");
}
