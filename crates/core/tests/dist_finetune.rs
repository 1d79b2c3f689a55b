//! Fine-tuning and autocast on several GPUs, rank 0, against measured records:
//! `tests/data/dist_finetune.jsonl`, made by `tools/measure_dist_finetune.py --grid` (FakeTensorMode,
//! fake process group, `FSDPMemTracker` / `MemTracker`, torch 2.15, peft 0.21; the method of
//! `shared/reference/llm/README.md` section C). `LlamaForCausalLM` h1024/l4, AdamW, batch 2, seq 512:
//! LoRA × FSDP2 (W 2, 4, 8, reshard on/off, all-linear, checkpointing, bf16 base), LoRA × DDP
//! (bucket views on/off), the embeddings and 2 of 4 layers frozen × FSDP2/DDP, CPU autocast × FSDP2
//! (W 4, 8, ± checkpointing, `cache_enabled=False`), and `MixedPrecisionPolicy(bf16, fp32)` on an
//! fp32 and on a bf16 model.

mod common;
use common::records::{dist_llama, dist_setup, DIST as DATA};
use serde_json::Value;
use vramcalc_core::distributed;

/// Every record within 3 % (the bound), the median within 1 %; the peak's phase right.
#[test]
fn fine_tuning_and_autocast_per_rank_agree_with_measured_records() {
    let spec = dist_llama();
    let mut errs = Vec::new();
    let mut failures = Vec::new();
    for line in DATA.lines().filter(|l| !l.trim().is_empty()) {
        let r: Value = serde_json::from_str(line).unwrap();
        let (config, dist) = dist_setup(&r);
        let e = distributed::estimate(&spec, &config, &dist).unwrap_or_else(|e| panic!("{line}: {e}"));
        let measured = r["peak_bytes"].as_u64().unwrap();
        let err = (e.estimate.peak_bytes as f64 - measured as f64) / measured as f64;
        let line = format!(
            "{} W={} raf={} {} {:?} ckpt={} cache={}: est {} measured {} ({:+.2} %) {} vs {}; trainable {} vs {}",
            dist.strategy.name(), dist.gpus, dist.reshard_after_forward, r["finetune"]["method"], config.precision, config.checkpointing,
            config.autocast_cache, e.estimate.peak_bytes, measured, err * 100.0, e.estimate.peak_phase.name(), r["peak_phase"],
            e.estimate.trainable_params, r["trainable_param_count"]
        );
        eprintln!("{line} phases {:?} measured {}", e.estimate.phase_peaks, r["phase_peak_bytes"]);
        if err.abs() > 0.03 || r["peak_phase"] != e.estimate.peak_phase.name() {
            failures.push(line);
        }
        errs.push(err.abs());
    }
    errs.sort_by(f64::total_cmp);
    assert!(errs.len() >= 20);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(errs[errs.len() / 2] <= 0.01, "median {:.3} %", errs[errs.len() / 2] * 100.0);
}
