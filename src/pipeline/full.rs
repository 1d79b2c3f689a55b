//! The pipeline panel's train mode with diffusers' full fine-tuning of the denoiser (issue 27),
//! pure and tested natively: its fields, the state as the core's `FullSettings` composed as
//! `vramcalc estimate --mode train` (no `--finetune lora`) composes them
//! (`crates/cli/src/diffusion_full.rs`: the mixed precision from `--precision`, the EMA from
//! `--use-ema` / `--offload-ema`, the script by `full_train::default_script`), the answer by the
//! core's `full_train::full_job` (the script's step, its EMA copy and the frozen models it keeps
//! on the GPU), and its what-ifs, each re-run through `full_job` (or the LoRA answer).

use super::{lora_setup, FullFigures, TrainAnswer, OPTIMIZERS};
use crate::form::{named, Field};
use crate::state::pipeline::{PipelineState, TrainMethod};
use vramcalc_core::diffusion::full_train::{default_script, full_job, Ema, FullSettings};
use vramcalc_core::diffusion::{Component, ComponentKind, Pass, PipelineSpec, WeightDType};
use vramcalc_core::{OptimizerKind, Precision};

/// The EMA field's values: none, `--use-ema` (on the GPU), `--use-ema --offload-ema`.
const EMA: [(Ema, &str); 3] = [(Ema::None, "none"), (Ema::Gpu, "gpu"), (Ema::Cpu, "offload")];

/// The EMA field's value of `e` (and the link's).
pub fn ema_name(e: Ema) -> &'static str {
    EMA.iter().find(|x| x.0 == e).map_or("none", |x| x.1)
}

/// [`ema_name`]'s inverse.
pub fn ema_parse(text: &str) -> Option<Ema> {
    EMA.iter().find(|x| x.1 == text.trim()).map(|x| x.0)
}

/// Full fine-tuning's own fields, after the shared ones (size, batch, the dtype as the mixed
/// precision); LoRA's rank and cached latents do not apply.
pub fn fields(s: &PipelineState, out: &mut Vec<Field>) {
    out.push(Field::check("checkpointing", s.checkpointing));
    out.push(Field::select("optimizer", named(OPTIMIZERS.iter().map(|o| o.name())), s.optimizer.name()));
    out.push(Field::select("ema", named(EMA.iter().map(|x| x.1)), ema_name(s.full.ema).to_string()));
    out.push(Field::check("set-grads-to-none", s.full.set_grads_to_none));
}

/// `--mixed_precision` from the panel's dtype, as the CLI reads `--precision` (default bf16).
fn mixed_precision(d: Option<WeightDType>) -> Result<Precision, String> {
    match d.unwrap_or(WeightDType::Bf16) {
        WeightDType::Fp32 => Ok(Precision::Fp32),
        WeightDType::Fp16 => Ok(Precision::AmpFp16),
        WeightDType::Bf16 => Ok(Precision::AmpBf16),
        d => Err(format!("--precision {:?}: full fine-tuning keeps the UNet in fp32 under --mixed_precision fp16 | bf16 (or fp32)", d.name())),
    }
}

/// The pipeline's denoiser, the pass and the core's settings the state sets.
pub fn job_of<'a>(s: &PipelineState, p: &'a PipelineSpec) -> Result<(&'a (String, Component), Pass, FullSettings), String> {
    let (named, setup) = lora_setup(s, p)?;
    let ema = s.full.ema;
    let script = default_script(&named.1, ema != Ema::None, s.full.set_grads_to_none);
    let fs = FullSettings { mixed_precision: mixed_precision(s.dtype)?, device: setup.device, batch: setup.batch, checkpointing: setup.checkpointing, optimizer: setup.optimizer, script, ema };
    Ok((named, setup.pass, fs))
}

