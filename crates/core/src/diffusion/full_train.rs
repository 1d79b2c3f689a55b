//! One full fine-tuning step of a UNet as diffusers' `examples/dreambooth/train_dreambooth.py`
//! and `examples/text_to_image/train_text_to_image.py` run it, and of Flux's transformer as
//! `examples/dreambooth/train_dreambooth_flux.py` does (read from their source, diffusers at
//! 58eb52c0):
//!
//! - the UNet loaded in fp32 and trained whole (`unet.train()`; train_dreambooth.py raises
//!   unless `unwrap_model(unet).dtype == torch.float32`); `--mixed_precision fp16|bf16` is
//!   accelerate's: `accelerator.prepare(unet)` wraps its forward in `torch.autocast` and
//!   `convert_outputs_to_fp32`, the weights stay fp32;
//! - `loss = F.mse_loss(model_pred.float(), target.float(), reduction="mean")`,
//!   `accelerator.backward(loss)`, `clip_grad_norm_(unet.parameters(), max_grad_norm)` (in place),
//!   `optimizer.step()` (torch AdamW, or bitsandbytes' `AdamW8bit` with `--use_8bit_adam`), then
//!   `optimizer.zero_grad(set_to_none=args.set_grads_to_none)`: train_dreambooth.py's default
//!   keeps every `.grad` (zeroed) from step to step, train_text_to_image.py's `zero_grad()`
//!   frees them;
//! - `--gradient_checkpointing`: `unet.enable_gradient_checkpointing()` (diffusers' units, as the
//!   LoRA step's, `train.rs`);
//! - train_text_to_image.py `--use_ema`: `EMAModel(unet.parameters())`, an fp32 clone of every
//!   parameter, `ema_unet.to(accelerator.device)` — or kept on the CPU with `--offload_ema`;
//!   `ema_unet.step` runs after `zero_grad()` (no gradients left), one parameter at a time, so
//!   it is not the peak: the copy adds its bytes to the whole step.
//!
//! The VAE and text encoders (frozen, in `weight_dtype`, on the GPU in both scripts) are the
//! caller's: their weights sit beside the step; their no-grad encode passes run before it.
//! Checked against measured steps (`tests/diffusion_full.rs`, `tools/measure_diffusion_full.py`).

use super::component::{Component, ComponentKind, Pass};
use super::pipeline::{component_params, PipelineSpec};
use super::train::{step_from_loss, TrainStep};
use crate::config::{AutocastDevice, Device, OptimizerKind, Precision};
use crate::error::{Error, Result};
use crate::graph::GradRule;
use crate::lower::{Builder, LowerOptions};
use crate::units::{DType, Shape};

/// Which diffusers script, for what `zero_grad` does between steps and what stays loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Script {
    /// `train_dreambooth.py`: `zero_grad(set_to_none=args.set_grads_to_none)`, default False;
    /// the VAE and text encoder on the GPU in `weight_dtype`.
    Dreambooth,
    /// `train_text_to_image.py` (or train_dreambooth.py `--set_grads_to_none`): gradients freed;
    /// the VAE and text encoder on the GPU in `weight_dtype`.
    TextToImage,
    /// `train_text_to_image_sdxl.py`: gradients freed; the embeddings and VAE latents are
    /// precomputed (`train_dataset.map(compute_embeddings_fn)`, `compute_vae_encodings_fn`), then
    /// `del text_encoders, tokenizers, vae` — nothing frozen stays.
    TextToImageSdxl,
    /// `train_dreambooth_flux.py` (Flux's transformer, fp32, `requires_grad_(True)`): gradients
    /// freed (`zero_grad()`); the VAE on the GPU in `weight_dtype`; the instance prompt's
    /// embeddings computed once and `del text_encoder_one, text_encoder_two` (no
    /// `--train_text_encoder`, no per-image captions). Its loss, `mean((weighting.float() *
    /// (model_pred.float() - target.float()) ** 2))`, is modelled as `mse_loss` (latent-sized
    /// temporaries apart, the same).
    DreamboothFlux,
}

impl Script {
    pub fn name(self) -> &'static str {
        match self {
            Script::Dreambooth => "train_dreambooth.py",
            Script::TextToImage => "train_text_to_image.py",
            Script::TextToImageSdxl => "train_text_to_image_sdxl.py",
            Script::DreamboothFlux => "train_dreambooth_flux.py",
        }
    }

    /// Whether a frozen component of `kind` stays on the GPU during training.
    pub fn keeps(self, kind: ComponentKind) -> bool {
        match self {
            Script::Dreambooth | Script::TextToImage => matches!(kind, ComponentKind::Vae | ComponentKind::TextEncoder),
            Script::TextToImageSdxl => false,
            Script::DreamboothFlux => kind == ComponentKind::Vae,
        }
    }
}

/// `--use_ema` and where its copy lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ema {
    None,
    Gpu,
    /// `--offload_ema`: on the CPU between steps (its bytes are CPU RAM).
    Cpu,
}

/// The flags of a full fine-tuning step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FullSettings {
    /// `--mixed_precision`: `Fp32` (no), `AmpFp16` (fp16), `AmpBf16` (bf16).
    pub mixed_precision: Precision,
    pub device: Device,
    pub batch: u64,
    pub checkpointing: bool,
    pub optimizer: OptimizerKind,
    pub script: Script,
    pub ema: Ema,
}

