//! Fine-tuning and autocast on several GPUs, rank 0, against measured records:
//! `tests/data/dist_finetune.jsonl`, made by `tools/measure_dist_finetune.py --grid` (FakeTensorMode,
//! fake process group, `FSDPMemTracker` / `MemTracker`, torch 2.15, peft 0.21; the method of
//! `shared/reference/llm/README.md` section C). `LlamaForCausalLM` h1024/l4, AdamW, batch 2, seq 512:
//! LoRA × FSDP2 (W 2, 4, 8, reshard on/off, all-linear, checkpointing, bf16 base), LoRA × DDP
//! (bucket views on/off), the embeddings and 2 of 4 layers frozen × FSDP2/DDP, CPU autocast × FSDP2
//! (W 4, 8, ± checkpointing, `cache_enabled=False`), and `MixedPrecisionPolicy(bf16, fp32)` on an
//! fp32 and on a bf16 model.

use serde_json::Value;
use vramcalc_core::config::{AttentionImpl, AutocastDevice, Device, OptimizerImpl};
use vramcalc_core::distributed::{self, DistConfig, MpDtype, Strategy};
use vramcalc_core::finetune::{FineTune, Method, NameList};
use vramcalc_core::{ModelSpec, Precision, TrainConfig};

const DATA: &str = include_str!("data/dist_finetune.jsonl");

fn llama() -> ModelSpec {
    let c = serde_json::json!({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 1024, "num_hidden_layers": 4,
        "num_attention_heads": 16, "num_key_value_heads": 4, "intermediate_size": 2816, "vocab_size": 32000,
    });
    vramcalc_core::import::hf::from_config(c.as_object().unwrap()).unwrap()
}

fn setup(r: &Value) -> (TrainConfig, DistConfig) {
    let ft = &r["finetune"];
    let finetune = match ft["method"].as_str().unwrap() {
        "lora" => FineTune {
            method: Method::Lora,
            lora_r: ft["r"].as_u64().unwrap() as u32,
            lora_alpha: 2.0 * ft["r"].as_f64().unwrap(),
            lora_targets: match &ft["targets"] {
                Value::String(s) => NameList::parse(s).unwrap(),
                Value::Array(a) => NameList::from_names(&a.iter().map(|s| s.as_str().unwrap()).collect::<Vec<_>>()).unwrap(),
                _ => unreachable!(),
            },
            ..FineTune::default()
        },
        "frozen" => FineTune { method: Method::Freeze, freeze_first: ft["frozen_layers"].as_u64(), ..FineTune::default() },
        _ => FineTune::default(),
    };
    let precision = match (r["precision"].as_str().unwrap(), r["weights_dtype"].as_str().unwrap()) {
        ("bf16_autocast", _) => Precision::AmpBf16,
        (_, "bf16") => Precision::Bf16,
        _ => Precision::Fp32,
    };
    let config = TrainConfig {
        batch: r["batch"].as_u64().unwrap(),
        seq_len: r["seq_len"].as_u64(),
        precision,
        autocast_device: AutocastDevice::Cpu,
        autocast_cache: r["autocast_cache"].as_bool().unwrap_or(true),
        device: Device::Cpu,
        optimizer_impl: OptimizerImpl::Forloop,
        attention: AttentionImpl::Sdpa,
        checkpointing: r["checkpointing"].as_bool().unwrap(),
        finetune,
        ..TrainConfig::default()
    };
    let d = &r["distributed"];
    let dt = |k: &str| d[k].as_str().map(|s| MpDtype::parse(s).unwrap());
    let dist = DistConfig {
        gpus: d["world_size"].as_u64().unwrap(),
        strategy: if d["strategy"] == "ddp" { Strategy::Ddp } else { Strategy::Fsdp },
        reshard_after_forward: d["reshard_after_forward"].as_bool().unwrap_or(true),
        gradient_as_bucket_view: d["gradient_as_bucket_view"].as_bool().unwrap_or(false),
        fsdp_param_dtype: dt("mp_param_dtype"),
        fsdp_reduce_dtype: dt("mp_reduce_dtype"),
        ..DistConfig::default()
    };
    (config, dist)
}

/// Every record within 3 % (the issue's bound), the median within 1 %; the peak's phase right.
#[test]
fn fine_tuning_and_autocast_per_rank_agree_with_measured_records() {
    let spec = llama();
    let mut errs = Vec::new();
    let mut failures = Vec::new();
    for line in DATA.lines().filter(|l| !l.trim().is_empty()) {
        let r: Value = serde_json::from_str(line).unwrap();
        let (config, dist) = setup(&r);
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
