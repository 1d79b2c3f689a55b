//! A whole kohya-ss/sd-scripts LoRA job on the GPU, as `vramcalc estimate --mode train --finetune
//! lora --trainer kohya` and the app's pipeline panel both size it: kohya's flags ([`KohyaJob`],
//! typed) checked as sd-scripts asserts them, turned into [`KohyaSettings`], the UNet's step
//! (`kohya::kohya_step`) and, beside it, the frozen VAE and text encoders `train_network.py` keeps
//! on the GPU unless cached:
//!
//! - the VAE without `--cache_latents` (`vae.to(accelerator.device, dtype=vae_dtype)`; with it,
//!   the dataset's latents are cached and `vae.to("cpu")`);
//! - the text encoders without `--cache_text_encoder_outputs` (`t_enc.to(accelerator.device,
//!   dtype=weight_dtype)`); only `sdxl_train_network.py` caches them
//!   (`cache_text_encoder_outputs_if_needed`), and only with `--network_train_unet_only`.
//!
//! Their no-grad encode passes run before the UNet's forward and are not the step's peak; each is
//! held as its parameters in the `--mixed_precision` dtype (modelled, read from the source; the
//! step itself is checked against measured steps in `tests/diffusion.rs`). Without
//! `--network_train_unet_only` (kohya's default) the text encoders' LoRA trains too: the encoders
//! run inside the step (`kohya_te`) and are in its peak, not beside it. `--fp8_base` /
//! `--fp8_base_unet` store the frozen weights in fp8 (`kohya::Fp8Base`). [`what_ifs`] re-runs
//! [`job`] with one flag changed.

use super::component::{dtype_of, Component, ComponentKind, Pass};
use super::kohya::{kohya_step_with, Fp8Base, KohyaSettings};
use super::pipeline::{component_params, PipelineSpec, WeightDType};
use super::train::TrainStep;
use crate::config::{Device, OptimizerKind, Precision};
use crate::error::{Error, Result};
use serde::Serialize;

/// kohya's flags that change a LoRA job's memory, as the CLI's flags and the app's fields set them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KohyaJob {
    /// The denoising pass (width, height, text length) of one step.
    pub pass: Pass,
    pub device: Device,
    /// `--train_batch_size`.
    pub batch: u64,
    /// `--mixed_precision` as the weights' dtype: bf16, fp16 or fp32 (`no`).
    pub mixed_precision: WeightDType,
    pub full_bf16: bool,
    pub full_fp16: bool,
    /// `--network_dim` (0: no LoRA network asked for).
    pub network_dim: u32,
    /// `--network_args conv_dim=N` (0: none).
    pub conv_dim: u32,
    pub checkpointing: bool,
    pub optimizer: OptimizerKind,
    pub cache_latents: bool,
    pub cache_text_encoder_outputs: bool,
    /// Off (kohya's default): the text encoders' LoRA trains beside the UNet's.
    pub network_train_unet_only: bool,
    /// `--fp8_base`: the frozen UNet and text encoders (but their embeddings) in fp8.
    pub fp8_base: bool,
    /// `--fp8_base_unet`: the frozen UNet only in fp8 (wins over `fp8_base` for the encoders).
    pub fp8_base_unet: bool,
}

impl KohyaJob {
    /// What `--fp8_base` / `--fp8_base_unet` store in fp8 (`train_network.py`:
    /// `te_weight_dtype = weight_dtype if args.fp8_base_unet else torch.float8_e4m3fn`).
    pub fn fp8(&self) -> Fp8Base {
        match (self.fp8_base, self.fp8_base_unet) {
            (false, false) => Fp8Base::Off,
            (_, true) => Fp8Base::Unet,
            (true, false) => Fp8Base::All,
        }
    }
}

/// The job's figures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KohyaEstimate {
    /// What `kohya_step` was given.
    pub settings: KohyaSettings,
    /// The UNet's step alone.
    pub step: TrainStep,
    /// The frozen components on the GPU beside the step: `(component, bytes)`, in the pipeline's order.
    pub resident: Vec<(String, u64)>,
    /// The text encoders whose LoRA trains in the step (0: `--network_train_unet_only`).
    pub trained_encoders: usize,
    /// The step's peak plus the resident components.
    pub peak: u64,
}

