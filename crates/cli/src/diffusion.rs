//! `vramcalc estimate --pipeline ID | --model-index FILE | --diffusers-config FILE`: diffusers
//! pipelines and their components (core `diffusion`), and `vramcalc diffusion-table`.

use crate::args::{ModelArgs, Settings};
use crate::dist::DistArgs;
use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use serde_json::json;
use std::fmt::Write;
use std::path::Path;
use vramcalc_core::diffusion::component::dtype_of;
use vramcalc_core::diffusion::pipeline::{component_params, PipelineEstimate};
use vramcalc_core::diffusion::train_whatif::LoraSetup;
use vramcalc_core::diffusion::{presets, Component, ComponentKind, Guidance, Offload, Pass, PipelineSettings, PipelineSpec, WeightDType};
use vramcalc_core::memory::device::{CUBLAS_WORKSPACE_BYTES, CUDA_CONTEXT_BYTES};
use vramcalc_core::{format_bytes, thousands, ByteUnit, Device};

/// The settings of image and video generation.
#[derive(Args, Clone)]
pub struct DiffusionArgs {
    /// Output width in pixels (default: the pipeline's, 512 for SD 1.5, 832 for Wan, else 1024).
    #[arg(long)]
    pub width: Option<u64>,
    /// Output height in pixels (default: the pipeline's, 480 for Wan).
    #[arg(long)]
    pub height: Option<u64>,
    /// Video frames (Wan; default 81).
    #[arg(long)]
    pub frames: Option<u64>,
    /// T5/UMT5 prompt tokens (`max_sequence_length`: SD3 256, Flux and Wan 512); CLIP runs at 77.
    #[arg(long)]
    pub text_len: Option<u64>,
    /// Images (or videos) per prompt (`num_images_per_prompt`).
    #[arg(long, default_value_t = 1)]
    pub images_per_prompt: u64,
    /// cfg | distilled | none (default: cfg, Flux-dev distilled, Flux-schnell none).
    #[arg(long)]
    pub guidance: Option<String>,
    /// `vae.enable_tiling()`, with tiles of TILE_PX pixels (default: the VAE's sample_size).
    #[arg(long, num_args = 0..=1, default_missing_value = "0", value_name = "TILE_PX")]
    pub vae_tiling: Option<u64>,
    /// `vae.enable_slicing()`: decode the batch one image at a time.
    #[arg(long)]
    pub vae_slicing: bool,
    /// Per-component dtypes: `transformer=nf4,text_encoder_2=fp8` (fp32 | fp16 | bf16 | fp8 | nf4).
    #[arg(long)]
    pub component_dtype: Option<String>,
    /// Full fine-tuning (`--mode train` without `--finetune lora`): train_text_to_image.py's
    /// --use_ema (an fp32 copy of the UNet on the GPU).
    #[arg(long)]
    pub use_ema: bool,
    /// Full fine-tuning: --offload_ema (the EMA copy in CPU RAM between steps).
    #[arg(long)]
    pub offload_ema: bool,
    /// Full fine-tuning: train_dreambooth.py's --set_grads_to_none (gradients freed between steps).
    #[arg(long)]
    pub set_grads_to_none: bool,
    /// Full fine-tuning: train_dreambooth.py's --train_text_encoder (not modelled: refused).
    #[arg(long)]
    pub train_text_encoder: bool,
    /// `--mode train`: whose LoRA script, diffusers (its train_dreambooth_lora*.py) | kohya
    /// (sd-scripts' train_network.py / sdxl_train_network.py, UNets).
    #[arg(long, default_value = "diffusers")]
    pub trainer: String,
    /// kohya's --cache_latents: the VAE off the GPU after caching.
    #[arg(long)]
    pub cache_latents: bool,
    /// kohya's --cache_text_encoder_outputs (SDXL): the text encoders off the GPU.
    #[arg(long)]
    pub cache_text_encoder_outputs: bool,
    /// kohya's --network_train_unet_only: no text-encoder LoRA.
    #[arg(long)]
    pub network_train_unet_only: bool,
    /// kohya's --full_bf16: the LoRA network (and its gradients and optimizer state) in bf16.
    #[arg(long)]
    pub full_bf16: bool,
    /// kohya's --full_fp16.
    #[arg(long)]
    pub full_fp16: bool,
    /// kohya's `--network_args conv_dim=N`: LoRA on the resnets' and samplers' convs too.
    #[arg(long, default_value_t = 0)]
    pub conv_dim: u32,
    /// kohya's --fp8_base: the frozen UNet and text encoders stored in float8_e4m3fn.
    #[arg(long)]
    pub fp8_base: bool,
    /// kohya's --fp8_base_unet: the frozen UNet alone in float8_e4m3fn.
    #[arg(long)]
    pub fp8_base_unet: bool,
}

