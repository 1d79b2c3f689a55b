//! The Qwen2.5-VL records of `data/hf/qwen_vl_traces.jsonl` (`tools/trace_qwen_vl.sh`) and the
//! estimate of each: shared by `qwen_vl_windows.rs` and `family_agreement.rs`.
#![allow(dead_code)] // each test file uses a part

use serde_json::Value;
use vramcalc_core::spec::ModelSpec;
use vramcalc_core::{AttentionImpl, GenerateConfig, Mode, OptimizerKind, Precision, TrainConfig};

pub fn records() -> Vec<Value> {
    include_str!("../data/hf/qwen_vl_traces.jsonl").lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// The spec and config a record is estimated with, and its label.
fn setup(r: &Value) -> (ModelSpec, TrainConfig, String) {
    let image = (r["image"][0].as_u64().unwrap(), r["image"][1].as_u64().unwrap());
    let spec = vramcalc_core::import::hf::from_config_with_image(r["config"].as_object().unwrap(), image).unwrap();
    let generate = GenerateConfig { new_tokens: r["new_tokens"].as_u64().unwrap_or(1), ..GenerateConfig::default() };
    let c = TrainConfig {
        batch: r["batch"].as_u64().unwrap(),
        seq_len: r["seq_len"].as_u64(),
        attention: if r["attention"] == "sdpa" { AttentionImpl::Sdpa } else { AttentionImpl::Eager },
        device: vramcalc_core::Device::Cpu,
        precision: Precision::Fp32,
        optimizer: OptimizerKind::Sgd,
        mode: match r["mode"].as_str() {
            Some("train") => Mode::Train,
            Some("generate") => Mode::Generate,
            _ => Mode::Infer,
        },
        generate,
        ..TrainConfig::default()
    };
    let label = format!("{} {}x{} {}", r["mode"].as_str().unwrap(), image.0, image.1, r["attention"].as_str().unwrap());
    (spec, c, label)
}

fn rel(est: u64, measured: u64) -> f64 {
    (est as f64 - measured as f64) / measured as f64
}

/// `(record, estimated, measured, relative error)` of each record.
pub fn compare() -> Vec<(String, u64, u64, f64)> {
    records()
        .iter()
        .map(|r| {
            let (spec, c, label) = setup(r);
            let est = vramcalc_core::estimate(&spec, &c).unwrap().peak_bytes;
            let measured = r["measured_peak_bytes"].as_u64().unwrap();
            (label, est, measured, rel(est, measured))
        })
        .collect()
}

/// The phases and the cache of each `generate()` record: `(record, [(what, relative error)])`
/// for the prefill and decode peaks and the cache after the prefill and at the end.
pub fn compare_generate() -> Vec<(String, Vec<(&'static str, f64)>)> {
    records()
        .iter()
        .filter(|r| r["mode"] == "generate")
        .map(|r| {
            let (spec, c, label) = setup(r);
            let e = vramcalc_core::estimate(&spec, &c).unwrap();
            let g = e.generation.unwrap();
            let m = |k: &str| r[k].as_u64().unwrap_or_else(|| panic!("{label}: {k}"));
            let errs = vec![
                ("prefill", rel(g.prefill_peak_bytes, m("prefill_peak_bytes"))),
                ("decode", rel(g.decode_peak_bytes, m("decode_peak_bytes"))),
                ("cache after prefill", rel(g.kv_cache_bytes_after_prefill, m("kv_cache_bytes_after_prefill"))),
                ("cache at the end", rel(g.kv_cache_bytes, m("kv_cache_bytes_end"))),
            ];
            (label, errs)
        })
        .collect()
}