/// Whether `c` is SDXL's UNet (`sdxl_train_network.py`; its text-time embedding), not SD 1.x/2.x's.
pub fn is_sdxl(c: &Component) -> bool {
    matches!(c, Component::Unet(u) if u.text_time.is_some())
}

/// Why sd-scripts (or this model of it) refuses the job's flags, in the CLI's words, or nothing;
/// checked in the order the CLI always checked them (`kohya_step` then refuses what is not a
/// UNet, and [`job`] a job without its pipeline: [`NO_PIPELINE`]).
pub fn check(c: &Component, j: &KohyaJob) -> std::result::Result<(), String> {
    if !j.network_train_unet_only && j.cache_text_encoder_outputs {
        return Err("--cache-text-encoder-outputs needs --network-train-unet-only (kohya asserts: the text encoders' LoRA cannot train on cached outputs)".into());
    }
    if j.network_dim == 0 {
        return Err("--trainer kohya estimates a LoRA step: add --finetune lora".into());
    }
    let sdxl = is_sdxl(c);
    if j.cache_text_encoder_outputs && !sdxl {
        return Err("--cache-text-encoder-outputs: train_network.py (SD 1.x/2.x) keeps its text encoder on the GPU (`cache_text_encoder_outputs_if_needed`); sdxl_train_network.py caches".into());
    }
    let weight = j.mixed_precision;
    if !matches!(weight, WeightDType::Bf16 | WeightDType::Fp16 | WeightDType::Fp32) {
        return Err(format!("--trainer kohya: --precision {} is not a --mixed_precision (bf16, fp16 or fp32); for fp8 weights pass --fp8-base with --precision bf16 or fp16", weight.name()));
    }
    // kohya: "fp8_base requires mixed precision='fp16' or 'bf16'"
    if j.fp8() != Fp8Base::Off && weight == WeightDType::Fp32 {
        return Err("--fp8-base / --fp8-base-unet need --precision bf16 or fp16 (kohya asserts: fp8_base requires mixed precision='fp16' or 'bf16')".into());
    }
    if j.full_bf16 && weight != WeightDType::Bf16 || j.full_fp16 && weight != WeightDType::Fp16 {
        return Err("--full-bf16 needs --precision bf16 and --full-fp16 --precision fp16 (kohya asserts mixed_precision)".into());
    }
    if !matches!(j.pass, Pass::Denoise { .. }) {
        return Err("a LoRA step is of the denoiser".into());
    }
    Ok(())
}

/// [`job`]'s error when no pipeline is given and the job needs its VAE or text encoders (checked
/// after the step, as the CLI always did).
pub const NO_PIPELINE: &str = "--diffusers-config has no VAE or text encoders: give --pipeline or --model-index, or --cache-latents (and --cache-text-encoder-outputs for SDXL)";

/// [`job`]'s error when the text encoders' LoRA trains and no pipeline gives the encoders.
pub const NO_ENCODERS: &str = "--trainer kohya trains the text encoders' LoRA too (no --network-train-unet-only): give --pipeline or --model-index for them";

/// The settings `kohya_step` takes for `j` on `c` (after [`check`]).
pub fn settings(c: &Component, j: &KohyaJob) -> KohyaSettings {
    // `--mixed_precision` (train_util.prepare_dtype): the frozen UNet's `weight_dtype`
    let mixed_precision = match j.mixed_precision {
        WeightDType::Fp16 => Precision::AmpFp16,
        WeightDType::Fp32 => Precision::Fp32,
        _ => Precision::AmpBf16,
    };
    KohyaSettings {
        mixed_precision,
        full_half: j.full_bf16 || j.full_fp16,
        network_dim: j.network_dim,
        checkpointing: j.checkpointing,
        // train_network.py loads SD 1.x/2.x into kohya's `original_unet.py`
        sd1_port: !is_sdxl(c),
        conv_dim: j.conv_dim,
        optimizer: j.optimizer,
    }
}

