//! `vramcalc launch --for …`: the command or config that runs the estimated setup, from the same
//! settings (`vramcalc_core::launch`), and a script that measures it on your own GPU.

use crate::args::{ModelArgs, Settings};
use crate::reverse::{card, serve_config, ServingArgs};
use anyhow::{anyhow, bail, Result};
use clap::Args;
use serde_json::json;
use vramcalc_core::launch::{self, measure, python, sharding};
use vramcalc_core::solve::{self, Variable};

#[derive(Args)]
pub struct LaunchArgs {
    /// vllm | torchrun | peft | deepspeed | accelerate | measure | ollama
    #[arg(long = "for")]
    pub kind: String,
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub settings: Settings,
    #[command(flatten)]
    pub dist: crate::dist::DistArgs,
    #[command(flatten)]
    pub serving: ServingArgs,
    /// vllm: the GPU (its memory sizes the context when --context is left out).
    #[arg(long, default_value = "h100-80gb")]
    pub gpu: String,
    /// The model's Hugging Face id (default: the preset's repository).
    #[arg(long)]
    pub model_id: Option<String>,
    /// ollama: the llama-quantize type of the GGUF (Q4_K_M, Q8_0, …).
    #[arg(long, default_value = "Q4_K_M")]
    pub quant: String,
    /// torchrun: the training script.
    #[arg(long, default_value = "train.py")]
    pub script: String,
    /// `{"kind", "argv" | "config" | "text"}`.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: &LaunchArgs) -> Result<String> {
    let spec = a.model.load()?;
    let id = match (&a.model_id, &a.model.preset) {
        (Some(m), _) => m.clone(),
        (None, Some(p)) => launch::hub_id(p).unwrap_or("MODEL").to_string(),
        (None, None) => "MODEL".into(),
    };
    let out = |kind: &str, v: serde_json::Value, text: String| -> Result<String> {
        if a.json {
            let mut o = json!({"kind": kind});
            if let (Some(m), Some(extra)) = (o.as_object_mut(), v.as_object()) {
                m.extend(extra.clone());
            }
            return Ok(serde_json::to_string_pretty(&o)? + "\n");
        }
        Ok(text)
    };
    match a.kind.as_str() {
        "vllm" => {
            let g = card(&a.gpu)?;
            let mut cfg = serve_config(&spec, &a.model, &a.settings, &a.dist, &a.serving, g.bytes)?;
            // no --context: the longest that the concurrency (default 1) fits
            if a.serving.context.is_none() && a.settings.seq_len.is_none() {
                cfg.concurrency = Some(cfg.concurrency.unwrap_or(1));
                cfg.context = solve::max_serving(&spec, &cfg, Variable::Context)?.value;
            }
            let argv = launch::vllm_serve(&id, &cfg);
            out("vllm", json!({"argv": argv}), launch::shell_line(&argv) + "\n")
        }
        "torchrun" => {
            let argv = launch::torchrun(a.dist.gpus, &a.script);
            out("torchrun", json!({"argv": argv}), launch::shell_line(&argv) + "\n")
        }
        "peft" => {
            let text = python::peft_snippet(&id, &a.model.config(&spec, &a.settings)?)?;
            out("peft", json!({"text": text}), text.clone())
        }
        "deepspeed" => {
            let v = sharding::deepspeed_json(&a.model.config(&spec, &a.settings)?, &a.dist.config()?)?;
            let text = serde_json::to_string_pretty(&v)? + "\n";
            out("deepspeed", json!({"config": v}), text)
        }
        "accelerate" => {
            let text = sharding::accelerate_yaml(&a.model.config(&spec, &a.settings)?, &a.dist.config()?)?;
            out("accelerate", json!({"text": text}), text.clone())
        }
        "measure" => {
            let config = a.model.config(&spec, &a.settings)?;
            let e = vramcalc_core::estimate(&spec, &config)?;
            let preset = a.model.preset.as_deref().unwrap_or_default();
            let is_cnn = vramcalc_core::presets::info(preset).is_some_and(|p| p.family == vramcalc_core::presets::Family::Cnn);
            let model = if is_cnn { measure::Model::Torchvision(preset) } else { measure::Model::CausalLm(&id) };
            if !is_cnn && !vramcalc_core::presets::info(preset).is_some_and(|p| matches!(p.family, vramcalc_core::presets::Family::Llm | vramcalc_core::presets::Family::Moe)) && a.model_id.is_none() {
                bail!("the measurement script covers torchvision CNN presets and causal LMs (a preset, or --model-id for a --hf-config)");
            }
            let text = measure::script(model, &config, e.peak_bytes, e.device_total_bytes)?;
            out("measure", json!({"text": text, "estimate_peak_bytes": e.peak_bytes}), text.clone())
        }
        "ollama" => {
            let (text, num_ctx, num_gpu) = ollama_modelfile(a)?;
            out("ollama", json!({"text": text, "num_ctx": num_ctx, "num_gpu": num_gpu}), text.clone())
        }
        k => Err(anyhow!("--for {k:?} is not one of vllm, torchrun, peft, deepspeed, accelerate, measure, ollama")),
    }
}

/// `--for ollama`: a Modelfile for the model's GGUF in `--quant` (the tensor list llama-quantize
/// writes for its `config.json`), `num_ctx` the `--seq-len` (else Ollama's default for the
/// GPU's memory, capped at the training context) and `num_gpu` the most layers llama.cpp's
/// allocation fits on the GPU at that context.
fn ollama_modelfile(a: &LaunchArgs) -> Result<(String, u64, u64)> {
    use vramcalc_core::llama_cpp::{fit, ollama::Ollama, synth, GpuDevice, Hparams};
    let (name, text) = match (&a.model.hf_config, &a.model.preset) {
        (Some(path), _) => (
            path.file_stem().map_or("MODEL".into(), |s| s.to_string_lossy().to_string()),
            std::fs::read_to_string(path).map_err(|e| anyhow!("reading {}: {e}", path.display()))?,
        ),
        (None, Some(p)) => (p.clone(), vramcalc_core::presets::hf_config(p).ok_or_else(|| anyhow!("preset {p} has no config.json for llama.cpp's tensor list"))?.to_string()),
        _ => bail!("--for ollama needs --preset or --hf-config (the config.json llama.cpp's tensor list is built from)"),
    };
    let config: serde_json::Value = serde_json::from_str(&text).map_err(|e| anyhow!("config.json: {e}"))?;
    let recipe = synth::recipe(&a.quant).ok_or_else(|| anyhow!("--quant {}: not a llama-quantize type (Q4_K_M, Q8_0, …)", a.quant))?;
    let header = synth::header_from_config(&config, recipe)?;
    let g = card(&a.gpu)?;
    let gpus = [GpuDevice { name: g.name.to_string(), capacity: g.bytes }];
    let train = Hparams::from_header(&header)?.n_ctx_train;
    let num_ctx = Ollama { num_ctx: a.settings.seq_len, ..Ollama::default() }.num_ctx(g.bytes, train);
    let o = Ollama { num_ctx: Some(num_ctx), ..Ollama::default() };
    let ngl = fit::max_gpu_layers(&header, &o.params(g.bytes, train), &gpus, None)?.map_or(0, |(n, _)| n);
    let from = a.model_id.clone().unwrap_or_else(|| format!("./{name}-{}.gguf", a.quant.to_ascii_uppercase()));
    Ok((launch::modelfile::modelfile(&from, &o, num_ctx, Some(ngl)), num_ctx, ngl))
}
