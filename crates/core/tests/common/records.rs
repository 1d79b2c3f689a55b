//! Adapters from the combination records (`tests/data/dist_finetune.jsonl`, made by
//! `tools/measure_dist_finetune.py`; `tests/data/qlora_cpu.jsonl`, made by
//! `tools/measure_qlora_cpu.py`) to specs, setups and jobs. Shared by `tests/dist_finetune.rs`,
//! `tests/reference_qlora.rs` and `examples/finetune_table.rs`.
#![allow(dead_code)]

use serde_json::Value;
use vramcalc_core::config::{AttentionImpl, AutocastDevice, Device, OptimizerImpl, OptimizerKind};
use vramcalc_core::distributed::{DistConfig, MpDtype, Strategy};
use vramcalc_core::finetune::{BaseFormat, FineTune, Method, NameList};
use vramcalc_core::{ModelSpec, Precision, TrainConfig};

pub const DIST: &str = include_str!("../data/dist_finetune.jsonl");
pub const QLORA: &str = include_str!("../data/qlora_cpu.jsonl");

/// `LlamaForCausalLM` h1024/l4 (`measure_llm.py`'s `llama-h1024-l4`).
pub fn dist_llama() -> ModelSpec {
    let c = serde_json::json!({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 1024, "num_hidden_layers": 4,
        "num_attention_heads": 16, "num_key_value_heads": 4, "intermediate_size": 2816, "vocab_size": 32000,
    });
    vramcalc_core::import::hf::from_config(c.as_object().unwrap()).unwrap()
}

/// A `dist_finetune.jsonl` record's setup and job.
pub fn dist_setup(r: &Value) -> (TrainConfig, DistConfig) {
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

/// A `qlora_cpu.jsonl` record's model (`tools/measure_qlora_cpu.py`'s `SHAPES`).
pub fn qlora_spec(model: &str) -> ModelSpec {
    let (kind, class, kv, inter) = match model {
        "llama-h512-l2" => ("llama", "LlamaForCausalLM", 4, 1408),
        "qwen2-h512-l2" => ("qwen2", "Qwen2ForCausalLM", 2, 1536),
        m => panic!("unknown model {m}"),
    };
    let c = serde_json::json!({"architectures": [class], "model_type": kind, "hidden_size": 512, "num_hidden_layers": 2,
        "num_attention_heads": 8, "num_key_value_heads": kv, "intermediate_size": inter, "vocab_size": 32000, "tie_word_embeddings": false});
    vramcalc_core::import::hf::from_config(c.as_object().unwrap()).unwrap()
}

/// A `qlora_cpu.jsonl` record's setup.
pub fn qlora_config(r: &Value) -> TrainConfig {
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

