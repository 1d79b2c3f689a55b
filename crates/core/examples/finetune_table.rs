//! Prints the fine-tuning accuracy table (README): each family of `shared/reference/llm/` records
//! the tests check, with the median and largest |error| of the peak and how often the peak phase
//! is right: `cargo run --release -p vramcalc-core --example finetune_table [-v]`.

#[path = "../tests/common/reference.rs"]
mod reference;

use reference::{cases_from, estimate, rel_err};

const SETS: &[(&str, &str)] = &[
    ("LoRA, `lora_adapters.jsonl` (llama-h1024-l4: r 8/64, q,v / all-linear, dropout 0/0.05, fp32/bf16 base, SDPA/eager, checkpointing on/off)", include_str!("../tests/data/lora_adapters.jsonl")),
    ("frozen backbones, `frozen_parts.jsonl` (BERT-base classifier only, ResNet-50 fc only)", include_str!("../tests/data/frozen_parts.jsonl")),
    ("held out, `finetune_lora_extra.jsonl` (llama-h2048-l2 and other ranks, targets, shapes; BERT emb+6; ResNet-50)", include_str!("../tests/data/finetune_lora_extra.jsonl")),
    ("GPT-2 LoRA, `finetune_gpt2_lora.jsonl` (Conv1D `c_attn`, `c_fc`, all-linear; fp32/bf16)", include_str!("../tests/data/finetune_gpt2_lora.jsonl")),
    ("BERT LoRA, `finetune_bert_lora.jsonl` (query/value, query/key/value/dense; eager, CPU SDPA)", include_str!("../tests/data/finetune_bert_lora.jsonl")),
    ("full fine-tuning baselines, `lora_full.jsonl` + `frozen_full.jsonl`", concat!(include_str!("../tests/data/lora_full.jsonl"), include_str!("../tests/data/frozen_full.jsonl"))),
];

fn main() {
    let verbose = std::env::args().any(|a| a == "-v");
    println!("| records | count | median \\|error\\| | max \\|error\\| | peak phase right |");
    println!("|---|---:|---:|---:|---:|");
    for (name, text) in SETS {
        let cases = cases_from(text);
        let mut errs = Vec::new();
        let mut phase_right = 0;
        for c in &cases {
            let e = estimate(c);
            let err = rel_err(e.peak_bytes, c.measured);
            let measured = if c.measured_phase == "zero_grad" { "optimizer" } else { c.measured_phase.as_str() };
            phase_right += usize::from(e.peak_phase.name() == measured);
            if verbose {
                eprintln!("{} {}: measured {} estimated {} ({:+.2} %)", c.label, c.setting, c.measured, e.peak_bytes, err * 100.0);
            }
            errs.push(err.abs());
        }
        errs.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let median = errs.get(errs.len() / 2).copied().unwrap_or(0.0);
        let max = errs.last().copied().unwrap_or(0.0);
        println!("| {name} | {} | {:.2} % | {:.2} % | {phase_right} of {} |", cases.len(), median * 100.0, max * 100.0, cases.len());
    }
}