/// The job's answer (the core's refusal for a denoiser it does not model: SD3, Wan).
pub fn answer(s: &PipelineState, p: &PipelineSpec) -> Result<TrainAnswer, String> {
    let ((name, c), pass, fs) = job_of(s, p)?;
    let j = full_job(c, Some(p), pass, fs).map_err(|e| e.to_string().trim_start_matches("config: ").to_string())?;
    let Pass::Denoise { width, height, frames, .. } = pass else { return Err("a training step is of the denoiser".into()) };
    Ok(TrainAnswer {
        component: name.clone(),
        class: c.class().to_string(),
        peak: j.peak,
        frozen: j.resident.iter().map(|r| r.1).sum(),
        params: j.step.step.params,
        trainable: j.step.step.trainable,
        width,
        height,
        frames,
        trainer: s.trainer,
        resident: j.resident,
        full: Some(FullFigures { script: fs.script.name().to_string(), ema_bytes: j.step.ema_bytes, ema_on_gpu: j.step.ema_on_gpu }),
    })
}

/// The what-ifs' states, one change each: checkpointing, 8-bit Adam, the EMA offloaded, the
/// gradients freed, batch 1, and a LoRA (r=16) in its place with the same frozen models loaded.
pub fn candidates(s: &PipelineState, p: &PipelineSpec) -> Result<Vec<PipelineState>, String> {
    let ((_, c), _, fs) = job_of(s, p)?;
    let mut out = Vec::new();
    if !s.checkpointing {
        out.push(PipelineState { checkpointing: true, ..s.clone() });
    }
    if s.optimizer != OptimizerKind::Adam8bit {
        out.push(PipelineState { optimizer: OptimizerKind::Adam8bit, ..s.clone() });
    }
    if s.full.ema == Ema::Gpu {
        let mut o = s.clone();
        o.full.ema = Ema::Cpu;
        out.push(o);
    }
    if !s.full.set_grads_to_none && default_script(c, s.full.ema != Ema::None, true) != fs.script {
        let mut o = s.clone();
        o.full.set_grads_to_none = true;
        out.push(o);
    }
    if s.batch > 1 {
        out.push(PipelineState { batch: 1, ..s.clone() });
    }
    out.push(PipelineState { method: TrainMethod::Lora, lora_r: 16, cached: !fs.script.keeps(ComponentKind::TextEncoder), ..s.clone() });
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::whatif::{largest, what_ifs};
    use crate::pipeline::{self as pipe, spec, with, Answer};
    use crate::state::pipeline::{FullOpts, PipeMode, Trainer};
    use vramcalc_core::diffusion::full_train::Script;
    use vramcalc_core::Device;

    fn full(preset: &str) -> PipelineState {
        PipelineState { preset: preset.into(), mode: PipeMode::Train, method: TrainMethod::Full, ..PipelineState::default() }
    }

    fn opts(ema: Ema, gn: bool) -> FullOpts {
        FullOpts { ema, set_grads_to_none: gn }
    }

    /// The settings as `vramcalc estimate --pipeline ID --mode train --width W --height H
    /// --batch B --precision P [--checkpointing] [--optimizer O] [--use-ema [--offload-ema]]
    /// [--set-grads-to-none]` builds them (`crates/cli/src/diffusion_full.rs`), written out
    /// here rather than read from the state.
    #[allow(clippy::too_many_arguments)]
    fn cli(w: u64, h: u64, batch: u64, mixed: Precision, ck: bool, opt: OptimizerKind, script: Script, ema: Ema) -> (Pass, FullSettings) {
        (Pass::Denoise { width: w, height: h, frames: 1, text_len: 77 }, FullSettings { mixed_precision: mixed, device: Device::Cuda, batch, checkpointing: ck, optimizer: opt, script, ema })
    }

    #[test]
    fn the_answer_is_the_cores_full_job() {
        let cases = [
            ("sd-1.5", full("sd-1.5"), cli(512, 512, 1, Precision::AmpBf16, true, OptimizerKind::Adamw, Script::Dreambooth, Ema::None)),
            ("sd-1.5", PipelineState { full: opts(Ema::None, true), ..full("sd-1.5") }, cli(512, 512, 1, Precision::AmpBf16, true, OptimizerKind::Adamw, Script::TextToImage, Ema::None)),
            (
                "sd-1.5",
                PipelineState { width: Some(768), height: Some(640), batch: 4, dtype: Some(WeightDType::Fp16), checkpointing: false, optimizer: OptimizerKind::Adam8bit, full: opts(Ema::Gpu, false), ..full("sd-1.5") },
                cli(768, 640, 4, Precision::AmpFp16, false, OptimizerKind::Adam8bit, Script::TextToImage, Ema::Gpu),
            ),
            ("sd-1.5", PipelineState { dtype: Some(WeightDType::Fp32), full: opts(Ema::Cpu, false), ..full("sd-1.5") }, cli(512, 512, 1, Precision::Fp32, true, OptimizerKind::Adamw, Script::TextToImage, Ema::Cpu)),
            ("sdxl", PipelineState { full: opts(Ema::Gpu, false), ..full("sdxl") }, cli(1024, 1024, 1, Precision::AmpBf16, true, OptimizerKind::Adamw, Script::TextToImageSdxl, Ema::Gpu)),
        ];
        for (id, s, (pass, fs)) in cases {
            let p = spec(id).unwrap();
            let unet = &p.components.iter().find(|c| c.0 == "unet").unwrap().1;
            let want = full_job(unet, Some(&p), pass, fs).unwrap();
            let a = pipe::answer(&s, &p).unwrap();
            assert_eq!(a.cpu_ram(), if fs.ema == Ema::Cpu { want.step.ema_bytes } else { 0 }, "{s:?}");
            let Answer::Train(t) = a else { panic!("a training answer") };
            assert_eq!((t.peak, t.params, t.trainable), (want.peak, want.step.step.params, want.step.step.trainable), "{s:?}");
            assert_eq!(t.full, Some(FullFigures { script: fs.script.name().to_string(), ema_bytes: want.step.ema_bytes, ema_on_gpu: want.step.ema_on_gpu }));
            assert_eq!(t.resident, want.resident);
            assert_eq!(t.frozen, want.resident.iter().map(|r| r.1).sum::<u64>());
            assert_eq!(t.trainable, t.params, "the whole denoiser trains");
        }
        // the LoRA answer is unchanged by full fine-tuning's own settings
        let l = PipelineState { method: TrainMethod::Lora, full: opts(Ema::Gpu, true), ..full("sd-1.5") };
        let p = spec("sd-1.5").unwrap();
        assert_eq!(pipe::answer(&l, &p), pipe::answer(&PipelineState { full: FullOpts::default(), ..l.clone() }, &p));
        assert!(matches!(pipe::answer(&l, &p), Ok(Answer::Train(TrainAnswer { full: None, .. }))));
    }

    #[test]
    fn full_fields_read_back_and_refusals_are_the_cores() {
        for id in ["sd-1.5", "sdxl", "flux.1-dev"] {
            let p = spec(id).unwrap();
            for s in [full(id), PipelineState { dtype: Some(WeightDType::Fp16), batch: 3, checkpointing: false, full: opts(Ema::Cpu, true), ..full(id) }] {
                let f = pipe::fields(&s, &p);
                for want in ["trainer", "method", "dtype", "batch", "checkpointing", "optimizer", "ema", "set-grads-to-none"] {
                    assert!(f.iter().any(|x| x.id == want), "{id}: {want}");
                }
                assert!(!f.iter().any(|x| ["lora-r", "cached", "network-dim"].contains(&x.id)), "{id}: LoRA's fields");
                for x in f {
                    assert_eq!(with(&s, &p, x.id, &x.value).as_ref(), Ok(&s), "{id} {}", x.id);
                }
            }
        }
        let p = spec("sd-1.5").unwrap();
        assert!(pipe::fields(&PipelineState { method: TrainMethod::Lora, ..full("sd-1.5") }, &p).iter().any(|x| x.id == "lora-r"));
        assert!(!pipe::fields(&PipelineState { trainer: Trainer::Kohya, ..full("sd-1.5") }, &p).iter().any(|x| x.id == "method" || x.id == "ema"), "kohya trains a LoRA");
        assert!(with(&full("sd-1.5"), &p, "ema", "cpu").is_err());
        assert!(pipe::answer(&PipelineState { dtype: Some(WeightDType::Fp8), ..full("sd-1.5") }, &p).unwrap_err().starts_with("--precision \"fp8\""));
        // the core's refusals, as it words them
        for id in ["sd3.5-medium", "wan2.1-t2v-1.3b"] {
            let p = spec(id).unwrap();
            let d = &pipe::denoiser(&p).unwrap().1;
            let (_, pass, fs) = job_of(&full(id), &p).unwrap();
            let want = full_job(d, Some(&p), pass, fs).unwrap_err().to_string();
            let got = pipe::answer(&full(id), &p).unwrap_err();
            assert!(want.ends_with(&got) && got.contains("use --finetune lora"), "{id}: {got}");
        }
    }

    #[test]
    fn what_ifs_re_run_the_full_job() {
        let p = spec("sd-1.5").unwrap();
        let s = PipelineState { checkpointing: false, batch: 8, width: Some(768), height: Some(768), full: opts(Ema::Gpu, false), ..full("sd-1.5") };
        let w = what_ifs(&s, &p, Some(24 << 30)).unwrap();
        let mut off = s.clone();
        off.full.ema = Ema::Cpu;
        for want in [
            PipelineState { checkpointing: true, ..s.clone() },
            PipelineState { optimizer: OptimizerKind::Adam8bit, ..s.clone() },
            off,
            PipelineState { batch: 1, ..s.clone() },
            PipelineState { method: TrainMethod::Lora, lora_r: 16, cached: false, ..s.clone() },
        ] {
            let x = w.iter().find(|x| x.state == want).unwrap_or_else(|| panic!("{want:?} in {w:?}"));
            assert_eq!(pipe::answer(&x.state, &p).unwrap().device_total(), x.device_total);
        }
        let offloaded = w.iter().find(|x| x.changes == vec![("ema".to_string(), "offload".to_string())]).expect("the EMA offloaded alone");
        let Answer::Train(t) = pipe::answer(&s, &p).unwrap() else { panic!() };
        let ema = t.full.unwrap().ema_bytes;
        assert_eq!((offloaded.saves, offloaded.cpu_ram), (ema, ema), "the fp32 copy moves to CPU RAM");
        assert_eq!(ema, t.params * 4);
        // train_dreambooth.py keeps its gradients, --set-grads-to-none frees them (train_text_to_image.py's
        // step): offered, and listed only where the core's job is lower
        let d = PipelineState { checkpointing: false, ..full("sd-1.5") };
        let mut gn = d.clone();
        gn.full.set_grads_to_none = true;
        assert!(candidates(&d, &p).unwrap().contains(&gn));
        let lower = pipe::answer(&gn, &p).unwrap().device_total() < pipe::answer(&d, &p).unwrap().device_total();
        assert_eq!(what_ifs(&d, &p, None).unwrap().iter().any(|x| x.state == gn), lower);
        assert!(!candidates(&PipelineState { preset: "sdxl".into(), ..d.clone() }, &spec("sdxl").unwrap()).unwrap().iter().any(|x| x.full.set_grads_to_none), "SDXL's script frees them already");
    }

    #[test]
    fn the_largest_batch_and_size_are_full_jobs_that_fit() {
        use vramcalc_core::diffusion::reverse::Knob;
        let p = spec("sd-1.5").unwrap();
        let cap = 24u64 << 30;
        let s = PipelineState { full: opts(Ema::Gpu, false), ..full("sd-1.5") };
        for knob in [Knob::Batch, Knob::Resolution] {
            let b = largest(&s, &p, knob, cap).unwrap().expect("fits 24 GiB");
            assert!(!b.at_limit && b.state.method == TrainMethod::Full && b.state.full == s.full, "{knob:?}");
            let at = pipe::answer(&b.state, &p).unwrap();
            assert!(at.device_total() <= cap && at.device_total() == b.device_total);
            let next = match knob {
                Knob::Batch => PipelineState { batch: b.value + 1, ..b.state.clone() },
                _ => PipelineState { width: Some(b.value + 16), height: Some(b.value + 16), ..b.state.clone() },
            };
            assert!(pipe::answer(&next, &p).unwrap().device_total() > cap, "{knob:?} {} + 1 fits too", b.value);
        }
    }
}
