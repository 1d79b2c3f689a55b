//! The encoder and vision importers of issue 25: every class in
//! `tests/data/hf/encoder_counts.json` (`tools/hf_encoder_counts.py`: transformers 5.24 on the
//! meta device, the library defaults and random small configs) imports as that class with
//! exactly `sum(p.numel() for p in model.parameters())`.

use vramcalc_core::import::hf::from_config_json;

#[path = "common/hf.rs"]
mod hf;
use hf::params;

#[test]
fn encoder_classes_have_pytorch_parameter_counts() {
    let all: serde_json::Value = serde_json::from_str(&hf::data("hf/encoder_counts.json")).unwrap();
    let all = all.as_object().unwrap();
    for t in ["xlm-roberta", "electra", "bart"] {
        assert!(all.contains_key(&format!("{t}-default")) && all.contains_key(&format!("{t}-base")), "{t}");
    }
    for (name, want) in all {
        let text = want["config"].to_string();
        let spec = from_config_json(&text).unwrap_or_else(|e| panic!("{name}: {e}\n{text}"));
        assert_eq!(spec.name.as_deref(), want["architecture"].as_str(), "{name}");
        assert_eq!(params(&spec), want["params"].as_u64().unwrap(), "{name}");
    }
}
