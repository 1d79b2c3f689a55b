//! The pipeline panel's train mode with kohya-ss/sd-scripts' trainer (issue 27), pure and tested
//! natively: its fields, the state as the core's typed [`KohyaJob`] (the flags
//! `vramcalc estimate --mode train --finetune lora --trainer kohya` takes), the answer by the
//! core's `diffusion::kohya_job::job` (the UNet's step and the frozen VAE and text encoders kept
//! on the GPU unless cached; the CLI calls the same function), and its what-ifs
//! (`kohya_job::what_ifs`) read back into the panel's state.

use super::{lora_setup, with_default, TrainAnswer, OPTIMIZERS};
use crate::form::{named, Field};
use crate::state::pipeline::{PipelineState, Trainer};
use vramcalc_core::diffusion::kohya::Fp8Base;
use vramcalc_core::diffusion::kohya_job::{self, is_sdxl, KohyaJob};
use vramcalc_core::diffusion::{Component, Pass, PipelineSpec, WeightDType};

/// `--mixed_precision`'s values (as the weights' dtype; fp32 is `no`).
const MIXED: [WeightDType; 3] = [WeightDType::Bf16, WeightDType::Fp16, WeightDType::Fp32];

/// The fp8 field's values: off, `--fp8_base` (UNet and text encoders), `--fp8_base_unet`.
const FP8: [(Fp8Base, &str); 3] = [(Fp8Base::Off, "off"), (Fp8Base::All, "all"), (Fp8Base::Unet, "unet")];

/// The fp8 field's value of `f` (and the link's).
pub fn fp8_name(f: Fp8Base) -> &'static str {
    FP8.iter().find(|x| x.0 == f).map_or("off", |x| x.1)
}

/// [`fp8_name`]'s inverse.
pub fn fp8_parse(text: &str) -> Option<Fp8Base> {
    FP8.iter().find(|x| x.1 == text.trim()).map(|x| x.0)
}

/// kohya's fields in train mode, after the shared ones (size, batch).
pub fn fields(s: &PipelineState, p: &PipelineSpec, out: &mut Vec<Field>) {
    let mut mixed: Vec<&'static str> = MIXED.iter().map(|d| d.name()).collect();
    // a dtype kohya does not train in (from the diffusers trainer or a link) stays shown, refused
    if let Some(d) = s.dtype.filter(|d| !MIXED.contains(d)) {
        mixed.push(d.name());
    }
    out.push(Field::select("mixed-precision", with_default(&mixed), s.dtype.map_or("default".into(), |d| d.name().to_string())));
    out.push(Field::check("full-half", s.kohya.full_half));
    out.push(Field::number("network-dim", u64::from(s.lora_r)));
    out.push(Field::number("conv-dim", u64::from(s.kohya.conv_dim)));
    out.push(Field::check("checkpointing", s.checkpointing));
    out.push(Field::select("optimizer", named(OPTIMIZERS.iter().map(|o| o.name())), s.optimizer.name()));
    out.push(Field::check("cache-latents", s.kohya.cache_latents));
    let sdxl = super::denoiser(p).is_some_and(|c| is_sdxl(&c.1));
    if sdxl || s.kohya.cache_te {
        out.push(Field::check("cache-te", s.kohya.cache_te));
    }
    out.push(Field::check("unet-only", s.kohya.unet_only));
    out.push(Field::select("fp8-base", named(FP8.iter().map(|x| x.1)), fp8_name(s.kohya.fp8).to_string()));
}

/// The pipeline's denoiser and the kohya job the state sets on it.
pub fn job_of<'a>(s: &PipelineState, p: &'a PipelineSpec) -> Result<(&'a (String, Component), KohyaJob), String> {
    let (named, setup) = lora_setup(s, p)?;
    let mixed = s.dtype.unwrap_or(WeightDType::Bf16);
    let k = s.kohya;
    let job = KohyaJob {
        pass: setup.pass,
        device: setup.device,
        batch: setup.batch,
        mixed_precision: mixed,
        // one checkbox for kohya's two flags: the one of the mixed precision (fp32: `--full_bf16`, refused)
        full_bf16: k.full_half && mixed != WeightDType::Fp16,
        full_fp16: k.full_half && mixed == WeightDType::Fp16,
        network_dim: s.lora_r,
        conv_dim: k.conv_dim,
        checkpointing: s.checkpointing,
        optimizer: s.optimizer,
        cache_latents: k.cache_latents,
        cache_text_encoder_outputs: k.cache_te,
        network_train_unet_only: k.unet_only,
        fp8_base: k.fp8 == Fp8Base::All,
        fp8_base_unet: k.fp8 == Fp8Base::Unet,
    };
    Ok((named, job))
}