fn dtype(v: &str, flag: &str) -> Result<WeightDType> {
    WeightDType::parse(v).ok_or_else(|| anyhow!("--{flag} {v:?} is not one of fp32, fp16, bf16, fp8, nf4"))
}

/// The pipeline settings from the flags; `spec` picks the components `--weights` applies to.
pub(crate) fn settings(s: &Settings, dist: &DistArgs, d: &DiffusionArgs, spec: Option<&PipelineSpec>) -> Result<PipelineSettings> {
    if dist.gpus > 1 || dist.tp > 1 || dist.strategy.is_some() || dist.sequence_parallel {
        bail!("diffusion pipelines run on one GPU: leave out --gpus, --strategy, --tp and --sequence-parallel");
    }
    let offload = match dist.offload.as_deref() {
        None => Offload::None,
        Some(v) => Offload::parse(v).ok_or_else(|| anyhow!("--offload {v:?}: a pipeline's offload is one of none, model, sequential, group"))?,
    };
    let precision = s.precision.as_deref().map(|p| match p {
        "fp32" | "fp16" | "bf16" => dtype(p, "precision"),
        other => Err(anyhow!("--precision {other:?}: a pipeline runs in fp32, fp16 or bf16 (fp8 and nf4 weights: --weights or --component-dtype)")),
    });
    let mut component_dtypes = Vec::new();
    if let Some(w) = &s.weights {
        // `--weights` stores the denoiser (the big model) in that format
        let w = dtype(w, "weights")?;
        if let Some(spec) = spec {
            for (name, c) in &spec.components {
                if c.kind() == ComponentKind::Denoiser {
                    component_dtypes.push((name.clone(), w));
                }
            }
        }
    }
    if let Some(list) = &d.component_dtype {
        for item in list.split(',').filter(|i| !i.is_empty()) {
            let (name, dt) = item.split_once('=').ok_or_else(|| anyhow!("--component-dtype {item:?} is not NAME=DTYPE"))?;
            if let Some(spec) = spec {
                if !spec.components.iter().any(|c| c.0 == name) {
                    let names: Vec<&str> = spec.components.iter().map(|c| c.0.as_str()).collect();
                    bail!("--component-dtype: the pipeline has no component {name:?} ({})", names.join(", "));
                }
            }
            component_dtypes.push((name.to_string(), dtype(dt, "component-dtype")?));
        }
    }
    let guidance = d.guidance.as_deref().map(|g| Guidance::parse(g).ok_or_else(|| anyhow!("--guidance {g:?} is not one of cfg, distilled, none"))).transpose()?;
    let device = Device::parse(&s.device).ok_or_else(|| anyhow!("--device {:?} is not one of cuda, cpu", s.device))?;
    Ok(PipelineSettings {
        width: d.width,
        height: d.height,
        frames: d.frames,
        text_len: d.text_len,
        batch: s.batch.unwrap_or(1),
        images_per_prompt: d.images_per_prompt,
        guidance,
        offload,
        vae_tiling: d.vae_tiling,
        vae_slicing: d.vae_slicing,
        dtype: precision.transpose()?,
        component_dtypes,
        device,
    })
}

