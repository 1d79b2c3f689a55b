//! Adapter from the generation records of `shared/reference/llm/` (`kvcache.jsonl`, and
//! `tests/data/gpt2_generate.jsonl` measured the same way) to specs and configs. Shared by
//! `tests/generate.rs` and `examples/generate_table.rs`.
#![allow(dead_code)]

use serde_json::Value;
use vramcalc_core::spec::ModelSpec;
use vramcalc_core::{AttentionImpl, AutocastDevice, Device, GenerateConfig, KvCacheKind, Mode, Precision, TrainConfig};

pub struct Record {
    pub label: String,
    pub spec: ModelSpec,
    pub config: TrainConfig,
    pub peak: u64,
    pub prefill: u64,
    pub decode: u64,
    pub kv_end: u64,
}

pub fn spec_of(r: &Value) -> ModelSpec {
    // records of tools/measure_generate_hf.py carry their whole config
    if let Some(c) = r.get("hf_config_file").and_then(Value::as_object) {
        return vramcalc_core::import::hf::from_config(c).unwrap();
    }
    let mut config = r["model_extra"]["hf_config"].as_object().expect("model_extra.hf_config").clone();
    let arch = if config["model_type"] == "gpt2" { "GPT2LMHeadModel" } else { "LlamaForCausalLM" };
    config.insert("architectures".into(), serde_json::json!([arch]));
    vramcalc_core::import::hf::from_config(&config).unwrap()
}

pub fn records(text: &str) -> Vec<Record> {
    text.lines().filter(|l| !l.trim().is_empty()).map(|l| {
        let r: Value = serde_json::from_str(l).unwrap();
        let g = &r["generation"];
        let precision = match r["precision"].as_str().unwrap() {
            "fp32" => Precision::Fp32,
            "fp16" => Precision::Fp16,
            "bf16" => Precision::Bf16,
            p => panic!("precision {p}"),
        };
        let cache = KvCacheKind::parse(g["cache"].as_str().unwrap()).unwrap();
        let generate = GenerateConfig {
            prompt_len: g["prompt_len"].as_u64(),
            new_tokens: g["new_tokens"].as_u64().unwrap(),
            cache,
            logits_to_keep: g["logits_to_keep"].as_u64().unwrap(),
            kv_dtype: None,
        };
        let config = TrainConfig {
            batch: r["batch"].as_u64().unwrap(),
            precision,
            autocast_device: AutocastDevice::Cpu,
            device: Device::Cpu,
            mode: Mode::Generate,
            attention: if r["attn_impl"] == "eager" { AttentionImpl::Eager } else { AttentionImpl::Sdpa },
            generate,
            ..TrainConfig::default()
        };
        let label = format!(
            "{} {} b{} {} P{} G{} {} ltk{}",
            r["model"].as_str().unwrap(), r["precision"].as_str().unwrap(), config.batch, config.attention,
            generate.prompt_len.unwrap(), generate.new_tokens, cache, generate.logits_to_keep
        );
        let phase = &r["phase_peak_bytes"];
        Record {
            label,
            spec: spec_of(&r),
            config,
            peak: r["peak_bytes"].as_u64().unwrap(),
            prefill: phase["prefill"].as_u64().unwrap(),
            decode: phase["decode"].as_u64().unwrap(),
            kv_end: r["kv_cache_bytes_end"].as_u64().unwrap(),
        }
    }).collect()
}

pub fn rel(est: u64, meas: u64) -> f64 {
    (est as f64 - meas as f64) / meas as f64
}

/// The records of both files.
pub fn all() -> Vec<Record> {
    let mut r = records(include_str!("../data/kvcache.jsonl"));
    r.extend(records(include_str!("../data/gpt2_generate.jsonl")));
    r
}