/// The job `j` of the UNet `c`, with the pipeline `spec` around it (its VAE and text encoders)
/// when known.
pub fn job(c: &Component, spec: Option<&PipelineSpec>, j: &KohyaJob) -> Result<KohyaEstimate> {
    check(c, j).map_err(Error::Config)?;
    let ks = settings(c, j);
    let (train_te, fp8) = (!j.network_train_unet_only, j.fp8());
    let components = spec.map_or(&[][..], |s| &s.components[..]);
    if train_te && spec.is_none() {
        return Err(Error::Config(NO_ENCODERS.into()));
    }
    let encoders: Vec<&Component> = components.iter().map(|(_, comp)| comp).filter(|comp| train_te && comp.kind() == ComponentKind::TextEncoder).collect();
    let step = kohya_step_with(c, &encoders, fp8, j.pass, ks, j.device, j.batch)?;
    if spec.is_none() && (!j.cache_latents || !j.cache_text_encoder_outputs && is_sdxl(c)) {
        return Err(Error::Config(NO_PIPELINE.into()));
    }
    // (the text encoders a text-encoder LoRA trains are in the step's peak already)
    let want = |k: ComponentKind| (k == ComponentKind::Vae && !j.cache_latents) || (k == ComponentKind::TextEncoder && !j.cache_text_encoder_outputs && !train_te);
    let size = dtype_of(j.mixed_precision.compute()).size();
    let mut resident = Vec::new();
    for (n, comp) in components {
        if want(comp.kind()) {
            // --fp8_base: the text encoders in fp8 but their embeddings; the VAE not
            let bytes = match comp {
                Component::Text(t) if fp8 == Fp8Base::All => super::kohya_te::fp8_bytes(t, component_params(comp)?, size),
                _ => component_params(comp)?.saturating_mul(size),
            };
            resident.push((n.clone(), bytes));
        }
    }
    let peak = step.peak.saturating_add(resident.iter().map(|r| r.1).sum());
    Ok(KohyaEstimate { settings: ks, step, resident, trained_encoders: encoders.len(), peak })
}

/// One flag changed and the job's peak after it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KohyaWhatIf {
    pub name: String,
    pub peak_bytes: u64,
    /// Against the job's own peak (negative: less memory).
    pub delta_bytes: i64,
    #[serde(skip)]
    pub job: KohyaJob,
}