/// Reads a `model_index.json` and each component's `<folder>/config.json` beside it.
pub(crate) fn load_index(path: &Path) -> Result<PipelineSpec> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let dir = path.parent().unwrap_or(Path::new("."));
    PipelineSpec::from_model_index(&text, |name| std::fs::read_to_string(dir.join(name).join("config.json")).ok())
        .with_context(|| format!("in {}", path.display()))
}

pub fn run(model: &ModelArgs, s: &Settings, dist: &DistArgs, d: &DiffusionArgs, json: bool) -> Result<String> {
    let mode = s.mode.as_deref().unwrap_or("infer");
    if !matches!(mode, "infer" | "decode" | "train") {
        bail!("--mode {mode:?}: a diffusion pipeline's mode is infer, decode or train");
    }
    if let Some(path) = &model.diffusers_config {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let c = Component::from_json(&text).with_context(|| format!("in {}", path.display()))?;
        if mode == "train" {
            return match trainer(d)? {
                Trainer::Kohya => crate::kohya::train(&c, c.class(), None, s, dist, d, json),
                Trainer::Diffusers if crate::diffusion_full::is_full(d, s)? => crate::diffusion_full::train(&c, c.class(), None, s, dist, d, json),
                Trainer::Diffusers => train(&c, c.class(), s, dist, d, json),
            };
        }
        return component(&c, s, dist, d, mode, json);
    }
    let spec = match (&model.pipeline, &model.model_index) {
        (Some(id), _) => PipelineSpec::preset(id)?,
        (_, Some(path)) => load_index(path)?,
        _ => bail!("give --pipeline, --model-index or --diffusers-config"),
    };
    if mode == "train" {
        let (name, c) = spec.components.iter().find(|c| c.1.kind() == ComponentKind::Denoiser).ok_or_else(|| anyhow!("the pipeline has no denoiser"))?;
        let d = &pipeline_size(d, &spec);
        return match trainer(d)? {
            Trainer::Kohya => crate::kohya::train(c, name, Some(&spec), s, dist, d, json),
            Trainer::Diffusers if crate::diffusion_full::is_full(d, s)? => crate::diffusion_full::train(c, name, Some(&spec), s, dist, d, json),
            Trainer::Diffusers => train(c, name, s, dist, d, json),
        };
    }
    let ps = settings(s, dist, d, Some(&spec))?;
    let e = spec.estimate_stages(&ps, mode == "infer")?;
    let e = if mode == "decode" { decode_only(e) } else { e };
    let unit = s.unit();
    if json {
        return Ok(serde_json::to_string_pretty(&pipeline_json(&spec, &e))? + "\n");
    }
    Ok(pipeline_text(&spec, &e, unit))
}

enum Trainer {
    Diffusers,
    Kohya,
}

fn trainer(d: &DiffusionArgs) -> Result<Trainer> {
    let kohya_only = d.conv_dim > 0 || d.cache_latents || d.cache_text_encoder_outputs || d.network_train_unet_only || d.full_bf16 || d.full_fp16 || d.fp8_base || d.fp8_base_unet;
    match d.trainer.as_str() {
        "kohya" => Ok(Trainer::Kohya),
        "diffusers" if kohya_only => bail!("--conv-dim, --cache-latents, --cache-text-encoder-outputs, --network-train-unet-only, --full-bf16, --full-fp16, --fp8-base and --fp8-base-unet are kohya's: add --trainer kohya"),
        "diffusers" => Ok(Trainer::Diffusers),
        t => bail!("--trainer {t:?}: one of diffusers, kohya"),
    }
}

