//! Training steps and `generate()` of small configs of the dense decoder families of issue 25
//! against transformers 5.24 / torch 2.15 on CPU.
//!
//! Training: `data/hf/traces_dense2.jsonl` (`tools/trace_dense2.sh`: `tools/trace_hf.py`, one step
//! from `set_to_none` grads, FakeTensorMode, fp32, batch 2, 128 tokens, eager and SDPA) of
//! Cohere 2, EXAONE 4, ERNIE 4.5, Hunyuan-dense and Nemotron; estimated with `--optimizer sgd`
//! (`hf::trace_error`).
//!
//! Generation: `data/generate_dense2.jsonl` (`tools/measure_generate_dense2.sh`:
//! `tools/measure_generate_hf.py`, CPU, 1 thread, fp32, eager, dynamic cache, greedy) of one small
//! config per family (`tools/generate_configs/<family>.json`); `check`: prefill, peak and decode
//! within the bound, the cache after the prefill and at the end exact (0.1 %).

#[path = "common/generate.rs"]
mod generate;
#[path = "common/hf.rs"]
mod hf;
use generate::{check, records, Record};

/// The generate records of one family (`<model_type>-small`); `n` of them.
fn family(model_type: &str, n: usize) -> Vec<Record> {
    let recs: Vec<Record> = records(include_str!("data/generate_dense2.jsonl"));
    let recs: Vec<Record> = recs.into_iter().filter(|r| r.label.starts_with(&format!("{model_type}-small "))).collect();
    assert_eq!(recs.len(), n, "{model_type}");
    recs
}

/// Ten training steps (five families, eager and SDPA) within issue 25's 3 %.
#[test]
fn dense2_training_steps_match_traced_pytorch() {
    for line in hf::data("hf/traces_dense2.jsonl").lines() {
        let r: serde_json::Value = serde_json::from_str(line).unwrap();
        println!("{} {}: {:+.2} %", r["family"], r["attention"], hf::trace_error(&r));
    }
    hf::assert_traces("hf/traces_dense2.jsonl", 10, |_| 3.0);
}
