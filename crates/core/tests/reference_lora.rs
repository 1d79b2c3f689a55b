//! Accuracy of fine-tuning estimates against `shared/reference/llm/` (transformers 5.24, peft
//! 0.21.2, torch 2.15, MemTracker under FakeTensorMode on CPU; method in that folder's README),
//! with the bars of `tests/reference.rs`: every peak within 3 %, the median within 1 %, the phase
//! of the peak right where it is clear; and the trainable parameters peft reports, exactly.
//!
//! The data files are those records, kept as they are, filtered with jq:
//! `jq -c 'select(.finetune.method == "lora" and .method == "memtracker_fake")' lora.jsonl > tests/data/lora_adapters.jsonl`
//! and `jq -c 'select(.finetune.method == "frozen" and .method == "memtracker_fake")' frozen.jsonl > tests/data/frozen_parts.jsonl`.
//!
//! `cargo test -p vramcalc-core --test reference_lora -- --nocapture` prints the accuracy table.

mod common;
use common::reference::{cases_from, check, estimate, rel_err, Case};

/// The bars for one family of records: `count` of them, trainable parameters exact, every
/// peak within 3 % and the phase right where clear, the median within 1 %.
fn family(text: &str, count: usize, name: &str) {
    let cases = cases_from(text);
    assert_eq!(cases.len(), count);
    trainable_counts_match(text, &cases);
    table_row(name, &cases);
    let (median, failures) = check(&cases, 0.03);
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
    assert!(median <= 0.01, "median error {:.3} %", median * 100.0);
}

/// Median and largest |error| of `cases`, printed as one row of the accuracy table.
fn table_row(family: &str, cases: &[Case]) {
    let mut errs: Vec<f64> = cases.iter().map(|c| rel_err(estimate(c).peak_bytes, c.measured).abs()).collect();
    errs.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let median = errs.get(errs.len() / 2).copied().unwrap_or(0.0);
    let max = errs.last().copied().unwrap_or(0.0);
    println!("| {family} | {} | {:.2} % | {:.2} % |", cases.len(), median * 100.0, max * 100.0);
}

fn trainable_counts_match(text: &str, cases: &[Case]) {
    for (line, c) in text.lines().filter(|l| !l.trim().is_empty()).zip(cases) {
        let r: serde_json::Value = serde_json::from_str(line).unwrap();
        let e = estimate(c);
        assert_eq!(e.trainable_params, r["trainable_param_count"].as_u64().unwrap(), "{} {}", c.label, c.setting);
        assert_eq!(e.params, r["param_count"].as_u64().unwrap(), "{} {}", c.label, c.setting);
    }
}

/// `LlamaForCausalLM` (hidden 1024, 4 layers) with peft LoRA: r 8 and 64, `q_proj,v_proj` and
/// `all-linear`, dropout 0 and 0.05 (CPU float noise, and the CUDA bool-mask twins), fp32 and
/// bf16 bases (fp32 adapters), SDPA and eager, with and without checkpointing.
#[test]
fn llama_lora_adapters() {
    family(include_str!("data/lora_adapters.jsonl"), 320, "LoRA (llama-h1024-l4)");
}

/// BERT-base with only `classifier` training and ResNet-50 with only `fc` training
/// (`--finetune freeze --train-only classifier|fc`): frozen layers record no graph, so the peak
/// moves into the forward pass.
#[test]
fn frozen_backbones() {
    family(include_str!("data/frozen_parts.jsonl"), 8, "frozen backbones (BERT, ResNet-50)");
}

/// Configurations of the same families that are not in the shared files, measured for this
/// repository with the same harness (torch 2.15.0, transformers 5.24.0, peft 0.21.2,
/// torchvision 0.29.2): `python shared/reference/llm/measure_llm.py --configs-json
/// tests/data/finetune_lora_extra.configs.json --out tests/data/finetune_lora_extra.jsonl`.
/// The other Llama shape (hidden 2048, 2 layers) with r 16 on q/k/v/o and dropout 0.1, r 32 on
/// all-linear in fp32 eager; r 4 on the MLP only; other batches and sequence lengths; BERT with
/// the embeddings and the first 6 layers frozen (`--freeze-first 6`) and classifier-only at
/// batch 16; ResNet-50 fc-only at batch 16 and 32.
#[test]
fn held_out_fine_tuning_configurations() {
    family(include_str!("data/finetune_lora_extra.jsonl"), 14, "held out (LoRA h2048/h1024, BERT emb+6, ResNet-50)");
}

/// `GPT2LMHeadModel` (4 layers, `n_positions` 2048) with LoRA on its `Conv1D` projections
/// (`c_attn`, `c_fc`, `all-linear`), fp32 and bf16, dropout, checkpointing; measured for this
/// repository with the same harness: `python shared/reference/llm/measure_llm.py --configs-json
/// tests/data/finetune_gpt2_lora.configs.json --out tests/data/finetune_gpt2_lora.jsonl`. In bf16
/// on the CPU, attention dropout runs SDPA's math kernel, which computes half inputs in fp32.
#[test]
fn gpt2_lora_on_conv1d_projections() {
    let text = include_str!("data/finetune_gpt2_lora.jsonl");
    let cases = cases_from(text);
    assert_eq!(cases.len(), 7);
    trainable_counts_match(text, &cases);
    table_row("GPT-2 LoRA (c_attn, c_fc, all-linear)", &cases);
    let (median, failures) = check(&cases, 0.03);
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
    assert!(median <= 0.01, "median error {:.3} %", median * 100.0);
}

/// `BertForSequenceClassification` (BERT-base, seq 128) with LoRA on `query,value` and on
/// `query,key,value,dense` (peft's `dense` is every `…dense`: attention output, intermediate,
/// output and the pooler), eager and CPU SDPA, dropout 0 to 0.1; measured for this repository by
/// `tests/data/measure_bert_lora.py` (the shared harness's method and schema).
#[test]
fn bert_lora_on_query_value_and_dense() {
    family(include_str!("data/finetune_bert_lora.jsonl"), 3, "BERT LoRA (query/value, dense)");
}