/// The step's figures: the UNet's step, and the EMA copy (its bytes, on the GPU or not).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FullStep {
    pub step: TrainStep,
    pub ema_bytes: u64,
    pub ema_on_gpu: bool,
}

impl FullStep {
    /// The GPU peak of the step (the EMA copy included when it stays on the GPU).
    pub fn peak(&self) -> u64 {
        self.step.peak + if self.ema_on_gpu { self.ema_bytes } else { 0 }
    }
}

/// A full fine-tuning step of `c` (a UNet or Flux's transformer) on `pass`.
pub fn full_step(c: &Component, pass: Pass, s: FullSettings) -> Result<FullStep> {
    if s.ema != Ema::None && matches!(s.script, Script::Dreambooth | Script::DreamboothFlux) {
        return Err(Error::Config(format!("--use-ema is train_text_to_image.py's: {} has no EMA", s.script.name())));
    }
    match c {
        Component::Unet(_) | Component::Flux(_) => {}
        // measured: a tiny SD3 step without checkpointing is 6 % above the estimate's reach
        Component::Sd3(_) => {
            return Err(Error::Config(
                "full fine-tuning of SD3Transformer2DModel (train_dreambooth_sd3.py) is not modelled: its measured step is 6 % off this model; use --finetune lora".into(),
            ))
        }
        _ => {
            return Err(Error::Config(format!(
                "full fine-tuning is modelled for UNet2DConditionModel and FluxTransformer2DModel (diffusers' train_dreambooth.py, train_text_to_image.py, train_dreambooth_flux.py); {} is not: \
                 its full fine-tune has not been measured here, use --finetune lora",
                c.class()
            )))
        }
    }
    let precision = match s.mixed_precision {
        Precision::AmpBf16 | Precision::Bf16 => Precision::AmpBf16,
        Precision::AmpFp16 | Precision::Fp16 => Precision::AmpFp16,
        Precision::Fp32 => Precision::Fp32,
    };
    let autocast_device = match s.device {
        Device::Cpu => AutocastDevice::Cpu,
        Device::Cuda => AutocastDevice::Cuda,
    };
    let opts = LowerOptions { training: true, precision, device: s.device, autocast_device, checkpointing: s.checkpointing, ..LowerOptions::default() };
    let mut b = Builder::new(opts);
    let out = c.lower_into(&mut b, pass)?;
    // `convert_outputs_to_fp32`, then `F.mse_loss(model_pred.float(), target.float())`
    let shape = b.shape(out).clone();
    let pred = b.cast(out, DType::F32);
    let target = b.input(shape, DType::F32);
    let loss = b.op("mse_loss", &[pred, target], &[(Shape::new([]), DType::F32)], &[pred, target], false, &[], GradRule::Alloc)[0];
    let step = step_from_loss(b, loss, s.optimizer, s.batch, s.script == Script::Dreambooth, 0);
    let ema_bytes = if s.ema == Ema::None { 0 } else { step.params * 4 };
    Ok(FullStep { step, ema_bytes, ema_on_gpu: s.ema == Ema::Gpu })
}

/// A full fine-tuning job: the step, and the frozen components the script keeps on the GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FullJob {
    pub step: FullStep,
    /// `(component, bytes)` on the GPU beside the step, in the pipeline's order.
    pub resident: Vec<(String, u64)>,
    /// The step's GPU peak plus the resident components.
    pub peak: u64,
}

/// The job of `c` with the pipeline `spec` around it when known (its VAE and text encoders in
/// `weight_dtype`: `vae.to(accelerator.device, dtype=weight_dtype)`,
/// `text_encoder.to(accelerator.device, dtype=weight_dtype)` in train_dreambooth.py and
/// train_text_to_image.py); without it, the UNet's step alone.
pub fn full_job(c: &Component, spec: Option<&PipelineSpec>, pass: Pass, s: FullSettings) -> Result<FullJob> {
    let step = full_step(c, pass, s)?;
    let size = match s.mixed_precision {
        Precision::Fp32 => 4,
        _ => 2,
    };
    let mut resident = Vec::new();
    for (n, comp) in spec.map_or(&[][..], |p| &p.components[..]) {
        if s.script.keeps(comp.kind()) {
            resident.push((n.clone(), component_params(comp)?.saturating_mul(size)));
        }
    }
    let peak = step.peak().saturating_add(resident.iter().map(|r| r.1).sum());
    Ok(FullJob { step, resident, peak })
}

/// The script diffusers trains `c` with by default: SDXL's UNet (its text-time embedding) by
/// train_text_to_image_sdxl.py (train_dreambooth.py has no SDXL path), `--use_ema` by
/// train_text_to_image.py, Flux's transformer by train_dreambooth_flux.py, else train_dreambooth.py (`set_grads_to_none` frees the gradients).
pub fn default_script(c: &Component, ema: bool, set_grads_to_none: bool) -> Script {
    match c {
        Component::Flux(_) => Script::DreamboothFlux,
        Component::Unet(u) if u.text_time.is_some() => Script::TextToImageSdxl,
        _ if ema || set_grads_to_none => Script::TextToImage,
        _ => Script::Dreambooth,
    }
}
