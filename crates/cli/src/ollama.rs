//! `vramcalc ollama --gguf FILE`: Ollama's run of a GGUF model as the llama.cpp run it launches
//! (`vramcalc_core::llama_cpp::ollama`), with Ollama's setting names.

use anyhow::{anyhow, Result};
use clap::Args;
use serde_json::json;
use std::path::PathBuf;
use vramcalc_core::gguf::GgmlType;
use vramcalc_core::llama_cpp::{fit, ollama::Ollama, ollama_sched, Hparams, SplitMode};

use crate::llama_cpp::{read_header, report};

#[derive(Args)]
pub struct OllamaArgs {
    /// The GGUF file (Ollama's model blob).
    #[arg(long)]
    pub gguf: PathBuf,
    /// `num_ctx` (per parallel request; default OLLAMA_CONTEXT_LENGTH, else 4096/32768/262144 by total VRAM).
    #[arg(long = "num-ctx")]
    pub num_ctx: Option<u64>,
    /// `num_gpu`: layers on the GPUs (default: as many as fit, as llama-server's fit does).
    #[arg(long = "num-gpu")]
    pub num_gpu: Option<u64>,
    /// `num_batch` (default 512; Ollama passes it as -b and -ub).
    #[arg(long = "num-batch")]
    pub num_batch: Option<u64>,
    /// `OLLAMA_NUM_PARALLEL` (default 1): the context is num_ctx × this.
    #[arg(long = "num-parallel")]
    pub num_parallel: Option<u64>,
    /// `OLLAMA_KV_CACHE_TYPE`: f16, q8_0 or q4_0 (K and V alike).
    #[arg(long = "kv-cache-type")]
    pub kv_cache_type: Option<String>,
    /// `OLLAMA_FLASH_ATTENTION`: true or false (default: llama-server's auto).
    #[arg(long = "flash-attention")]
    pub flash_attention: Option<bool>,
    /// `OLLAMA_CONTEXT_LENGTH`.
    #[arg(long = "context-length")]
    pub context_length: Option<u64>,
    /// `main_gpu`: run on this GPU alone (llama-server `-sm none`).
    #[arg(long = "main-gpu")]
    pub main_gpu: Option<usize>,
    /// `OLLAMA_SCHED_SPREAD`: spread over every GPU even when one would hold the model.
    #[arg(long = "sched-spread")]
    pub sched_spread: bool,
    #[command(flatten)]
    pub devices: crate::llama_cpp::Devices,
}

pub fn run(a: &OllamaArgs) -> Result<String> {
    let header = read_header(&a.gguf)?;
    let gpus = a.devices.gpus()?;
    let ram = a.devices.ram()?;
    let kv_cache_type = a
        .kv_cache_type
        .as_deref()
        .map(|t| GgmlType::from_name(t).ok_or_else(|| anyhow!("--kv-cache-type {t}: unknown type (f16, q8_0, q4_0)")))
        .transpose()?;
    let o = Ollama {
        num_ctx: a.num_ctx,
        num_gpu: a.num_gpu,
        num_batch: a.num_batch,
        num_parallel: a.num_parallel,
        kv_cache_type,
        flash_attention: a.flash_attention,
        context_length: a.context_length,
    };
    let vram: u64 = gpus.iter().map(|g| g.capacity).sum();
    let hp = Hparams::from_header(&header)?;
    let mut p = o.params(vram, hp.n_ctx_train);
    // Which GPUs Ollama hands llama-server (`server/sched.go`).
    let place = ollama_sched::placement(&header, p.n_ctx, &gpus, o.num_gpu, a.main_gpu, a.sched_spread)?;
    let all_gpus = gpus.clone();
    let gpus: Vec<_> = place.gpus.iter().map(|&i| all_gpus[i].clone()).collect();
    if place.single {
        p.split_mode = SplitMode::None;
    }
    if p.n_gpu_layers.is_none() && !gpus.is_empty() {
        // num_gpu unset: llama-server places as many layers as fit.
        p.n_gpu_layers = Some(fit::max_gpu_layers(&header, &p, &gpus, ram)?.map_or(0, |(n, _)| n));
    }
    let (mut env, mut modelfile) = o.config_lines();
    if a.sched_spread {
        env.push("OLLAMA_SCHED_SPREAD=1".into());
    }
    if let Some(g) = a.main_gpu {
        modelfile.push(format!("PARAMETER main_gpu {g}"));
    }
    let num_ctx = o.num_ctx(vram, hp.n_ctx_train);
    let extra = json!({
        "ollama": {"gpus": place.gpus, "single_gpu": place.single, "predicted_vram_bytes": place.predicted, "num_ctx": num_ctx, "num_parallel": p.n_parallel, "num_batch": p.n_batch, "num_gpu": p.n_gpu_layers,
                   "environment": env, "modelfile": modelfile},
    });
    let mut text = format!("ollama: num_ctx {num_ctx} × OLLAMA_NUM_PARALLEL {} = -c {}\n", p.n_parallel, p.n_ctx);
    if all_gpus.len() > 1 {
        let names: Vec<String> = place.gpus.iter().map(|&i| format!("#{i} {}", all_gpus[i].name)).collect();
        let how = if place.single { "alone (-sm none --main-gpu 0)" } else { "all, layers split by llama-server" };
        text += &format!("ollama: GPUs for llama-server: {} — {how}; PredictServerVRAM {:.2} GiB\n", names.join(", "), place.predicted as f64 / (1u64 << 30) as f64);
    }
    if !env.is_empty() {
        text += &format!("environment: {}\n", env.join(" "));
    }
    if !modelfile.is_empty() {
        text += &format!("Modelfile:\n  {}\n", modelfile.join("\n  "));
    }
    report(&header, &p, &gpus, ram, &a.gguf.display().to_string(), a.devices.json, a.devices.unit(), Some((extra, text)))
}
