//! `estimate --mode train` without `--finetune lora` on a pipeline or a `--diffusers-config`
//! UNet or Flux transformer: diffusers' full fine-tuning (core `diffusion::full_train`:
//! train_dreambooth.py, train_text_to_image.py, train_text_to_image_sdxl.py, train_dreambooth_flux.py).

use crate::args::Settings;
use crate::diffusion::DiffusionArgs;
use crate::dist::DistArgs;
use anyhow::{bail, Result};
use serde_json::json;
use vramcalc_core::diffusion::full_train::{default_script, full_job, Ema, FullSettings};
use vramcalc_core::diffusion::{Component, Pass, PipelineSpec};
use vramcalc_core::memory::device::{CUBLAS_WORKSPACE_BYTES, CUDA_CONTEXT_BYTES};
use vramcalc_core::{format_bytes, thousands, Precision};

/// Whether the flags ask a full fine-tune (no `--finetune lora`); the full fine-tune's own flags
/// without it are an error.
pub fn is_full(d: &DiffusionArgs, s: &Settings) -> Result<bool> {
    let config = s.config(&vramcalc_core::ModelSpec::from_json(r#"{"input":{"shape":[1]},"layers":[]}"#)?)?;
    let full = !config.finetune.has_adapters();
    if !full && full_only(d) {
        bail!("--use-ema, --offload-ema, --set-grads-to-none and --train-text-encoder are full fine-tuning's: leave out --finetune lora");
    }
    Ok(full)
}

fn full_only(d: &DiffusionArgs) -> bool {
    d.use_ema || d.offload_ema || d.set_grads_to_none || d.train_text_encoder
}

pub fn train(c: &Component, name: &str, spec: Option<&PipelineSpec>, s: &Settings, dist: &DistArgs, d: &DiffusionArgs, json: bool) -> Result<String> {
    if d.train_text_encoder {
        bail!("--train-text-encoder (train_dreambooth.py) is not modelled: the estimate is of the UNet's full fine-tune with the text encoder frozen");
    }
    if d.offload_ema && !d.use_ema {
        bail!("--offload-ema needs --use-ema");
    }
    let setup = crate::diffusion::lora_setup(c, s, dist, d)?;
    let mixed_precision = match s.precision.as_deref().unwrap_or("bf16") {
        "fp32" => Precision::Fp32,
        "fp16" | "amp-fp16" => Precision::AmpFp16,
        "bf16" | "amp-bf16" => Precision::AmpBf16,
        p => bail!("--precision {p:?}: full fine-tuning keeps the UNet in fp32 under --mixed_precision fp16 | bf16 (or fp32)"),
    };
    let ema = match (d.use_ema, d.offload_ema) {
        (false, _) => Ema::None,
        (true, false) => Ema::Gpu,
        (true, true) => Ema::Cpu,
    };
    let script = default_script(c, d.use_ema, d.set_grads_to_none);
    let fs = FullSettings { mixed_precision, device: setup.device, batch: setup.batch, checkpointing: setup.checkpointing, optimizer: setup.optimizer, script, ema };
    let job = full_job(c, spec, setup.pass, fs)?;
    let Pass::Denoise { width: w, height: h, frames, .. } = setup.pass else { bail!("a training step is of the denoiser") };
    let st = job.step.step;
    let cpu_ram = if ema == Ema::Cpu { job.step.ema_bytes } else { 0 };
    if json {
        let v = json!({"component": name, "class": c.class(), "finetune": "full", "script": script.name(),
            "peak_bytes": job.peak, "step_peak_bytes": st.peak, "params": st.params, "trainable_params": st.trainable,
            "param_bytes": st.param_bytes, "ema_bytes": job.step.ema_bytes, "ema_on_gpu": job.step.ema_on_gpu,
            "resident": job.resident.iter().map(|(n, b)| json!({"component": n, "bytes": b})).collect::<Vec<_>>(),
            "batch": setup.batch, "width": w, "height": h, "frames": frames, "checkpointing": setup.checkpointing,
            "optimizer": setup.optimizer.name(), "mixed_precision": s.precision.as_deref().unwrap_or("bf16"),
            "devices": {"gpu_bytes": job.peak, "cpu_ram_bytes": cpu_ram, "gpu_total_bytes_approx": job.peak + CUDA_CONTEXT_BYTES + CUBLAS_WORKSPACE_BYTES}});
        return Ok(serde_json::to_string_pretty(&v)? + "\n");
    }
    let u = s.unit();
    let f = |b: u64| format_bytes(b, u);
    let mut o = format!(
        "{name} ({}): full fine-tune step at {w}×{h}, batch {}, {}{}{} as {} runs it (fp32 weights under --mixed_precision {}; modelled, see docs/diffusion.md)\n",
        c.class(),
        setup.batch,
        setup.optimizer.name(),
        if setup.checkpointing { ", gradient checkpointing" } else { "" },
        match ema {
            Ema::None => "",
            Ema::Gpu => ", EMA on the GPU",
            Ema::Cpu => ", EMA offloaded",
        },
        script.name(),
        s.precision.as_deref().unwrap_or("bf16"),
    );
    o += &format!("parameters      {:>16}\ntrainable       {:>16}\nstep peak       {:>16}\n", thousands(st.params), thousands(st.trainable), f(st.peak));
    if ema != Ema::None {
        o += &format!("EMA copy        {:>16}  ({})\n", f(job.step.ema_bytes), if ema == Ema::Gpu { "GPU" } else { "CPU RAM" });
    }
    for (n, b) in &job.resident {
        o += &format!("{n:<15} {:>16}  (frozen, on the GPU)\n", f(*b));
    }
    o += &format!("peak allocated  {:>16}\ndevice total    {:>16}  (approx., + CUDA context and cuBLAS workspace)\n", f(job.peak), f(job.peak + CUDA_CONTEXT_BYTES + CUBLAS_WORKSPACE_BYTES));
    Ok(o)
}
