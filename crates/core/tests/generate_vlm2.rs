//! `generate()` with one image of the image-text families other than Qwen2.5-VL against
//! transformers 5.24 / torch 2.15 (CPU, 1 thread, fp32, greedy, dynamic cache, `logits_to_keep=1`):
//! `data/generate_vlm2.jsonl`, written by `tools/measure_generate_vlm2.sh`
//! (`tools/trace_vlm_generate.py`: real tensors, every live storage after each aten op, as
//! `tools/trace_qwen_vl.py --mode generate`). Configs: `tools/generate_configs/{llava,paligemma,
//! gemma3_vlm,mllama}.json` (the training traces' small configs; Gemma 3: a sliding and a full
//! layer). Each family at batch 1 eager (prompt 96, 8 new tokens) and batch 2 SDPA (prompt 80,
//! 12 new tokens). `check`: the peak, the prefill and decode peaks, and the cache after the
//! prefill and at the end.

#[path = "common/generate.rs"]
mod generate;
#[path = "common/vlm_generate.rs"]
mod vlm_generate;
use generate::{check, Record};
use vlm_generate::records;

fn family(model_type: &str) -> Vec<Record> {
    let recs: Vec<Record> = records().into_iter().filter(|(t, _)| t == model_type).map(|(_, r)| r).collect();
    assert_eq!(recs.len(), 2, "{model_type}");
    recs
}

#[test]
fn llava_generation_against_transformers() {
    check(&family("llava"), 0.01);
}

#[test]
fn paligemma_generation_against_transformers() {
    check(&family("paligemma"), 0.01);
}

#[test]
fn gemma3_vlm_generation_against_transformers() {
    check(&family("gemma3"), 0.01);
}

#[test]
fn mllama_generation_against_transformers() {
    check(&family("mllama"), 0.01);
}
