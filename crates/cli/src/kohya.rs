//! `vramcalc estimate --mode train --finetune lora --trainer kohya`: one LoRA step of a UNet as
//! kohya-ss/sd-scripts' `train_network.py` / `sdxl_train_network.py` run it (core
//! `diffusion::kohya`), with the frozen VAE and text encoders it keeps on the GPU unless cached.

use crate::args::Settings;
use crate::diffusion::DiffusionArgs;
use crate::dist::DistArgs;
use anyhow::{bail, Result};
use serde_json::json;
use vramcalc_core::diffusion::kohya::{kohya_step_with, Fp8Base, KohyaSettings};
use vramcalc_core::diffusion::pipeline::component_params;
use vramcalc_core::diffusion::{Component, ComponentKind, Pass, PipelineSpec, WeightDType};
use vramcalc_core::memory::device::{CUBLAS_WORKSPACE_BYTES, CUDA_CONTEXT_BYTES};
use vramcalc_core::{format_bytes, thousands, Precision};

/// kohya's step of `c` (the denoiser `name`); `spec`, when known, gives the VAE and text encoders.
pub(crate) fn train(c: &Component, name: &str, spec: Option<&PipelineSpec>, s: &Settings, dist: &DistArgs, d: &DiffusionArgs, json: bool) -> Result<String> {
    // without --network_train_unet_only kohya trains a LoRA on the text encoders too
    let train_te = !d.network_train_unet_only;
    if train_te && d.cache_text_encoder_outputs {
        bail!("--cache-text-encoder-outputs needs --network-train-unet-only (kohya asserts: the text encoders' LoRA cannot train on cached outputs)");
    }
    let setup = crate::diffusion::lora_setup(c, s, dist, d)?;
    if !setup.finetune.has_adapters() {
        bail!("--trainer kohya estimates a LoRA step: add --finetune lora");
    }
    let sdxl = matches!(c, Component::Unet(u) if u.text_time.is_some());
    if d.cache_text_encoder_outputs && !sdxl {
        bail!("--cache-text-encoder-outputs: train_network.py (SD 1.x/2.x) keeps its text encoder on the GPU (`cache_text_encoder_outputs_if_needed`); sdxl_train_network.py caches");
    }
    let weight = crate::diffusion::settings(s, dist, d, None)?.dtype.unwrap_or(WeightDType::Bf16);
    // `--mixed_precision` (train_util.prepare_dtype): the frozen UNet's `weight_dtype`
    let mixed = match weight {
        WeightDType::Bf16 => Precision::AmpBf16,
        WeightDType::Fp16 => Precision::AmpFp16,
        WeightDType::Fp32 => Precision::Fp32,
        other => bail!("--trainer kohya: --precision {} is not a --mixed_precision (bf16, fp16 or fp32); for fp8 weights pass --fp8-base with --precision bf16 or fp16", other.name()),
    };
    // --fp8_base / --fp8_base_unet (kohya: "fp8_base requires mixed precision='fp16' or 'bf16'")
    let fp8 = match (d.fp8_base, d.fp8_base_unet) {
        (false, false) => Fp8Base::Off,
        // `te_weight_dtype = weight_dtype if args.fp8_base_unet else torch.float8_e4m3fn`
        (_, true) => Fp8Base::Unet,
        (true, false) => Fp8Base::All,
    };
    if fp8 != Fp8Base::Off && mixed == Precision::Fp32 {
        bail!("--fp8-base / --fp8-base-unet need --precision bf16 or fp16 (kohya asserts: fp8_base requires mixed precision='fp16' or 'bf16')");
    }
    if d.full_bf16 && weight != WeightDType::Bf16 || d.full_fp16 && weight != WeightDType::Fp16 {
        bail!("--full-bf16 needs --precision bf16 and --full-fp16 --precision fp16 (kohya asserts mixed_precision)");
    }
    let Pass::Denoise { width: w, height: h, .. } = setup.pass else { bail!("a LoRA step is of the denoiser") };
    let ks = KohyaSettings {
        mixed_precision: mixed,
        full_half: d.full_bf16 || d.full_fp16,
        network_dim: setup.finetune.lora_r,
        checkpointing: setup.checkpointing,
        // train_network.py loads SD 1.x/2.x into kohya's `original_unet.py`
        sd1_port: !sdxl,
        conv_dim: d.conv_dim,
        optimizer: setup.optimizer,
    };
    let encoders: Vec<&Component> = match spec {
        Some(spec) if train_te => spec.components.iter().filter(|(_, comp)| comp.kind() == ComponentKind::TextEncoder).map(|(_, comp)| comp).collect(),
        None if train_te => bail!("--trainer kohya trains the text encoders' LoRA too (no --network-train-unet-only): give --pipeline or --model-index for them"),
        _ => Vec::new(),
    };
    let step = kohya_step_with(c, &encoders, fp8, setup.pass, ks, setup.device, setup.batch)?;
    // frozen on the GPU beside the step: the VAE without --cache_latents (`vae.to(accelerator.device,
    // dtype=vae_dtype)`), the text encoders without cached outputs (`t_enc.to(accelerator.device,
    // dtype=weight_dtype)`); their no-grad encode passes run before the UNet's forward
    let mut resident: Vec<(String, u64)> = Vec::new();
    // (the text encoders a text-encoder LoRA trains are in the step's peak already)
    let want = |k: ComponentKind| (k == ComponentKind::Vae && !d.cache_latents) || (k == ComponentKind::TextEncoder && !d.cache_text_encoder_outputs && !train_te);
    let size = vramcalc_core::diffusion::component::dtype_of(weight.compute()).size();
    match spec {
        Some(spec) => {
            for (n, comp) in &spec.components {
                if want(comp.kind()) {
                    // --fp8_base: the text encoders in fp8 but their embeddings; the VAE not
                    let bytes = match comp {
                        Component::Text(t) if fp8 == Fp8Base::All => vramcalc_core::diffusion::kohya_te::fp8_bytes(t, component_params(comp)?, size),
                        _ => component_params(comp)?.saturating_mul(size),
                    };
                    resident.push((n.clone(), bytes));
                }
            }
        }
        None if !d.cache_latents || !d.cache_text_encoder_outputs && sdxl => {
            bail!("--diffusers-config has no VAE or text encoders: give --pipeline or --model-index, or --cache-latents (and --cache-text-encoder-outputs for SDXL)")
        }
        None => {}
    }
    let others: u64 = resident.iter().map(|r| r.1).sum();
    let peak = step.peak.saturating_add(others);
    let total = peak + CUDA_CONTEXT_BYTES + CUBLAS_WORKSPACE_BYTES;
    if json {
        let v = json!({"component": name, "class": c.class(), "trainer": "kohya", "peak_bytes": peak, "step_peak_bytes": step.peak,
            "params": step.params, "trainable_params": step.trainable, "param_bytes": step.param_bytes, "batch": setup.batch,
            "width": w, "height": h, "checkpointing": setup.checkpointing, "optimizer": setup.optimizer.name(),
            "full_half": ks.full_half, "fp8_base": fp8 == Fp8Base::All, "fp8_base_unet": fp8 == Fp8Base::Unet, "text_encoder_lora": train_te, "text_encoders_trained": encoders.len(), "resident": resident.iter().map(|(n, b)| json!({"name": n, "bytes": b})).collect::<Vec<_>>(),
            "devices": {"gpu_bytes": peak, "gpu_total_bytes_approx": total}});
        return Ok(serde_json::to_string_pretty(&v)? + "\n");
    }
    let u = s.unit();
    let mut o = format!(
        "{name} ({}): kohya LoRA step at {w}×{h}, batch {}, network_dim {}, {}{}{}{}{} (modelled, see docs/diffusion.md)\n",
        c.class(),
        setup.batch,
        ks.network_dim,
        setup.optimizer.name(),
        if setup.checkpointing { ", gradient checkpointing" } else { "" },
        if ks.full_half { ", full half-precision network" } else { "" },
        match fp8 {
            Fp8Base::All => ", fp8 base (UNet and text encoders)",
            Fp8Base::Unet => ", fp8 base (UNet)",
            Fp8Base::Off => "",
        },
        if train_te { format!(", text-encoder LoRA on {} encoder(s) (in the peak)", encoders.len()) } else { ", UNet only".into() },
    );
    o += &format!("parameters      {:>16}\ntrainable       {:>16}\n", thousands(step.params), thousands(step.trainable));
    for (n, b) in &resident {
        o += &format!("{:<15} {:>16}  (frozen, on the GPU)\n", n, format_bytes(*b, u));
    }
    o += &format!("peak allocated  {:>16}\ndevice total    {:>16}  (approx.)\n", format_bytes(peak, u), format_bytes(total, u));
    Ok(o)
}
