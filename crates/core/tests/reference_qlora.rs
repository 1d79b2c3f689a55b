//! QLoRA (and LoRA on an 8-bit base) against real bitsandbytes steps on the CPU:
//! `tests/data/qlora_cpu.jsonl`, made by `tools/measure_qlora_cpu.py --grid` (torch 2.15,
//! transformers 5.24, peft 0.21, bitsandbytes 0.50; `from_pretrained(quantization_config=
//! BitsAndBytesConfig(...), dtype=bf16)` → `prepare_model_for_kbit_training` → LoRA r 16,
//! live bytes from `torch.profiler(profile_memory=True)`, third iteration). Small Llama and
//! Qwen2 shapes (h 512, 2 layers, vocab 32000), q/v or all-linear, ± checkpointing, AdamW or
//! 8-bit AdamW, NF4, FP4, double quantisation, int8; batch 1 × 256 and 2 × 512.

use serde_json::Value;
use vramcalc_core::config::{AutocastDevice, Device, OptimizerImpl, OptimizerKind};
use vramcalc_core::finetune::{BaseFormat, FineTune, Method, NameList};
use vramcalc_core::{ModelSpec, Precision, TrainConfig};

const DATA: &str = include_str!("data/qlora_cpu.jsonl");

fn spec(model: &str) -> ModelSpec {
    let (kind, class, kv, inter) = match model {
        "llama-h512-l2" => ("llama", "LlamaForCausalLM", 4, 1408),
        "qwen2-h512-l2" => ("qwen2", "Qwen2ForCausalLM", 2, 1536),
        m => panic!("unknown model {m}"),
    };
    let c = serde_json::json!({"architectures": [class], "model_type": kind, "hidden_size": 512, "num_hidden_layers": 2,
        "num_attention_heads": 8, "num_key_value_heads": kv, "intermediate_size": inter, "vocab_size": 32000, "tie_word_embeddings": false});
    vramcalc_core::import::hf::from_config(c.as_object().unwrap()).unwrap()
}

fn config(r: &Value) -> TrainConfig {
    let targets = match &r["targets"] {
        Value::String(s) => NameList::parse(s).unwrap(),
        Value::Array(a) => NameList::from_names(&a.iter().map(|s| s.as_str().unwrap()).collect::<Vec<_>>()).unwrap(),
        _ => unreachable!(),
    };
    let (method, base) = match r["quant"].as_str().unwrap() {
        "nf4" => (Method::Qlora, BaseFormat::Nf4),
        "fp4" => (Method::Qlora, BaseFormat::Fp4),
        _ => (Method::Lora, BaseFormat::Int8),
    };
    TrainConfig {
        batch: r["batch"].as_u64().unwrap(),
        seq_len: r["seq_len"].as_u64(),
        precision: Precision::Bf16,
        optimizer: if r["optimizer"] == "adam8bit" { OptimizerKind::Adam8bit } else { OptimizerKind::Adamw },
        optimizer_impl: OptimizerImpl::Forloop,
        device: Device::Cpu,
        autocast_device: AutocastDevice::Cpu,
        checkpointing: r["checkpointing"].as_bool().unwrap(),
        finetune: FineTune {
            method,
            base_format: Some(base),
            double_quant: r["double_quant"].as_bool().unwrap(),
            lora_r: r["r"].as_u64().unwrap() as u32,
            lora_alpha: 2.0 * r["r"].as_f64().unwrap(),
            lora_targets: targets,
            ..FineTune::default()
        },
        ..TrainConfig::default()
    }
}

/// The LoRA targets' bounds: median within 1 %, every record within 3 %.
#[test]
fn qlora_steps_agree_with_real_bitsandbytes() {
    let mut errs = Vec::new();
    let mut failures = Vec::new();
    for line in DATA.lines().filter(|l| !l.trim().is_empty()) {
        let r: Value = serde_json::from_str(line).unwrap();
        let c = config(&r);
        let e = vramcalc_core::estimate(&spec(r["model"].as_str().unwrap()), &c).unwrap();
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
