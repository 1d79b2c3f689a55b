//! One LoRA training step of a UNet as kohya-ss/sd-scripts' `train_network.py` (and
//! `sdxl_train_network.py`, which subclasses its `NetworkTrainer`) runs it, read from its source
//! (commit 48d368fa):
//!
//! - the network (`networks/lora.py`, `create_network`, `LoRANetwork.create_modules`): a
//!   `LoRAModule` of rank `--network_dim` on every `Linear` and 1×1 `Conv2d` inside each
//!   `Transformer2DModel` (`UNET_TARGET_REPLACE_MODULE`), its forward in `layer/lora_kohya.rs`;
//!   with `conv_dim`, also every Linear and conv of the `ResnetBlock2D`s, `Downsample2D`s and
//!   `Upsample2D`s (`UNET_TARGET_REPLACE_MODULE_CONV2D_3X3`, 3×3 convs at rank `conv_dim`);
//!   `--network_alpha` scales, no memory;
//! - dtypes (`train_network.py`, `train`): `weight_dtype` from `--mixed_precision`
//!   (`train_util.prepare_dtype`), `unet.requires_grad_(False)`, `unet.to(dtype=weight_dtype)`;
//!   the network fp32, or `network.to(weight_dtype)` with `--full_bf16` / `--full_fp16`; the
//!   forward under `accelerator.autocast()` (`get_noise_pred_and_target`);
//! - `noisy_latents.requires_grad_(train_unet)`, and under `--gradient_checkpointing` the text
//!   conds' `requires_grad_(True)` and `unet.enable_gradient_checkpointing()` (here diffusers'
//!   granularity: each resnet and each `BasicTransformerBlock`);
//! - the loss outside autocast: `train_util.conditional_loss(noise_pred.float(), target.float(),
//!   "l2", "none")` (`F.mse_loss(..., reduction="none")`), `.mean([1, 2, 3])`, `* loss_weights`,
//!   `.mean()`, `accelerator.backward(loss)`, `optimizer.step()` over the network
//!   (`--optimizer_type`: AdamW, AdamW8bit, …);
//! - `--cache_latents`: the VAE encodes the dataset once, then `vae.to("cpu")`; without it the
//!   VAE stays on the GPU (`vae.to(accelerator.device, dtype=vae_dtype)`), frozen. The text
//!   encoders stay on the GPU in `weight_dtype` unless `--cache_text_encoder_outputs` (which
//!   needs `--network_train_unet_only`); without `--network_train_unet_only` their LoRA trains
//!   too and they run inside the step ([`kohya_step_with`], `diffusion/kohya_te.rs`);
//! - `--fp8_base` / `--fp8_base_unet`: [`Fp8Base`].
//!
//! Checked against measured steps (`tests/diffusion.rs`, `tools/measure_kohya_lora.py`: kohya's
//! `LoRAModule` on diffusers' `UNet2DConditionModel`, CPU autocast).

use super::component::{Component, Pass};
use super::train::TrainStep;
use crate::config::{AutocastDevice, Device, OptimizerKind, Precision};
use crate::error::{Error, Result};
use crate::finetune::{FineTune, Method};
use crate::graph::GradRule;
use crate::finetune::kohya::Kohya;
use crate::lower::{Builder, LowerOptions};
use crate::units::{DType, Shape};

/// kohya's flags that change the step's memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KohyaSettings {
    /// `--mixed_precision`: `Fp32` (no), `AmpBf16` (bf16), `AmpFp16` (fp16).
    pub mixed_precision: Precision,
    /// `--full_bf16` / `--full_fp16`: the network in `weight_dtype` too.
    pub full_half: bool,
    /// `--network_dim`.
    pub network_dim: u32,
    pub checkpointing: bool,
    /// The checkpointing units of kohya's SD 1.x/2.x UNet (`library/original_unet.py`: each
    /// resnet and each whole `Transformer2DModel`, the mid block's first resnet included) rather
    /// than diffusers' (each resnet but that one, each `BasicTransformerBlock`), which is also
    /// what kohya's SDXL UNet (`sdxl_original_unet.py`) checkpoints, bar its up/downsamplers.
    pub sd1_port: bool,
    /// `--network_args conv_dim=N` (0: none).
    pub conv_dim: u32,
    pub optimizer: OptimizerKind,
}

impl KohyaSettings {
    fn weight_dtype(&self) -> DType {
        match self.mixed_precision {
            Precision::AmpBf16 | Precision::Bf16 => DType::Bf16,
            Precision::AmpFp16 | Precision::Fp16 => DType::F16,
            Precision::Fp32 => DType::F32,
        }
    }
}

/// kohya's `--fp8_base` / `--fp8_base_unet` (`train_network.py`, `train`: "Experimental Feature:
/// Put base model into fp8"): the frozen UNet (`unet.to(dtype=torch.float8_e4m3fn)`, every
/// parameter, norms and biases too) and, with `--fp8_base`, the text encoders but their
/// embeddings (`prepare_text_encoder_fp8`: "nn.Embedding not support FP8") stored in
/// `float8_e4m3fn`, after the network is made (it stays fp32 or `--full_*`). Nothing upcasts
/// them but autocast (`accelerator.autocast()`): each Linear's and conv's fp8 weight becomes a
/// new `weight_dtype` copy at each use (`cached_cast` caches only leaves that require grad), kept
/// for the backward where the op's input requires grad — which, outside a checkpointed unit, is
/// every op after the first LoRA (and, with kohya's `noisy_latents.requires_grad_(True)`, from the
/// first conv on); a checkpointed unit frees them and casts again in its recompute.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Fp8Base {
    #[default]
    Off,
    /// `--fp8_base`: the UNet and the text encoders.
    All,
    /// `--fp8_base_unet`: the UNet only; the text encoders in `weight_dtype`.
    Unet,
}

