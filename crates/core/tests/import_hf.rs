//! The dense Hugging Face families (issue 12): every config in `tests/data/hf/` (copied from
//! `../shared/reference/llm/hf/`, PyTorch's counts from transformers 5.24 on the meta device in
//! `params.json`) imports with exactly `sum(p.numel() for p in model.parameters())`.

use vramcalc_core::import::hf::from_config_json;
use vramcalc_core::{Error, ModelSpec, Prepared, TrainConfig};

/// The `params.json` entries this importer covers (the MoE/MLA, T5, Whisper and CLIP ones are
/// other importers' work).
const COVERED: &[&str] = &["distilbert", "falcon", "gemma2", "gpt_neox", "mistral", "opt", "phi3", "qwen2", "qwen3", "roberta"];

fn data(name: &str) -> String {
    let path = format!("{}/tests/data/hf/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn estimate(spec: &ModelSpec) -> vramcalc_core::Estimate {
    let cfg = TrainConfig { batch: 1, seq_len: Some(8), ..TrainConfig::default() };
    Prepared::new(spec, &cfg).unwrap_or_else(|e| panic!("{:?}: {e}", spec.name)).estimate()
}

fn params(spec: &ModelSpec) -> u64 {
    estimate(spec).params
}

fn import(text: &str) -> ModelSpec {
    from_config_json(text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn import_err(text: &str) -> String {
    match from_config_json(text) {
        Err(Error::Import(m)) => m,
        other => panic!("expected an import error for {text}, got {other:?}"),
    }
}

#[test]
fn reference_configs_have_pytorch_parameter_counts() {
    let expected: serde_json::Value = serde_json::from_str(&data("params.json")).unwrap();
    for model in COVERED {
        let want = &expected[model];
        let spec = import(&data(&format!("{model}.config.json")));
        assert_eq!(spec.name.as_deref(), want["architecture"].as_str(), "{model}");
        assert_eq!(params(&spec), want["params"].as_u64().unwrap(), "{model}");
        assert_eq!(ModelSpec::from_json(&spec.to_json_pretty()).unwrap(), spec, "{model}: JSON round trip");
    }
}

#[test]
fn counts_spelled_out() {
    // the same numbers as params.json, to read without the data file
    for (model, n) in [
        ("distilbert", 66_955_010u64),
        ("falcon", 6_921_720_704),
        ("gemma2", 2_614_341_888),
        ("gpt_neox", 20_554_567_680),
        ("mistral", 7_241_732_096),
        ("opt", 125_239_296),
        ("phi3", 3_821_079_552),
        ("qwen2", 12_049_846_272),
        ("qwen3", 12_049_461_248),
        ("roberta", 124_646_402),
    ] {
        assert_eq!(params(&import(&data(&format!("{model}.config.json")))), n, "{model}");
    }
}

/// `transformers_counts.json` (from `tools/hf_param_counts.py`: every covered `model_type` at its
/// library defaults, as causal LM or classifier and as bare model, plus 4 random valid configs
/// each with random sizes, K/V heads, ties, biases, parallel or sequential blocks, sliding
/// windows, soft-capping, OPT projections and post-norm): all exact.
#[test]
fn transformers_counts_match_exactly() {
    let all: serde_json::Value = serde_json::from_str(&data("transformers_counts.json")).unwrap();
    let all = all.as_object().unwrap();
    assert_eq!(all.len(), 14 * 6);
    for (name, want) in all {
        let spec = import(&want["config"].to_string());
        assert_eq!(spec.name.as_deref(), want["architecture"].as_str(), "{name}");
        assert_eq!(params(&spec), want["params"].as_u64().unwrap(), "{name}");
    }
}
