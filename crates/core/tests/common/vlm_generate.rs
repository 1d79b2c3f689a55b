//! The `generate()` records of `data/generate_vlm2.jsonl` (`tools/measure_generate_vlm2.sh`:
//! `tools/trace_vlm_generate.py`, a real greedy `generate()` with one image of LLaVA, PaliGemma,
//! Gemma 3 and Llama 3.2 Vision) as [`super::generate::Record`]s, estimated as
//! `qwen_vl.rs` estimates Qwen2.5-VL's: shared by `generate_vlm2.rs`, `generate_seq2seq.rs` and
//! `family_agreement.rs`.
#![allow(dead_code)]

use super::generate::Record;
use serde_json::Value;
use vramcalc_core::{AttentionImpl, Device, GenerateConfig, Mode, Precision, TrainConfig};

pub const TEXT: &str = include_str!("../data/generate_vlm2.jsonl");

/// `(model_type, record)` of every line.
pub fn records() -> Vec<(String, Record)> {
    parse(TEXT)
}

/// The records of `text` (as [`parse`] reads it) of one `model_type`; there must be `n`.
pub fn family(text: &str, model_type: &str, n: usize) -> Vec<Record> {
    let recs: Vec<Record> = parse(text).into_iter().filter(|(t, _)| t == model_type).map(|(_, r)| r).collect();
    assert_eq!(recs.len(), n, "{model_type}");
    recs
}

/// `(model_type, record)` of every line of `text`: a file of `tools/trace_vlm_generate.py`'s
/// records, or of `tools/trace_seq2seq_generate.py`'s (the same fields; `seq_len` the source's).
pub fn parse(text: &str) -> Vec<(String, Record)> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let r: Value = serde_json::from_str(l).unwrap();
            let config = r["config"].as_object().unwrap();
            let spec = vramcalc_core::import::hf::from_config(config).unwrap();
            let u = |k: &str| r[k].as_u64().unwrap_or_else(|| panic!("{k}"));
            let c = TrainConfig {
                batch: u("batch"),
                seq_len: Some(u("seq_len")),
                attention: if r["attention"] == "sdpa" { AttentionImpl::Sdpa } else { AttentionImpl::Eager },
                device: Device::Cpu,
                precision: Precision::Fp32,
                mode: Mode::Generate,
                generate: GenerateConfig { new_tokens: u("new_tokens"), ..GenerateConfig::default() },
                ..TrainConfig::default()
            };
            let t = r["family"].as_str().unwrap().to_string();
            let label = format!("{t} b{} {} P{} G{}", c.batch, r["attention"].as_str().unwrap(), u("seq_len"), u("new_tokens"));
            let rec = Record {
                label,
                spec,
                config: c,
                peak: u("measured_peak_bytes"),
                prefill: u("prefill_peak_bytes"),
                decode: u("decode_peak_bytes"),
                kv_end: u("kv_cache_bytes_end"),
                kv_prefill: u("kv_cache_bytes_after_prefill"),
            };
            (t, rec)
        })
        .collect()
}
