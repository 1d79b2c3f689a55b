//! QLoRA (and LoRA on an 8-bit base) against real bitsandbytes steps on the CPU:
//! `tests/data/qlora_cpu.jsonl`, made by `tools/measure_qlora_cpu.py --grid` (torch 2.15,
//! transformers 5.24, peft 0.21, bitsandbytes 0.50; `from_pretrained(quantization_config=
//! BitsAndBytesConfig(...), dtype=bf16)` → `prepare_model_for_kbit_training` → LoRA r 16,
//! live bytes from `torch.profiler(profile_memory=True)`, third iteration). Small Llama and
//! Qwen2 shapes (h 512, 2 layers, vocab 32000), q/v or all-linear, ± checkpointing, AdamW or
//! 8-bit AdamW, NF4, FP4, double quantisation, int8; batch 1 × 256 and 2 × 512.

mod common;
use common::records::{qlora_config, qlora_spec, QLORA as DATA};
use serde_json::Value;

/// The LoRA targets' bounds: median within 1 %, every record within 3 %.
#[test]
fn qlora_steps_agree_with_real_bitsandbytes() {
    let mut errs = Vec::new();
    let mut failures = Vec::new();
    for line in DATA.lines().filter(|l| !l.trim().is_empty()) {
        let r: Value = serde_json::from_str(line).unwrap();
        let c = qlora_config(&r);
        let e = vramcalc_core::estimate(&qlora_spec(r["model"].as_str().unwrap()), &c).unwrap();
        let measured = r["peak_bytes"].as_u64().unwrap();
        let err = (e.peak_bytes as f64 - measured as f64) / measured as f64;
        let line = format!(
            "{} {} {} ckpt={} dq={} b{} s{} {}: est {} measured {} ({:+.2} %) {} vs {}; params {} vs {}",
            r["model"], r["quant"], r["targets"], c.checkpointing, c.finetune.double_quant, c.batch, c.seq_len.unwrap(), r["optimizer"],
            e.peak_bytes, measured, err * 100.0, e.peak_phase.name(), r["peak_phase"], e.param_bytes, r["param_bytes"]
        );
        eprintln!("{line}");
        if err.abs() > 0.03 {
            failures.push(line);
        }
        errs.push(err.abs());
    }
    errs.sort_by(f64::total_cmp);
    assert!(errs.len() >= 16);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(errs[errs.len() / 2] <= 0.01, "median {:.3} %", errs[errs.len() / 2] * 100.0);
}
