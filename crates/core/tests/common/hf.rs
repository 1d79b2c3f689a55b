//! What the Hugging Face importer tests share: their data files, the parameter count of an
//! imported spec, the importer's error text, and the check against PyTorch's exact counts.
#![allow(dead_code)] // each test file uses a part

use vramcalc_core::import::hf::from_config_json;
use vramcalc_core::{Error, ModelSpec, Prepared, TrainConfig};

/// A file of `crates/core/tests/data/` (`hf/…` for the per-architecture configs).
pub fn data(name: &str) -> String {
    let path = format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The estimate of a short training step (the parameter count does not depend on it); an image
/// model's prompt (a vision-language model's) keeps its length, which holds the image tokens.
pub fn estimate(spec: &ModelSpec) -> vramcalc_core::Estimate {
    let cfg = TrainConfig { batch: 1, seq_len: spec.is_sequence_input().then_some(8), ..TrainConfig::default() };
    Prepared::new(spec, &cfg).unwrap_or_else(|e| panic!("{:?}: {e}", spec.name)).estimate()
}

pub fn params(spec: &ModelSpec) -> u64 {
    estimate(spec).params
}

/// The importer's message for a config it must refuse.
pub fn import_err(text: &str) -> String {
    match from_config_json(text) {
        Err(Error::Import(m)) => m,
        other => panic!("expected an import error for {text}, got {other:?}"),
    }
}

/// Each of `models` (`hf/<model>.config.json`) imports as the class and with the exact parameter
/// count that `hf/params.json` measured with transformers, and round-trips through JSON.
pub fn assert_reference_counts(models: &[&str]) {
    let expected: serde_json::Value = serde_json::from_str(&data("hf/params.json")).unwrap();
    for model in models {
        let want = &expected[model];
        let spec = from_config_json(&data(&format!("hf/{model}.config.json"))).unwrap_or_else(|e| panic!("{model}: {e}"));
        assert_eq!(spec.name.as_deref(), want["architecture"].as_str(), "{model}");
        assert_eq!(params(&spec), want["params"].as_u64().unwrap(), "{model}");
        assert_eq!(ModelSpec::from_json(&spec.to_json_pretty()).unwrap(), spec, "{model}: JSON round trip");
    }
}

/// The estimate's error, in percent, against one record of `tools/trace_hf.py` (`config`,
/// `batch`, `seq_len`, `attention`, `dtype`, `measured_peak_bytes`): its training step with
/// `--optimizer sgd`.
pub fn trace_error(r: &serde_json::Value) -> f64 {
    use vramcalc_core::{AttentionImpl, OptimizerKind, Precision};
    let spec = from_config_json(&r["config"].to_string()).unwrap_or_else(|e| panic!("{e}"));
    let cfg = TrainConfig {
        batch: r["batch"].as_u64().unwrap(),
        seq_len: r["seq_len"].as_u64(),
        attention: if r["attention"] == "eager" { AttentionImpl::Eager } else { AttentionImpl::Sdpa },
        precision: match r["dtype"].as_str() {
            Some("bf16") => Precision::Bf16,
            Some("fp16") => Precision::Fp16,
            _ => Precision::Fp32,
        },
        optimizer: OptimizerKind::Sgd,
        ..TrainConfig::default()
    };
    let est = Prepared::new(&spec, &cfg).unwrap().estimate().peak_bytes as f64;
    let measured = r["measured_peak_bytes"].as_u64().unwrap() as f64;
    (est - measured) / measured * 100.0
}

/// Each record of `file` is within `tolerance(record)` percent of the measured peak
/// ([`trace_error`]); `expected` records in all.
pub fn assert_traces(file: &str, expected: usize, tolerance: impl Fn(&serde_json::Value) -> f64) {
    let text = data(file);
    let mut n = 0;
    for line in text.lines() {
        let r: serde_json::Value = serde_json::from_str(line).unwrap();
        let err = trace_error(&r);
        assert!(err.abs() <= tolerance(&r), "{} {}: {err:+.2} % against the measured {}", r["family"], r["attention"], r["measured_peak_bytes"]);
        n += 1;
    }
    assert_eq!(n, expected, "{file}");
}

/// The estimated cache bytes `(after the prefill, at the end)` of one `generate()` record of
/// `tools/measure_mllama_cache.py` (`config`, `batch`, `prompt_len`, `new_tokens`, `cache`, `dtype`).
pub fn generate_cache_bytes(r: &serde_json::Value) -> (u64, u64) {
    use vramcalc_core::{AutocastDevice, Device, GenerateConfig, KvCacheKind, Mode, Precision};
    let spec = from_config_json(&r["config"].to_string()).unwrap_or_else(|e| panic!("{e}"));
    let generate = GenerateConfig {
        prompt_len: r["prompt_len"].as_u64(),
        new_tokens: r["new_tokens"].as_u64().unwrap(),
        cache: KvCacheKind::parse(r["cache"].as_str().unwrap()).unwrap(),
        logits_to_keep: 1,
        kv_dtype: None,
    };
    let precision = if r["dtype"] == "bfloat16" { Precision::Bf16 } else { Precision::Fp32 };
    let cfg = TrainConfig {
        batch: r["batch"].as_u64().unwrap(),
        precision,
        autocast_device: AutocastDevice::Cpu,
        device: Device::Cpu,
        mode: Mode::Generate,
        generate,
        ..TrainConfig::default()
    };
    let est = Prepared::new(&spec, &cfg).unwrap_or_else(|e| panic!("{e}")).estimate();
    let g = est.generation.expect("a generation report");
    (g.kv_cache_bytes_after_prefill, g.kv_cache_bytes)
}
