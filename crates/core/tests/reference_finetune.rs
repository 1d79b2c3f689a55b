//! Accuracy against the full fine-tuning baselines of `shared/reference/llm/` (transformers 5.24,
//! torch 2.15, MemTracker under FakeTensorMode on CPU; method in that folder's README), with the
//! bars of `tests/reference.rs`: every peak within 3 %, the median within 1 %, the phase of the
//! peak right where it is clear.
//!
//! The data files are those records, kept as they are, filtered with jq:
//! `jq -c 'select(.finetune.method == "full" and .method == "memtracker_fake")' lora.jsonl > tests/data/lora_full.jsonl`
//! and the same for `frozen.jsonl` → `tests/data/frozen_full.jsonl`.

mod common;
use common::reference::{cases_from, check, estimate, rel_err};
use vramcalc_core::{AttentionImpl, Device, Precision};

/// `LlamaForCausalLM` (hidden 1024, 4 layers, 16 heads, 4 KV heads, intermediate 2816, vocab
/// 32000), AdamW, fp32 and pure bf16 (`model.to(torch.bfloat16)`, no autocast), SDPA and eager,
/// with and without checkpointing, batch 1 and 4, sequence 256 and 1024. Pure bf16 keeps the
/// causal-LM loss, the RMSNorm statistics, the eager softmax in fp32 (see `resolve.rs`,
/// `layer/norm.rs`, `layer/attention.rs`).
#[test]
fn llama_full_fine_tuning_fp32_and_pure_bf16() {
    let cases = cases_from(include_str!("data/lora_full.jsonl"));
    assert_eq!(cases.len(), 32);
    assert_eq!(cases.iter().filter(|c| c.config.precision == Precision::Bf16).count(), 16);
    let (median, failures) = check(&cases, 0.03);
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
    assert!(median <= 0.01, "median error {:.3} %", median * 100.0);
}
/// `BertForSequenceClassification` (BERT-base, seq 128) and ResNet-50 fully trained on the CPU
/// without CUDA emulation: dropout keeps a float mask, and SDPA with attention dropout 0.1 runs
/// PyTorch's math kernel, so its records equal the eager ones byte for byte.
#[test]
fn bert_and_resnet_full_baselines_on_the_cpu() {
    let cases = cases_from(include_str!("data/frozen_full.jsonl"));
    assert_eq!(cases.len(), 8);
    assert!(cases.iter().all(|c| c.config.device == Device::Cpu));
    let (median, failures) = check(&cases, 0.03);
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
    assert!(median <= 0.01, "median error {:.3} %", median * 100.0);
    // the math fallback is the eager memory pattern: SDPA and eager estimates agree
    let sdpa: Vec<_> = cases.iter().filter(|c| c.label == "bert-base" && c.config.attention == AttentionImpl::Sdpa).collect();
    assert_eq!(sdpa.len(), 3);
    for c in sdpa {
        let eager = vramcalc_core::TrainConfig { attention: AttentionImpl::Eager, ..c.config };
        let e = vramcalc_core::estimate(&c.spec, &eager).unwrap();
        assert_eq!(estimate(c).peak_bytes, e.peak_bytes, "{}", c.setting);
        assert!(rel_err(e.peak_bytes, c.measured).abs() < 0.001, "{}", c.setting);
    }
}

/// Configurations of the same families that are not in the shared files, measured for this
/// repository with the same harness (torch 2.15.0, transformers 5.24.0):
/// `python shared/reference/llm/measure_llm.py --configs-json tests/data/finetune_extra.configs.json --out …`.
/// The other Llama shape (hidden 2048, 2 layers, 32 heads, 8 KV heads, intermediate 5632) in fp32
/// and pure bf16, SDPA and eager, with and without checkpointing; another batch and sequence; BERT
/// with CPU SDPA (math kernel) at batch 16 and sequence 256.
#[test]
fn held_out_fine_tuning_configurations() {
    let cases = cases_from(include_str!("data/finetune_extra.jsonl"));
    assert_eq!(cases.len(), 12);
    let (median, failures) = check(&cases, 0.03);
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
    assert!(median <= 0.01, "median error {:.3} %", median * 100.0);
}

/// Pure half weights beyond the shared records: `tools/trace_hf.py … --dtype bf16` (transformers
/// 5.24, torch 2.15, CUDA memory behaviour for dropout and SDPA, one step without an optimizer)
/// of `GPT2LMHeadModel` (4 layers, batch 2, seq 256) and TinyLlama's `LlamaForCausalLM` (2
/// layers, batch 2, seq 512), measured for this repository, with their fp32 twins.
#[test]
fn hf_causal_lms_in_pure_bf16_match_a_dispatch_trace() {
    use vramcalc_core::{OptimizerKind, TrainConfig};
    let model = |text: &str, layers_key: &str, layers: u64| {
        let mut config: serde_json::Map<String, serde_json::Value> = serde_json::from_str(text).unwrap();
        config.insert(layers_key.into(), layers.into());
        vramcalc_core::import::hf::from_config(&config).unwrap()
    };
    let gpt2 = model(include_str!("data/gpt2.config.json"), "n_layer", 4);
    let llama = model(include_str!("data/tinyllama-1.1b.config.json"), "num_hidden_layers", 2);
    let cases = [
        (&gpt2, 256, AttentionImpl::Eager, Precision::Fp32, 850_677_768u64),
        (&gpt2, 256, AttentionImpl::Eager, Precision::Bf16, 568_926_728),
        (&llama, 512, AttentionImpl::Eager, Precision::Fp32, 1_797_599_496),
        (&llama, 512, AttentionImpl::Sdpa, Precision::Fp32, 1_761_698_056),
        (&llama, 512, AttentionImpl::Eager, Precision::Bf16, 1_242_743_048),
        (&llama, 512, AttentionImpl::Sdpa, Precision::Bf16, 1_026_998_584),
    ];
    for (spec, seq, attention, precision, measured) in cases {
        let config = TrainConfig { batch: 2, seq_len: Some(seq), attention, precision, optimizer: OptimizerKind::Sgd, ..TrainConfig::default() };
        let e = vramcalc_core::estimate(spec, &config).unwrap();
        let err = rel_err(e.peak_bytes, measured);
        assert!(err.abs() < 0.001, "{:?} {attention:?} {precision:?}: measured {measured} estimated {} ({:+.3} %)", spec.name, e.peak_bytes, err * 100.0);
    }
}
