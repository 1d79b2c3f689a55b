//! `vramcalc estimate --mode train --finetune lora --trainer kohya`: one LoRA step of a UNet as
//! kohya-ss/sd-scripts' `train_network.py` / `sdxl_train_network.py` run it, with the frozen VAE
//! and text encoders it keeps on the GPU unless cached, and the text encoders' LoRA unless
//! `--network-train-unet-only` (core `diffusion::kohya_job`, which the app's pipeline panel calls
//! too); here the flags and the output.

use crate::args::Settings;
use crate::diffusion::DiffusionArgs;
use crate::dist::DistArgs;
use anyhow::{anyhow, bail, Result};
use serde_json::json;
use vramcalc_core::diffusion::kohya::Fp8Base;
use vramcalc_core::diffusion::kohya_job::{self, KohyaJob, NO_ENCODERS, NO_PIPELINE};
use vramcalc_core::diffusion::{Component, Pass, PipelineSpec, WeightDType};
use vramcalc_core::memory::device::{CUBLAS_WORKSPACE_BYTES, CUDA_CONTEXT_BYTES};
use vramcalc_core::{format_bytes, thousands, Error};

/// kohya's step of `c` (the denoiser `name`); `spec`, when known, gives the VAE and text encoders.
pub(crate) fn train(c: &Component, name: &str, spec: Option<&PipelineSpec>, s: &Settings, dist: &DistArgs, d: &DiffusionArgs, json: bool) -> Result<String> {
    // kohya asserts this before anything else is read
    if !d.network_train_unet_only && d.cache_text_encoder_outputs {
        bail!("--cache-text-encoder-outputs needs --network-train-unet-only (kohya asserts: the text encoders' LoRA cannot train on cached outputs)");
    }
    let setup = crate::diffusion::lora_setup(c, s, dist, d)?;
    let job = KohyaJob {
        pass: setup.pass,
        device: setup.device,
        batch: setup.batch,
        mixed_precision: crate::diffusion::settings(s, dist, d, None)?.dtype.unwrap_or(WeightDType::Bf16),
        full_bf16: d.full_bf16,
        full_fp16: d.full_fp16,
        network_dim: if setup.finetune.has_adapters() { setup.finetune.lora_r } else { 0 },
        conv_dim: d.conv_dim,
        checkpointing: setup.checkpointing,
        optimizer: setup.optimizer,
        cache_latents: d.cache_latents,
        cache_text_encoder_outputs: d.cache_text_encoder_outputs,
        network_train_unet_only: d.network_train_unet_only,
        fp8_base: d.fp8_base,
        fp8_base_unet: d.fp8_base_unet,
    };
    // the flags' refusals as the CLI words them; the step's own errors as the core's
    kohya_job::check(c, &job).map_err(|e| anyhow!(e))?;
    let e = kohya_job::job(c, spec, &job).map_err(|e| match e {
        Error::Config(m) if m == NO_PIPELINE || m == NO_ENCODERS => anyhow!(m),
        e => anyhow!(e),
    })?;
    let Pass::Denoise { width: w, height: h, .. } = job.pass else { bail!("a LoRA step is of the denoiser") };
    let (step, ks, resident, peak, fp8) = (&e.step, &e.settings, &e.resident, e.peak, job.fp8());
    let train_te = !job.network_train_unet_only;
    let total = peak + CUDA_CONTEXT_BYTES + CUBLAS_WORKSPACE_BYTES;
    if json {
        let v = json!({"component": name, "class": c.class(), "trainer": "kohya", "peak_bytes": peak, "step_peak_bytes": step.peak,
            "params": step.params, "trainable_params": step.trainable, "param_bytes": step.param_bytes, "batch": setup.batch,
            "width": w, "height": h, "checkpointing": setup.checkpointing, "optimizer": setup.optimizer.name(),
            "full_half": ks.full_half, "fp8_base": fp8 == Fp8Base::All, "fp8_base_unet": fp8 == Fp8Base::Unet, "text_encoder_lora": train_te,
            "text_encoders_trained": e.trained_encoders, "resident": resident.iter().map(|(n, b)| json!({"name": n, "bytes": b})).collect::<Vec<_>>(),
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
        if train_te { format!(", text-encoder LoRA on {} encoder(s) (in the peak)", e.trained_encoders) } else { ", UNet only".into() },
    );
    o += &format!("parameters      {:>16}\ntrainable       {:>16}\n", thousands(step.params), thousands(step.trainable));
    for (n, b) in resident {
        o += &format!("{:<15} {:>16}  (frozen, on the GPU)\n", n, format_bytes(*b, u));
    }
    o += &format!("peak allocated  {:>16}\ndevice total    {:>16}  (approx.)\n", format_bytes(peak, u), format_bytes(total, u));
    Ok(o)
}