/// `--mode decode`: the VAE decode stage alone.
fn decode_only(mut e: PipelineEstimate) -> PipelineEstimate {
    e.stages.retain(|st| st.name == "decode");
    if let Some(top) = e.stages.first() {
        e.peak_bytes = top.peak;
        e.gpu_bytes = top.peak;
        e.peak_stage = top.name.clone();
        e.cpu_ram_bytes = top.cpu_weights;
    }
    e
}

fn pipeline_json(spec: &PipelineSpec, e: &PipelineEstimate) -> serde_json::Value {
    json!({
        "pipeline": spec.name,
        "class": spec.class,
        "peak_bytes": e.peak_bytes,
        "peak_stage": e.peak_stage,
        "params": e.params,
        "width": e.width, "height": e.height, "frames": e.frames,
        "offload": e.offload, "guidance": e.guidance,
        "stages": e.stages.iter().map(|st| json!({
            "name": st.name, "component": st.component, "peak_bytes": st.peak, "activation_bytes": st.activations,
            "gpu_weight_bytes": st.gpu_weights, "cpu_weight_bytes": st.cpu_weights, "resident": st.resident,
            "batch": st.batch, "note": st.note,
        })).collect::<Vec<_>>(),
        "components": e.components,
        "devices": {"gpu_bytes": e.gpu_bytes, "cpu_ram_bytes": e.cpu_ram_bytes,
            "gpu_total_bytes_approx": e.gpu_bytes + CUDA_CONTEXT_BYTES + CUBLAS_WORKSPACE_BYTES},
    })
}

fn pipeline_text(spec: &PipelineSpec, e: &PipelineEstimate, unit: ByteUnit) -> String {
    let f = |b: u64| format_bytes(b, unit);
    let mut o = String::new();
    let size = if e.frames > 1 { format!("{}×{}×{} frames", e.width, e.height, e.frames) } else { format!("{}×{}", e.width, e.height) };
    let _ = writeln!(o, "{}: {size}, guidance {}, offload {}", spec.name, e.guidance, e.offload);
    let _ = writeln!(o, "\n{:<16} {:<30} {:>16} {:>6} {:>10}", "component", "class", "params", "dtype", "weights");
    for c in &e.components {
        let _ = writeln!(o, "{:<16} {:<30} {:>16} {:>6} {:>10}", c.name, c.class, thousands(c.params), c.dtype, f(c.weight_bytes));
    }
    let _ = writeln!(o, "\n{:<24} {:>10} {:>12} {:>12} {:>10}  resident on the GPU", "stage", "peak", "weights GPU", "activations", "CPU RAM");
    for st in &e.stages {
        let _ = writeln!(o, "{:<24} {:>10} {:>12} {:>12} {:>10}  {}", st.name, f(st.peak), f(st.gpu_weights), f(st.activations), f(st.cpu_weights), st.resident.join(", "));
        if !st.note.is_empty() {
            let _ = writeln!(o, "{:<24} batch {}: {}", "", st.batch, st.note);
        }
    }
    let _ = writeln!(o, "\npeak allocated                 {:>12}   ({})", f(e.peak_bytes), e.peak_stage);
    let _ = writeln!(o, "device total (approx.)         {:>12}   (+ CUDA context and cuBLAS workspace)", f(e.peak_bytes + CUDA_CONTEXT_BYTES + CUBLAS_WORKSPACE_BYTES));
    let _ = writeln!(o, "CPU RAM for offloaded weights  {:>12}", f(e.cpu_ram_bytes));
    let _ = writeln!(o, "parameters                     {:>12}", thousands(e.params));
    o
}

/// `d` with the pipeline's own size where the flags give none (`--width`'s help: SD 1.5 trains
/// at 512 × 512, Wan at 832 × 480 × 81), as inference and the app's pipeline panel default;
/// [`lora_setup`]'s 1024 × 1024 is for a lone `--diffusers-config`, which has no pipeline.
pub(crate) fn pipeline_size(d: &DiffusionArgs, spec: &PipelineSpec) -> DiffusionArgs {
    let (w, h, f) = spec.default_size();
    let mut d = d.clone();
    d.width = d.width.or(Some(w));
    d.height = d.height.or(Some(h));
    d.frames = d.frames.or(Some(f));
    d
}

