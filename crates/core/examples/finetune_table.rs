//! Prints the fine-tuning accuracy table (README): each family of `shared/reference/llm/` records
//! the tests check, with the median and largest |error| of the peak and how often the peak phase
//! is right: `cargo run --release -p vramcalc-core --example finetune_table [-v]`.

#[path = "../tests/common/reference.rs"]
mod reference;
#[path = "../tests/common/records.rs"]
mod records;

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
    // rank 0 of fine-tuning and autocast jobs, and real bitsandbytes steps
    let dist = rows(records::DIST, |r| {
        let (c, d) = records::dist_setup(r);
        let e = vramcalc_core::distributed::estimate(&records::dist_llama(), &c, &d).expect("a measured job estimates");
        (e.estimate.peak_bytes, e.estimate.peak_phase.name())
    });
    row("several GPUs, `dist_finetune.jsonl` (llama-h1024-l4: LoRA × FSDP2 W 2/4/8 ± reshard, all-linear, checkpointing, bf16 base; LoRA × DDP; 2 of 4 layers frozen × FSDP2/DDP; CPU autocast × FSDP2 ± checkpointing ± cache; MixedPrecisionPolicy on fp32 and bf16)", &dist);
    let qlora = rows(records::QLORA, |r| {
        let e = vramcalc_core::estimate(&records::qlora_spec(r["model"].as_str().unwrap_or_default()), &records::qlora_config(r)).expect("a measured step estimates");
        (e.peak_bytes, e.peak_phase.name())
    });
    row("real bitsandbytes 0.50 on the CPU, `qlora_cpu.jsonl` (Llama/Qwen2 h512: NF4, FP4, double quant, int8; q,v / all-linear; ± checkpointing; AdamW / 8-bit AdamW; after `prepare_model_for_kbit_training`)", &qlora);
}

/// `(|error|, phase right)` of each record of a JSON-lines file.
fn rows(text: &str, estimate: impl Fn(&serde_json::Value) -> (u64, &'static str)) -> Vec<(f64, bool)> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let r: serde_json::Value = serde_json::from_str(l).expect("a JSON record");
            let measured = r["peak_bytes"].as_u64().unwrap_or(1);
            let (peak, phase) = estimate(&r);
            (rel_err(peak, measured).abs(), r["peak_phase"] == phase)
        })
        .collect()
}

fn row(name: &str, rows: &[(f64, bool)]) {
    let mut errs: Vec<f64> = rows.iter().map(|r| r.0).collect();
    errs.sort_by(f64::total_cmp);
    let median = errs.get(errs.len() / 2).copied().unwrap_or(0.0);
    let max = errs.last().copied().unwrap_or(0.0);
    let right = rows.iter().filter(|r| r.1).count();
    println!("| {name} | {} | {:.2} % | {:.2} % | {right} of {} |", rows.len(), median * 100.0, max * 100.0, rows.len());
}