/// The job's answer.
pub fn answer(s: &PipelineState, p: &PipelineSpec) -> Result<TrainAnswer, String> {
    let ((name, c), job) = job_of(s, p)?;
    let e = kohya_job::job(c, Some(p), &job).map_err(|e| e.to_string().trim_start_matches("config: ").to_string())?;
    let Pass::Denoise { width, height, frames, .. } = job.pass else { return Err("a LoRA step is of the denoiser".into()) };
    Ok(TrainAnswer {
        component: name.clone(),
        class: c.class().to_string(),
        peak: e.peak,
        frozen: e.resident.iter().map(|r| r.1).sum(),
        params: e.step.params,
        trainable: e.step.trainable,
        width,
        height,
        frames,
        trainer: Trainer::Kohya,
        resident: e.resident,
        full: None,
    })
}

/// `s` with job `j`'s flags (`job_of`'s inverse for what the what-ifs change).
fn state_of(s: &PipelineState, j: &KohyaJob) -> PipelineState {
    let mut out = PipelineState { batch: j.batch, lora_r: j.network_dim, checkpointing: j.checkpointing, optimizer: j.optimizer, ..s.clone() };
    out.kohya.full_half = j.full_bf16 || j.full_fp16;
    out.kohya.conv_dim = j.conv_dim;
    out.kohya.cache_latents = j.cache_latents;
    out.kohya.cache_te = j.cache_text_encoder_outputs;
    out.kohya.unet_only = j.network_train_unet_only;
    out.kohya.fp8 = j.fp8();
    out
}