/// `--mode train`: one LoRA step of the denoiser on cached latents and text embeddings (the VAE
/// and the text encoders are not loaded), as diffusers' LoRA scripts run it (core `diffusion::train`).
/// The LoRA step's setup from the flags (1024 × 1024 and the family's text length by default).
pub(crate) fn lora_setup(c: &Component, s: &Settings, dist: &DistArgs, d: &DiffusionArgs) -> Result<LoraSetup> {
    let ps = settings(s, dist, d, None)?;
    let config = s.config(&vramcalc_core::ModelSpec::from_json(r#"{"input":{"shape":[1]},"layers":[]}"#)?)?;
    let dt = ps.dtype.unwrap_or(WeightDType::Bf16);
    let (w, h) = (d.width.unwrap_or(1024), d.height.unwrap_or(1024));
    let frames = d.frames.unwrap_or(if matches!(c, Component::Wan(_)) { 81 } else { 1 });
    let text_len = d.text_len.unwrap_or(match c {
        Component::Unet(_) => 77,
        Component::Sd3(_) => 333,
        _ => 512,
    });
    Ok(LoraSetup {
        pass: Pass::Denoise { width: w, height: h, frames, text_len },
        precision: dt.compute(),
        device: ps.device,
        batch: ps.batch.saturating_mul(ps.images_per_prompt),
        finetune: config.finetune,
        checkpointing: config.checkpointing,
        optimizer: config.optimizer,
    })
}

fn train(c: &Component, name: &str, s: &Settings, dist: &DistArgs, d: &DiffusionArgs, json: bool) -> Result<String> {
    let setup = lora_setup(c, s, dist, d)?;
    let Pass::Denoise { width: w, height: h, frames, .. } = setup.pass else { bail!("a LoRA step is of the denoiser") };
    let batch = setup.batch;
    let config = &setup;
    let step = setup.step(c)?;
    if json {
        let v = json!({"component": name, "class": c.class(), "peak_bytes": step.peak, "params": step.params,
            "trainable_params": step.trainable, "param_bytes": step.param_bytes, "batch": batch, "width": w, "height": h,
            "frames": frames, "checkpointing": config.checkpointing, "optimizer": config.optimizer.name(),
            "devices": {"gpu_bytes": step.peak, "gpu_total_bytes_approx": step.peak + CUDA_CONTEXT_BYTES + CUBLAS_WORKSPACE_BYTES}});
        return Ok(serde_json::to_string_pretty(&v)? + "\n");
    }
    let u = s.unit();
    Ok(format!(
        "{name} ({}): LoRA step at {w}×{h}, batch {batch}, {}{} (cached latents and text embeddings; modelled, see docs/diffusion.md)\nparameters      {:>16}\ntrainable       {:>16}\npeak allocated  {:>16}\n",
        c.class(),
        config.optimizer.name(),
        if config.checkpointing { ", gradient checkpointing" } else { "" },
        thousands(step.params),
        thousands(step.trainable),
        format_bytes(step.peak, u)
    ))
}

/// `--diffusers-config`: one forward of one component.
fn component(c: &Component, s: &Settings, dist: &DistArgs, d: &DiffusionArgs, mode: &str, json: bool) -> Result<String> {
    let ps = settings(s, dist, d, None)?;
    let dt = ps.dtype.unwrap_or(WeightDType::Bf16);
    let (w, h) = (d.width.unwrap_or(1024), d.height.unwrap_or(1024));
    let frames = d.frames.unwrap_or(if matches!(c, Component::Wan(_) | Component::WanVae(_)) { 81 } else { 1 });
    let text_len = d.text_len.unwrap_or(if matches!(c, Component::Text(_)) { 77 } else { 512 });
    let pass = match (c.kind(), mode) {
        (ComponentKind::Vae, _) => Pass::Decode { width: w, height: h, frames },
        (_, "decode") => bail!("--mode decode needs a VAE config"),
        _ => c.default_pass(w, h, frames, text_len),
    };
    let batch = ps.batch.saturating_mul(ps.images_per_prompt);
    let f = c.forward(pass, dt.compute(), ps.device, batch)?;
    let params = component_params(c)?;
    if json {
        let v = json!({"class": c.class(), "peak_bytes": f.peak, "params": params, "param_bytes": f.param_bytes,
            "buffer_bytes": f.buffer_bytes, "activation_bytes": f.activations(), "batch": batch, "pass": format!("{pass:?}"),
            "dtype": dt.name(), "bytes_per_element": dtype_of(dt.compute()).size()});
        return Ok(serde_json::to_string_pretty(&v)? + "\n");
    }
    let u = s.unit();
    Ok(format!(
        "{}: {pass:?}, batch {batch}, {}\nparameters      {:>16}\nweights         {:>16}\nactivations     {:>16}\npeak allocated  {:>16}\n",
        c.class(),
        dt.name(),
        thousands(params),
        format_bytes(f.param_bytes + f.buffer_bytes, u),
        format_bytes(f.activations(), u),
        format_bytes(f.peak, u)
    ))
}

/// The presets on cards of `cards` GB: the first setup (offload mode, then denoiser and T5
/// dtype) whose device total fits, at each pipeline's default size, batch 1.
pub fn table(cards: &[u64]) -> Result<String> {
    let tries: &[(Offload, Option<WeightDType>)] = &[
        (Offload::None, None),
        (Offload::Model, None),
        (Offload::None, Some(WeightDType::Fp8)),
        (Offload::Model, Some(WeightDType::Fp8)),
        (Offload::Model, Some(WeightDType::Nf4)),
        (Offload::Group, None),
        (Offload::Sequential, None),
    ];
    let mut o = String::new();
    let _ = writeln!(o, "| pipeline | size | {} |", cards.iter().map(|c| format!("{c} GB")).collect::<Vec<_>>().join(" | "));
    let _ = writeln!(o, "|---|---|{}", "---|".repeat(cards.len()));
    for id in presets::ids() {
        let spec = PipelineSpec::preset(id)?;
        let big: Vec<String> = spec
            .components
            .iter()
            .filter(|(_, c)| c.kind() == ComponentKind::Denoiser || matches!(c, Component::Text(t) if t.class.contains("T5")))
            .map(|(n, _)| n.clone())
            .collect();
        let mut cells = Vec::new();
        let mut size = String::new();
        for &card in cards {
            let cap = card.saturating_mul(1_000_000_000);
            let mut cell = "does not fit".to_string();
            for &(offload, dt) in tries {
                let s = PipelineSettings {
                    offload,
                    component_dtypes: dt.map(|d| big.iter().map(|n| (n.clone(), d)).collect()).unwrap_or_default(),
                    ..PipelineSettings::default()
                };
                let e = spec.estimate(&s)?;
                size = if e.frames > 1 { format!("{}×{}×{}", e.width, e.height, e.frames) } else { format!("{}×{}", e.width, e.height) };
                let total = e.peak_bytes + CUDA_CONTEXT_BYTES + CUBLAS_WORKSPACE_BYTES;
                if total <= cap {
                    let dname = dt.map_or(spec.default_dtype().name(), |d| d.name());
                    cell = format!("✓ {offload} offload, {dname} ({:.1} GB)", total as f64 / 1e9);
                    if offload == Offload::None {
                        cell = format!("✓ no offload, {dname} ({:.1} GB)", total as f64 / 1e9);
                    }
                    break;
                }
            }
            cells.push(cell);
        }
        let _ = writeln!(o, "| {id} | {size} | {} |", cells.join(" | "));
    }
    Ok(o)
}
