//! The command that runs a setup, from the same settings the estimate used: `vllm serve …`,
//! `torchrun …`, a peft + bitsandbytes + `TrainingArguments` snippet, a DeepSpeed ZeRO JSON or an
//! accelerate config, and a script that measures the step on the user's own GPU.
//!
//! Every flag and key is the tool's own name (cited at each); values come from `TrainConfig`,
//! `DistConfig` and `ServeConfig` only, so a launch line says what the estimate assumed.
//! Plain text out, no I/O.

pub mod measure;
pub mod modelfile;
pub mod python;
pub mod sharding;

use crate::serve::ServeConfig;
use crate::formats::{KvDtype, WeightFormat};

/// The Hugging Face repository of a preset (its `config.json` is in `presets/configs/`), for
/// launch lines and scripts; `None` for models that are not on the hub under one id.
pub fn hub_id(preset: &str) -> Option<&'static str> {
    Some(match preset {
        "gpt2" => "openai-community/gpt2",
        "llama-3.1-8b" => "meta-llama/Llama-3.1-8B",
        "llama-3.1-70b" => "meta-llama/Llama-3.1-70B",
        "mistral-7b-v0.3" => "mistralai/Mistral-7B-v0.3",
        "qwen2.5-0.5b" => "Qwen/Qwen2.5-0.5B",
        "qwen2.5-7b" => "Qwen/Qwen2.5-7B",
        "qwen2.5-72b" => "Qwen/Qwen2.5-72B",
        "gemma-2-9b" => "google/gemma-2-9b",
        "phi-3-mini" => "microsoft/Phi-3-mini-4k-instruct",
        "mixtral-8x7b" => "mistralai/Mixtral-8x7B-v0.1",
        "deepseek-v3" => "deepseek-ai/DeepSeek-V3",
        "bert-base" => "google-bert/bert-base-uncased",
        "bert-large" => "google-bert/bert-large-uncased",
        "roberta-base" => "FacebookAI/roberta-base",
        "t5-base" => "google-t5/t5-base",
        "whisper-small" => "openai/whisper-small",
        "vit-b-16" => "google/vit-base-patch16-224",
        _ => return None,
    })
}

/// `vllm serve MODEL …` as argv: the settings `serve::capacity` computed with
/// (`vllm/engine/arg_utils.py`, `EngineArgs.add_cli_args`: `--max-model-len`,
/// `--gpu-memory-utilization`, `--tensor-parallel-size`, `--max-num-seqs`,
/// `--max-num-batched-tokens`, `--dtype`, `--kv-cache-dtype`, `--quantization`, `--enforce-eager`).
/// `max_num_seqs` is the concurrency when one is given (the sequences the KV pool was sized for).
pub fn vllm_serve(model: &str, cfg: &ServeConfig) -> Vec<String> {
    let mut v: Vec<String> = ["vllm", "serve", model].map(String::from).to_vec();
    let mut flag = |k: &str, val: String| {
        v.push(format!("--{k}"));
        v.push(val);
    };
    flag("max-model-len", cfg.context.to_string());
    flag("gpu-memory-utilization", cfg.gpu_memory_utilization.to_string());
    flag("tensor-parallel-size", cfg.tensor_parallel.to_string());
    flag("max-num-seqs", cfg.concurrency.unwrap_or(cfg.max_num_seqs).to_string());
    flag("max-num-batched-tokens", cfg.max_num_batched_tokens.to_string());
    // `--dtype` choices: auto, half, float16, bfloat16, float, float32
    flag("dtype", if cfg.precision == crate::config::Precision::Fp16 { "float16" } else { "bfloat16" }.into());
    // `--kv-cache-dtype auto` is the model dtype
    if cfg.kv_dtype == KvDtype::Fp8 {
        flag("kv-cache-dtype", "fp8".into());
    }
    // `--quantization`: vLLM's method names (`model_executor/layers/quantization/__init__.py`)
    let method = match cfg.weights {
        Some(WeightFormat::Fp8 { .. }) => Some("fp8"),
        Some(WeightFormat::BnbInt8 | WeightFormat::Bnb4 { .. }) => Some("bitsandbytes"),
        Some(WeightFormat::Gptq { .. }) => Some("gptq"),
        Some(WeightFormat::Awq { .. }) => Some("awq"),
        Some(WeightFormat::Gguf(_)) => Some("gguf"),
        Some(WeightFormat::Ct(_)) => Some("compressed-tensors"),
        _ => None,
    };
    if let Some(m) = method {
        flag("quantization", m.into());
    }
    if cfg.enforce_eager {
        v.push("--enforce-eager".into());
    }
    v
}

/// GPUs per node `torchrun` lines assume.
pub const GPUS_PER_NODE: u64 = 8;

/// `torchrun … SCRIPT` as argv for `gpus` GPUs (`torch/distributed/run.py`: `--nnodes`,
/// `--nproc-per-node`, `--standalone` on one node, a c10d rendezvous across nodes).
pub fn torchrun(gpus: u64, script: &str) -> Vec<String> {
    let gpus = gpus.max(1);
    let nodes = gpus.div_ceil(GPUS_PER_NODE);
    let per_node = gpus.div_ceil(nodes);
    let mut v: Vec<String> = vec!["torchrun".into()];
    if nodes == 1 {
        v.push("--standalone".into());
    }
    v.extend(["--nnodes".into(), nodes.to_string(), "--nproc-per-node".into(), per_node.to_string()]);
    if nodes > 1 {
        v.extend(["--rdzv-backend".into(), "c10d".into(), "--rdzv-endpoint".into(), "$MASTER_ADDR:29500".into()]);
    }
    v.push(script.into());
    v
}

/// argv as one shell line (every generated word is free of spaces and quotes but the endpoint's
/// `$MASTER_ADDR`, which the shell is meant to expand).
pub fn shell_line(argv: &[String]) -> String {
    argv.join(" ")
}

#[cfg(test)]
mod tests;