/// The what-ifs' states: the core's list of kohya's flags changed one at a time.
pub fn candidates(s: &PipelineState, p: &PipelineSpec) -> Result<Vec<PipelineState>, String> {
    let ((_, c), job) = job_of(s, p)?;
    let w = kohya_job::what_ifs(c, Some(p), &job).map_err(|e| e.to_string())?;
    Ok(w.iter().map(|x| state_of(s, &x.job)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::whatif::what_ifs;
    use crate::pipeline::{self as pipe, spec, with, Answer};
    use crate::state::pipeline::{KohyaOpts, PipeMode};
    use vramcalc_core::diffusion::kohya_job::job;
    use vramcalc_core::{Device, OptimizerKind};

    fn kohya(preset: &str) -> PipelineState {
        PipelineState { preset: preset.into(), mode: PipeMode::Train, trainer: Trainer::Kohya, ..PipelineState::default() }
    }

    /// The job as `vramcalc estimate --pipeline sdxl --mode train --finetune lora --trainer kohya
    /// --width W --height H --batch B --lora-r R …` builds it (kohya's default: the text
    /// encoders' LoRA trains too)
    /// (`crates/cli/src/kohya.rs`), written out here rather than read from the state.
    #[allow(clippy::too_many_arguments)]
    fn cli_job(w: u64, h: u64, batch: u64, r: u32, ck: bool, opt: OptimizerKind, mixed: WeightDType, full: bool, conv: u32, cl: bool, ct: bool) -> KohyaJob {
        KohyaJob {
            pass: Pass::Denoise { width: w, height: h, frames: 1, text_len: 77 },
            device: Device::Cuda,
            batch,
            mixed_precision: mixed,
            full_bf16: full && mixed == WeightDType::Bf16,
            full_fp16: full && mixed == WeightDType::Fp16,
            network_dim: r,
            conv_dim: conv,
            checkpointing: ck,
            optimizer: opt,
            cache_latents: cl,
            cache_text_encoder_outputs: ct,
            network_train_unet_only: false,
            fp8_base: false,
            fp8_base_unet: false,
        }
    }

    #[test]
    fn the_answer_is_the_core_jobs() {
        let p = spec("sdxl").unwrap();
        let unet = &p.components.iter().find(|c| c.0 == "unet").unwrap().1;
        let cases = [
            (kohya("sdxl"), cli_job(1024, 1024, 1, 16, true, OptimizerKind::Adamw, WeightDType::Bf16, false, 0, false, false)),
            (
                PipelineState { width: Some(768), height: Some(512), batch: 2, lora_r: 32, checkpointing: false, optimizer: OptimizerKind::Adam8bit, dtype: Some(WeightDType::Fp16), kohya: KohyaOpts { full_half: true, conv_dim: 8, cache_latents: true, ..KohyaOpts::default() }, ..kohya("sdxl") },
                cli_job(768, 512, 2, 32, false, OptimizerKind::Adam8bit, WeightDType::Fp16, true, 8, true, false),
            ),
            (
                PipelineState { kohya: KohyaOpts { cache_latents: true, cache_te: true, unet_only: true, ..KohyaOpts::default() }, ..kohya("sdxl") },
                KohyaJob { network_train_unet_only: true, ..cli_job(1024, 1024, 1, 16, true, OptimizerKind::Adamw, WeightDType::Bf16, false, 0, true, true) },
            ),
            // --fp8_base with the text encoders' LoRA, and --fp8_base_unet on the UNet alone
            (PipelineState { kohya: KohyaOpts { fp8: Fp8Base::All, ..KohyaOpts::default() }, ..kohya("sdxl") }, KohyaJob { fp8_base: true, ..cli_job(1024, 1024, 1, 16, true, OptimizerKind::Adamw, WeightDType::Bf16, false, 0, false, false) }),
            (
                PipelineState { kohya: KohyaOpts { fp8: Fp8Base::Unet, unet_only: true, ..KohyaOpts::default() }, ..kohya("sdxl") },
                KohyaJob { fp8_base_unet: true, network_train_unet_only: true, ..cli_job(1024, 1024, 1, 16, true, OptimizerKind::Adamw, WeightDType::Bf16, false, 0, false, false) },
            ),
        ];
        for (s, j) in cases {
            let want = job(unet, Some(&p), &j).unwrap();
            let Answer::Train(t) = pipe::answer(&s, &p).unwrap() else { panic!("a training answer") };
            assert_eq!((t.peak, t.params, t.trainable, t.trainer), (want.peak, want.step.params, want.step.trainable, Trainer::Kohya), "{s:?}");
            assert_eq!(t.resident, want.resident);
            assert_eq!(t.frozen, want.resident.iter().map(|r| r.1).sum::<u64>());
        }
        // the diffusers trainer's answer is unchanged by kohya's own settings
        let d = PipelineState { trainer: Trainer::Diffusers, kohya: KohyaOpts { conv_dim: 8, ..KohyaOpts::default() }, ..kohya("sdxl") };
        assert_eq!(pipe::answer(&d, &p), pipe::answer(&PipelineState { kohya: KohyaOpts::default(), ..d.clone() }, &p));
    }

    #[test]
    fn kohya_fields_read_back_and_refusals_are_the_cores() {
        for id in ["sdxl", "sd-1.5"] {
            let p = spec(id).unwrap();
            for s in [kohya(id), PipelineState { dtype: Some(WeightDType::Fp8), kohya: KohyaOpts { full_half: true, conv_dim: 4, cache_latents: true, cache_te: true, unet_only: true, fp8: Fp8Base::Unet }, ..kohya(id) }] {
                let f = pipe::fields(&s, &p);
                for want in ["trainer", "mixed-precision", "full-half", "network-dim", "conv-dim", "cache-latents", "unet-only", "fp8-base"] {
                    assert!(f.iter().any(|x| x.id == want), "{id}: {want}");
                }
                assert!(!f.iter().any(|x| x.id == "dtype" || x.id == "cached" || x.id == "lora-r"), "{id}: diffusers' fields");
                for x in f {
                    assert_eq!(with(&s, &p, x.id, &x.value).as_ref(), Ok(&s), "{id} {}", x.id);
                }
            }
        }
        let p = spec("sd-1.5").unwrap();
        assert!(!pipe::fields(&kohya("sd-1.5"), &p).iter().any(|x| x.id == "cache-te"), "SD 1.x keeps its text encoder");
        let err = |s: PipelineState| pipe::answer(&s, &p).unwrap_err();
        assert!(err(PipelineState { kohya: KohyaOpts { cache_te: true, unet_only: true, ..KohyaOpts::default() }, ..kohya("sd-1.5") }).starts_with("--cache-text-encoder-outputs: train_network.py"));
        assert!(err(PipelineState { kohya: KohyaOpts { cache_te: true, ..KohyaOpts::default() }, ..kohya("sd-1.5") }).contains("needs --network-train-unet-only"));
        assert!(err(PipelineState { dtype: Some(WeightDType::Fp32), kohya: KohyaOpts { fp8: Fp8Base::All, ..KohyaOpts::default() }, ..kohya("sd-1.5") }).contains("--fp8-base"));
        assert!(err(PipelineState { dtype: Some(WeightDType::Fp32), kohya: KohyaOpts { full_half: true, ..KohyaOpts::default() }, ..kohya("sd-1.5") }).contains("--full-bf16"));
        assert!(pipe::answer(&kohya("flux.1-dev"), &spec("flux.1-dev").unwrap()).unwrap_err().contains("UNet2DConditionModel"));
    }

    #[test]
    fn what_ifs_are_the_cores_job_what_ifs() {
        let p = spec("sdxl").unwrap();
        let s = PipelineState { checkpointing: false, batch: 2, ..kohya("sdxl") };
        let w = what_ifs(&s, &p, None).unwrap();
        let unet = &p.components.iter().find(|c| c.0 == "unet").unwrap().1;
        let (_, j) = job_of(&s, &p).unwrap();
        let core = kohya_job::what_ifs(unet, Some(&p), &j).unwrap();
        // every lowering change of the core's list, in its order, each the job it shows
        let lowering: Vec<u64> = core.iter().filter(|x| x.delta_bytes < 0).map(|x| x.peak_bytes).collect();
        assert_eq!(w.iter().map(|x| x.peak).collect::<Vec<_>>(), lowering);
        for want in [
            PipelineState { kohya: KohyaOpts { cache_latents: true, ..s.kohya }, ..s.clone() },
            PipelineState { kohya: KohyaOpts { unet_only: true, ..s.kohya }, ..s.clone() },
            PipelineState { kohya: KohyaOpts { cache_te: true, unet_only: true, ..s.kohya }, ..s.clone() },
            PipelineState { checkpointing: true, ..s.clone() },
            PipelineState { optimizer: OptimizerKind::Adam8bit, ..s.clone() },
            PipelineState { kohya: KohyaOpts { full_half: true, ..s.kohya }, ..s.clone() },
        ] {
            let x = w.iter().find(|x| x.state == want).unwrap_or_else(|| panic!("{want:?} in {w:?}"));
            assert_eq!(pipe::answer(&x.state, &p).unwrap().peak(), x.peak);
        }
        let cl = w.iter().find(|x| x.changes == vec![("cache-latents".to_string(), "true".to_string())]).expect("cache latents alone");
        let vae = p.components.iter().find(|c| c.0 == "vae").unwrap();
        assert_eq!(cl.saves, vramcalc_core::diffusion::pipeline::component_params(&vae.1).unwrap() * 2, "the bf16 VAE off the GPU");
    }

    #[test]
    fn the_largest_batch_that_fits_is_a_kohya_job_that_fits() {
        use crate::pipeline::whatif::largest;
        use vramcalc_core::diffusion::reverse::Knob;
        let p = spec("sdxl").unwrap();
        let cap = 24u64 << 30;
        let s = PipelineState { kohya: KohyaOpts { cache_latents: true, ..KohyaOpts::default() }, ..kohya("sdxl") };
        let b = largest(&s, &p, Knob::Batch, cap).unwrap().expect("a batch fits 24 GiB");
        assert!(!b.at_limit && b.state.trainer == Trainer::Kohya && b.state.kohya == s.kohya);
        let at = pipe::answer(&b.state, &p).unwrap();
        assert!(at.device_total() <= cap && at.device_total() == b.device_total);
        let next = pipe::answer(&PipelineState { batch: b.value + 1, ..b.state.clone() }, &p).unwrap();
        assert!(next.device_total() > cap, "batch {} + 1 fits too", b.value);
    }
}
