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
    pub kv_prefill: u64,
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
            kv_prefill: r["kv_cache_bytes_after_prefill"].as_u64().unwrap(),
        }
    }).collect()
}

/// The records of `text` of one family (labelled `<model_type>-small …`); there must be `n`.
pub fn family(text: &str, model_type: &str, n: usize) -> Vec<Record> {
    let recs: Vec<Record> = records(text).into_iter().filter(|r| r.label.starts_with(&format!("{model_type}-small "))).collect();
    assert_eq!(recs.len(), n, "{model_type}");
    recs
}

/// Checks every record: the peak and the prefill and decode peaks within `max_err`, the cache
/// after the prefill and at the end exact (0.1 %). Returns the median absolute error of the peak
/// and prints a table.
pub fn check(recs: &[Record], max_err: f64) -> f64 {
    let mut errs = Vec::new();
    let mut failures = Vec::new();
    println!("{:<52} {:>13} {:>8} {:>8} {:>8} {:>8}", "record", "measured", "peak", "prefill", "decode", "kv end");
    for r in recs {
        let e: vramcalc_core::Estimate = vramcalc_core::estimate(&r.spec, &r.config).unwrap();
        let g = e.generation.as_ref().unwrap();
        let (p, pf, d) = (rel(e.peak_bytes, r.peak), rel(g.prefill_peak_bytes, r.prefill), rel(g.decode_peak_bytes, r.decode));
        let kv = rel(g.kv_cache_bytes, r.kv_end);
        println!("{:<52} {:>13} {:>+7.2}% {:>+7.2}% {:>+7.2}% {:>+7.2}%", r.label, r.peak, p * 100.0, pf * 100.0, d * 100.0, kv * 100.0);
        if p.abs() > max_err || pf.abs() > max_err || d.abs() > max_err {
            failures.push(format!("{}: peak {:+.2} %, prefill {:+.2} %, decode {:+.2} %", r.label, p * 100.0, pf * 100.0, d * 100.0));
        }
        if kv.abs() > 0.001 {
            failures.push(format!("{}: KV cache at the end measured {} estimated {}", r.label, r.kv_end, g.kv_cache_bytes));
        }
        if rel(g.kv_cache_bytes_after_prefill, r.kv_prefill).abs() > 0.001 {
            failures.push(format!("{}: KV cache after the prefill measured {} estimated {}", r.label, r.kv_prefill, g.kv_cache_bytes_after_prefill));
        }
        errs.push(p.abs());
    }
    errs.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let median = errs[errs.len() / 2];
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
    median
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