/// Each change of one of kohya's flags alone on `j` that sd-scripts accepts, re-run by [`job`]:
/// `--cache_latents`, `--network_train_unet_only` (with the text encoders' LoRA),
/// `--cache_text_encoder_outputs` (SDXL; with `--network_train_unet_only`, which it needs),
/// gradient checkpointing on or off, 8-bit AdamW (`--optimizer_type AdamW8bit`), `--full_bf16` /
/// `--full_fp16`, `--fp8_base` (half-precision mixed precision), half the `--network_dim`, no
/// `conv_dim`, batch 1.
pub fn what_ifs(c: &Component, spec: Option<&PipelineSpec>, j: &KohyaJob) -> Result<Vec<KohyaWhatIf>> {
    let base = job(c, spec, j)?.peak;
    let with = |f: &dyn Fn(&mut KohyaJob)| {
        let mut t = *j;
        f(&mut t);
        t
    };
    let mut tries: Vec<(String, KohyaJob)> = Vec::new();
    if !j.cache_latents {
        tries.push(("--cache_latents".into(), with(&|t| t.cache_latents = true)));
    }
    if !j.network_train_unet_only {
        tries.push(("--network_train_unet_only".into(), with(&|t| t.network_train_unet_only = true)));
    }
    if !j.cache_text_encoder_outputs && is_sdxl(c) {
        let name = if j.network_train_unet_only { "--cache_text_encoder_outputs" } else { "--network_train_unet_only --cache_text_encoder_outputs" };
        tries.push((name.into(), with(&|t| (t.cache_text_encoder_outputs, t.network_train_unet_only) = (true, true))));
    }
    let ck = if j.checkpointing { "no gradient checkpointing" } else { "--gradient_checkpointing" };
    tries.push((ck.into(), with(&|t| t.checkpointing = !t.checkpointing)));
    if j.optimizer != OptimizerKind::Adam8bit {
        tries.push(("--optimizer_type AdamW8bit".into(), with(&|t| t.optimizer = OptimizerKind::Adam8bit)));
    }
    match j.mixed_precision {
        WeightDType::Bf16 if !j.full_bf16 => tries.push(("--full_bf16".into(), with(&|t| t.full_bf16 = true))),
        WeightDType::Fp16 if !j.full_fp16 => tries.push(("--full_fp16".into(), with(&|t| t.full_fp16 = true))),
        _ => {}
    }
    if j.fp8() == Fp8Base::Off && j.mixed_precision != WeightDType::Fp32 {
        tries.push(("--fp8_base".into(), with(&|t| t.fp8_base = true)));
    }
    if j.network_dim >= 2 {
        tries.push((format!("--network_dim {}", j.network_dim / 2), with(&|t| t.network_dim = j.network_dim / 2)));
    }
    if j.conv_dim > 0 {
        tries.push(("no conv_dim".into(), with(&|t| t.conv_dim = 0)));
    }
    if j.batch > 1 {
        tries.push(("--train_batch_size 1".into(), with(&|t| t.batch = 1)));
    }
    let mut out = Vec::new();
    for (name, t) in tries {
        let Ok(e) = job(c, spec, &t) else { continue };
        out.push(KohyaWhatIf { name, peak_bytes: e.peak, delta_bytes: (e.peak as i128 - base as i128).clamp(i64::MIN as i128, i64::MAX as i128) as i64, job: t });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sdxl() -> (PipelineSpec, Component) {
        let spec = PipelineSpec::preset("sdxl").unwrap();
        let unet = spec.components.iter().find(|c| c.0 == "unet").unwrap().1.clone();
        (spec, unet)
    }

    fn base() -> KohyaJob {
        KohyaJob {
            pass: Pass::Denoise { width: 512, height: 512, frames: 1, text_len: 77 },
            device: Device::Cuda,
            batch: 2,
            mixed_precision: WeightDType::Bf16,
            full_bf16: false,
            full_fp16: false,
            network_dim: 16,
            conv_dim: 0,
            checkpointing: false,
            optimizer: OptimizerKind::Adamw,
            cache_latents: false,
            cache_text_encoder_outputs: false,
            network_train_unet_only: true,
            fp8_base: false,
            fp8_base_unet: false,
        }
    }

    #[test]
    fn the_job_is_the_step_plus_what_stays_on_the_gpu() {
        let (spec, unet) = sdxl();
        let j = base();
        let e = job(&unet, Some(&spec), &j).unwrap();
        assert_eq!(e.step, super::super::kohya::kohya_step(&unet, j.pass, settings(&unet, &j), j.device, j.batch).unwrap());
        assert_eq!(e.resident.iter().map(|r| r.0.as_str()).collect::<Vec<_>>(), ["text_encoder", "text_encoder_2", "vae"]);
        assert_eq!(e.resident[2].1, component_params(&spec.components.iter().find(|c| c.0 == "vae").unwrap().1).unwrap() * 2, "bf16");
        assert_eq!(e.peak, e.step.peak + e.resident.iter().map(|r| r.1).sum::<u64>());
        let cached = job(&unet, Some(&spec), &KohyaJob { cache_latents: true, cache_text_encoder_outputs: true, ..j }).unwrap();
        assert_eq!((cached.peak, cached.resident.len()), (cached.step.peak, 0));
        assert_eq!(cached.step, e.step, "caching changes what sits beside the step, not the step");
    }

    /// kohya's default (no `--network_train_unet_only`): the encoders train in the step, so they
    /// are in its peak and not beside it; `--fp8_base` stores a resident encoder in fp8.
    #[test]
    fn a_text_encoder_lora_is_in_the_step_and_fp8_shrinks_what_stays() {
        use super::super::kohya::{kohya_step_with, Fp8Base};
        let (spec, unet) = sdxl();
        let j = KohyaJob { network_train_unet_only: false, ..base() };
        let e = job(&unet, Some(&spec), &j).unwrap();
        let encoders: Vec<&Component> = spec.components.iter().filter(|c| c.1.kind() == ComponentKind::TextEncoder).map(|c| &c.1).collect();
        assert_eq!(e.step, kohya_step_with(&unet, &encoders, Fp8Base::Off, j.pass, settings(&unet, &j), j.device, j.batch).unwrap());
        assert_eq!((e.trained_encoders, e.resident.iter().map(|r| r.0.as_str()).collect::<Vec<_>>()), (2, vec!["vae"]));
        let unet_only = job(&unet, Some(&spec), &base()).unwrap();
        assert!(e.step.trainable > unet_only.step.trainable, "the encoders' LoRA trains too");
        let fp8 = job(&unet, Some(&spec), &KohyaJob { fp8_base: true, ..base() }).unwrap();
        let fp8_unet = job(&unet, Some(&spec), &KohyaJob { fp8_base_unet: true, ..base() }).unwrap();
        assert_eq!(fp8_unet.resident, unet_only.resident, "--fp8_base_unet leaves the encoders in the weight dtype");
        assert!(fp8.resident[0].1 < unet_only.resident[0].1, "{:?} vs {:?}", fp8.resident, unet_only.resident);
        assert_eq!(fp8.resident[2], unet_only.resident[2], "the VAE is not fp8");
    }

    #[test]
    fn refusals_name_the_flag() {
        let (spec, unet) = sdxl();
        let sd = PipelineSpec::preset("sd-1.5").unwrap();
        let sd_unet = sd.components.iter().find(|c| c.0 == "unet").unwrap().1.clone();
        let j = base();
        let err = |c: &Component, j: KohyaJob| check(c, &j).unwrap_err();
        assert!(err(&unet, KohyaJob { network_train_unet_only: false, cache_text_encoder_outputs: true, ..j }).contains("--network-train-unet-only"));
        assert!(err(&unet, KohyaJob { mixed_precision: WeightDType::Fp32, fp8_base: true, ..j }).contains("--fp8-base"));
        assert!(err(&unet, KohyaJob { network_dim: 0, ..j }).contains("--finetune lora"));
        assert!(err(&sd_unet, KohyaJob { cache_text_encoder_outputs: true, ..j }).contains("train_network.py"));
        assert!(err(&unet, KohyaJob { mixed_precision: WeightDType::Fp8, ..j }).contains("--fp8-base"));
        assert!(err(&unet, KohyaJob { full_fp16: true, ..j }).contains("--full-fp16"));
        assert_eq!(job(&unet, None, &j), Err(Error::Config(NO_PIPELINE.into())));
        assert!(job(&unet, None, &KohyaJob { cache_latents: true, cache_text_encoder_outputs: true, ..j }).is_ok());
        assert!(job(&sd_unet, Some(&sd), &j).is_ok());
        assert_eq!(job(&unet, None, &KohyaJob { network_train_unet_only: false, cache_latents: true, ..j }), Err(Error::Config(NO_ENCODERS.into())));
        assert!(matches!(job(&unet, Some(&spec), &KohyaJob { full_fp16: true, ..j }), Err(Error::Config(m)) if m.contains("--full-fp16")));
    }

    #[test]
    fn what_ifs_are_the_job_with_one_flag_changed() {
        let (spec, unet) = sdxl();
        let j = base();
        let peak = job(&unet, Some(&spec), &j).unwrap().peak;
        let w = what_ifs(&unet, Some(&spec), &j).unwrap();
        for x in &w {
            assert_eq!(x.peak_bytes, job(&unet, Some(&spec), &x.job).unwrap().peak, "{}", x.name);
            assert_eq!(x.delta_bytes, x.peak_bytes as i64 - peak as i64);
        }
        let get = |n: &str| w.iter().find(|x| x.name == n).unwrap_or_else(|| panic!("no {n}: {w:?}"));
        for n in ["--cache_latents", "--cache_text_encoder_outputs", "--gradient_checkpointing", "--optimizer_type AdamW8bit", "--full_bf16", "--network_dim 8", "--train_batch_size 1"] {
            assert!(get(n).delta_bytes < 0, "{n}: {}", get(n).delta_bytes);
        }
    }
}
