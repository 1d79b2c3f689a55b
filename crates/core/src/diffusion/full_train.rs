//! One full fine-tuning step of a UNet as diffusers' `examples/dreambooth/train_dreambooth.py`
//! and `examples/text_to_image/train_text_to_image.py` run it (read from their source):
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

use super::component::{Component, Pass};
use super::train::{step_from_loss, TrainStep};
use crate::config::{AutocastDevice, Device, OptimizerKind, Precision};
use crate::error::{Error, Result};
use crate::graph::GradRule;
use crate::lower::{Builder, LowerOptions};
use crate::units::{DType, Shape};

/// Which diffusers script, for what `zero_grad` does between steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Script {
    /// `train_dreambooth.py`: `zero_grad(set_to_none=args.set_grads_to_none)`, default False.
    Dreambooth,
    /// `train_text_to_image.py` (or `--set_grads_to_none`): gradients freed.
    TextToImage,
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

/// A full fine-tuning step of `c` (a UNet) on `pass`.
pub fn full_step(c: &Component, pass: Pass, s: FullSettings) -> Result<FullStep> {
    if !matches!(c, Component::Unet(_)) {
        return Err(Error::Config(format!(
            "full fine-tuning is modelled for UNet2DConditionModel (diffusers' train_dreambooth.py, train_text_to_image.py); {} is not: \
             its full fine-tune has not been measured here, use --finetune lora",
            c.class()
        )));
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
    let step = step_from_loss(b, loss, s.optimizer, s.batch, s.script == Script::Dreambooth);
    let ema_bytes = if s.ema == Ema::None { 0 } else { step.params * 4 };
    Ok(FullStep { step, ema_bytes, ema_on_gpu: s.ema == Ema::Gpu })
}