/// A kohya LoRA step of `c` (a UNet) on `pass` at `batch` on cached latents and text encoder
/// outputs; the frozen VAE and text encoders a run without caching keeps are the caller's.
pub fn kohya_step(c: &Component, pass: Pass, s: KohyaSettings, device: Device, batch: u64) -> Result<TrainStep> {
    kohya_step_with(c, &[], Fp8Base::Off, pass, s, device, batch)
}

/// [`kohya_step`] with kohya's text-encoder LoRA (`diffusion/kohya_te.rs`) when `encoders` is not
/// empty (run without `--network_train_unet_only`): the encoders (frozen, in the weight dtype)
/// run inside the step, their LoRA trains beside the UNet's; the peak includes their weights.
/// `fp8` stores the frozen weights in fp8 ([`Fp8Base`]).
pub fn kohya_step_with(c: &Component, encoders: &[&Component], fp8: Fp8Base, pass: Pass, s: KohyaSettings, device: Device, batch: u64) -> Result<TrainStep> {
    let Component::Unet(unet) = c else {
        return Err(Error::Config(format!(
            "kohya's trainer is modelled for UNet2DConditionModel (train_network.py, sdxl_train_network.py); {} is trained by another script",
            c.class()
        )));
    };
    let tes = encoders
        .iter()
        .map(|e| match e {
            Component::Text(t) => Ok(t),
            other => Err(Error::Config(format!("{} is not a text encoder", other.class()))),
        })
        .collect::<Result<Vec<_>>>()?;
    if s.network_dim == 0 {
        return Err(Error::Config("--network-dim (--lora-r) must be at least 1".into()));
    }
    let weight = s.weight_dtype();
    if s.full_half && weight == DType::F32 {
        return Err(Error::Config("--full-bf16 / --full-fp16 need --precision bf16 or fp16 (kohya asserts mixed_precision)".into()));
    }
    let precision = match weight {
        DType::Bf16 => Precision::AmpBf16,
        DType::F16 => Precision::AmpFp16,
        _ => Precision::Fp32,
    };
    let finetune = FineTune { method: Method::Lora, lora_r: s.network_dim, ..FineTune::default() };
    let autocast_device = match device {
        Device::Cpu => AutocastDevice::Cpu,
        Device::Cuda => AutocastDevice::Cuda,
    };
    let opts = LowerOptions { training: true, precision, device, autocast_device, checkpointing: s.checkpointing, finetune, ..LowerOptions::default() };
    let mut b = Builder::new(opts);
    let adapter = if s.full_half { weight } else { DType::F32 };
    if fp8 != Fp8Base::Off && weight == DType::F32 {
        return Err(Error::Config("--fp8-base needs --precision bf16 or fp16 (kohya asserts: \"fp8_base requires mixed precision='fp16' or 'bf16'\")".into()));
    }
    let unet_weights = if fp8 == Fp8Base::Off { weight } else { DType::F8E4m3 };
    let te_weights = if fp8 == Fp8Base::All { DType::F8E4m3 } else { weight };
    b.kohya = Some(Kohya { adapter, base: weight, weights: unet_weights, in_scope: false, grad_inputs: if s.checkpointing { 2 } else { 1 }, sd1_checkpointing: s.sd1_port, conv_dim: s.conv_dim });
    let (out, kept, te_group) = if tes.is_empty() {
        (c.lower_into(&mut b, pass)?, 0, 0)
    } else {
        let Pass::Denoise { width, height, text_len, .. } = pass else { return Err(Error::Config("a kohya step is of the denoiser".into())) };
        let conds = super::kohya_te::encode(&mut b, &tes, te_weights, text_len, unet.cross_attention_dim)?;
        // the text encoders' LoRA are the first trainable parameters: their own param group
        let te_group = b.g.trainable_params().count();
        b.style = crate::finetune::NameStyle::Diffusers;
        b.frozen = true;
        let out = unet.forward_cond(&mut b, (height / 8).max(1), (width / 8).max(1), text_len, Some((conds.text, conds.pool))).map_err(|e| Error::Config(format!("{}: {e}", c.class())))?;
        (out, conds.embedding_grad_bytes, te_group)
    };
    // outside autocast: `F.mse_loss(pred.float(), target.float(), reduction="none")`
    let shape = b.shape(out).clone();
    let target = b.input(shape.clone(), b.dtype(out));
    let ins: Vec<_> = [out, target].iter().map(|&v| b.cast(v, DType::F32)).collect();
    let per_elem = b.op("mse_loss", &ins, &[(shape, DType::F32)], &ins, false, &[], GradRule::Alloc)[0];
    // `.mean([1, 2, 3])` (one per sample), `* loss_weights`, `.mean()`
    let per_sample = b.op("mean", &[per_elem], &[(Shape::new([]), DType::F32)], &[], false, &[], GradRule::Alloc)[0];
    let weighted = b.op("mul", &[per_sample], &[(Shape::new([]), DType::F32)], &[], false, &[], GradRule::Alloc)[0];
    let loss = b.op("mean", &[weighted], &[(Shape::new([]), DType::F32)], &[], false, &[], GradRule::Alloc)[0];
    let mut step = super::train::step_from_loss(b, loss, s.optimizer, batch, false, te_group);
    step.peak = step.peak.saturating_add(kept);
    Ok(step)
}
