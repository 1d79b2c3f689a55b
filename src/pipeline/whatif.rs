//! The pipeline panel's what-ifs and reverse answer (issue 27), pure and tested natively: the
//! core's lists of changes — `diffusion::reverse::what_ifs` (offload modes, VAE tiling and
//! slicing, fp8/nf4 weights, a smaller size, fewer frames) for inference and decode,
//! `diffusion::train_whatif::what_ifs` (checkpointing, 8-bit Adam, rank, size, batch) and cached
//! latents for a LoRA step, `diffusion::kohya_job::what_ifs` for kohya's (its caches,
//! checkpointing, 8-bit AdamW, full bf16/fp16, rank, batch), `full::candidates` for a full fine-tune
//! (checkpointing, 8-bit Adam, the EMA offloaded, gradients freed, batch 1, a LoRA instead) — each read back into the panel's state so Apply sets exactly what
//! was shown; and the largest resolution, batch or frames that fits the GPU
//! (`diffusion::reverse::largest_by`, the core's search over the mode's own answer).

use super::{answer, lora_setup, settings};
use crate::state::pipeline::{PipeMode, PipelineState, TrainMethod, Trainer};
use vramcalc_core::diffusion::pipeline::Family;
use vramcalc_core::diffusion::reverse::{self, Knob};
use vramcalc_core::diffusion::train_whatif::{self, LoraSetup};
use vramcalc_core::diffusion::{Pass, PipelineSettings, PipelineSpec};
use serde::{Deserialize, Serialize};
use vramcalc_core::Error;

/// One change alone on the setup and the answer it gives (computed in the app's worker).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PipeWhatIf {
    /// The fields it changes: `(field id, the field's text after)`.
    pub changes: Vec<(String, String)>,
    pub peak: u64,
    pub device_total: u64,
    pub cpu_ram: u64,
    /// Device total before − after (only changes that lower it are listed).
    pub saves: u64,
    /// Whether the device total fits the chosen GPU.
    pub fits: Option<bool>,
    /// The state Apply sets.
    pub state: PipelineState,
}

/// `s` with the core's pipeline settings `set` (sizes equal to the defaults kept as defaults).
pub fn state_of(s: &PipelineState, p: &PipelineSpec, set: &PipelineSettings) -> PipelineState {
    let (dw, dh, df) = p.default_size();
    PipelineState {
        width: set.width.filter(|w| *w != dw),
        height: set.height.filter(|h| *h != dh),
        frames: set.frames.filter(|f| *f != df && p.family == Family::Wan),
        batch: set.batch,
        images_per_prompt: set.images_per_prompt,
        guidance: set.guidance,
        offload: set.offload,
        vae_tiling: set.vae_tiling,
        vae_slicing: set.vae_slicing,
        dtype: set.dtype,
        component_dtypes: set.component_dtypes.clone(),
        ..s.clone()
    }
}

/// `s` with a LoRA step's setup (`lora_setup`'s inverse).
fn train_state(s: &PipelineState, p: &PipelineSpec, t: &LoraSetup) -> PipelineState {
    let (dw, dh, _) = p.default_size();
    let mut out = PipelineState { batch: t.batch, lora_r: t.finetune.lora_r, checkpointing: t.checkpointing, optimizer: t.optimizer, ..s.clone() };
    if let Pass::Denoise { width, height, .. } = t.pass {
        (out.width, out.height) = ((width != dw).then_some(width), (height != dh).then_some(height));
    }
    out
}

/// The fields whose text differs between `before` and `after`, as `after` shows them.
pub fn changes(p: &PipelineSpec, before: &PipelineState, after: &PipelineState) -> Vec<(String, String)> {
    let old = super::fields(before, p);
    super::fields(after, p).into_iter().filter(|f| !old.iter().any(|o| o.id == f.id && o.value == f.value)).map(|f| (f.id.to_string(), f.value)).collect()
}

/// The candidate states, in the core's order.
fn candidates(s: &PipelineState, p: &PipelineSpec) -> Result<Vec<PipelineState>, String> {
    let err = |e: Error| e.to_string();
    Ok(match s.mode {
        PipeMode::Infer | PipeMode::Decode => reverse::what_ifs(p, &settings(s)).map_err(err)?.iter().map(|w| state_of(s, p, &w.settings)).collect(),
        PipeMode::Train if s.trainer == Trainer::Kohya => super::kohya::candidates(s, p)?,
        PipeMode::Train if s.method == TrainMethod::Full => super::full::candidates(s, p)?,
        PipeMode::Train => {
            let (c, setup) = lora_setup(s, p)?;
            let mut out: Vec<PipelineState> = train_whatif::what_ifs(&c.1, &setup, None).map_err(err)?.iter().filter_map(|w| w.setup.as_ref()).map(|t| train_state(s, p, t)).collect();
            if !s.cached {
                out.push(PipelineState { cached: true, ..s.clone() });
            }
            out
        }
    })
}

/// Each change alone that lowers the device total, with its answer.
pub fn what_ifs(s: &PipelineState, p: &PipelineSpec, capacity: Option<u64>) -> Result<Vec<PipeWhatIf>, String> {
    let base = answer(s, p)?.device_total();
    let mut out: Vec<PipeWhatIf> = Vec::new();
    for state in candidates(s, p)? {
        if state == *s || out.iter().any(|w| w.state == state) {
            continue;
        }
        let Ok(a) = answer(&state, p) else { continue };
        let total = a.device_total();
        if total < base {
            out.push(PipeWhatIf {
                changes: changes(p, s, &state),
                peak: a.peak(),
                device_total: total,
                cpu_ram: a.cpu_ram(),
                saves: base - total,
                fits: capacity.map(|c| total <= c),
                state,
            });
        }
    }
    Ok(out)
}

/// What the reverse answer grows in this setup: resolution and batch, and frames for video.
pub fn knobs(p: &PipelineSpec) -> Vec<Knob> {
    let mut k = vec![Knob::Resolution, Knob::Batch];
    if p.family == Family::Wan {
        k.push(Knob::Frames);
    }
    k
}

/// The setup's value of `knob` (resolution: the longer side).
pub fn current(s: &PipelineState, p: &PipelineSpec, knob: Knob) -> u64 {
    let (dw, dh, df) = p.default_size();
    match knob {
        Knob::Width => s.width.unwrap_or(dw),
        Knob::Height => s.height.unwrap_or(dh),
        Knob::Resolution => s.width.unwrap_or(dw).max(s.height.unwrap_or(dh)),
        Knob::Frames => s.frames.unwrap_or(df),
        Knob::Batch => s.batch,
    }
}

/// The largest value of `knob` that fits (computed in the app's worker).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Biggest {
    pub knob: Knob,
    pub value: u64,
    pub device_total: u64,
    /// The search's limit: it may fit beyond.
    pub at_limit: bool,
    /// The state "Use" sets.
    pub state: PipelineState,
}

/// The largest `knob` whose device total (of this mode's answer: the pipeline, the decode or the
/// LoRA step) fits `capacity`; `None` when not even the smallest does.
pub fn largest(s: &PipelineState, p: &PipelineSpec, knob: Knob, capacity: u64) -> Result<Option<Biggest>, String> {
    let total = |set: &PipelineSettings| answer(&state_of(s, p, set), p).map(|a| a.device_total()).map_err(Error::Config);
    let found = reverse::largest_by(p, &settings(s), knob, capacity, total).map_err(|e| e.to_string())?;
    Ok(found.map(|f| Biggest { knob, value: f.value, device_total: f.total_bytes, at_limit: f.at_limit, state: state_of(s, p, &f.settings) }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::spec;
    use vramcalc_core::diffusion::{Offload, WeightDType};
    use vramcalc_core::OptimizerKind;

    const GB: u64 = 1_000_000_000;
    const GIB24: u64 = 24 << 30;

    #[test]
    fn each_what_if_applies_to_the_answer_it_shows() {
        let p = spec("flux.1-dev").unwrap();
        let s = PipelineState::default();
        let base = answer(&s, &p).unwrap().device_total();
        let w = what_ifs(&s, &p, Some(24 * GB)).unwrap();
        assert!(w.len() >= 5, "{w:?}");
        for x in &w {
            let a = answer(&x.state, &p).unwrap();
            assert_eq!((a.peak(), a.device_total(), x.saves), (x.peak, x.device_total, base - x.device_total));
            assert_eq!(x.fits, Some(x.device_total <= 24 * GB));
            assert!(!x.changes.is_empty());
        }
        let by = |id: &str, v: &str| w.iter().find(|x| x.changes.iter().any(|c| c.0 == id && c.1 == v)).unwrap_or_else(|| panic!("no {id}={v}: {w:?}"));
        assert_eq!(by("offload", "model").state.offload, Offload::Model);
        assert_eq!(by("dtype-transformer", "fp8").state.component_dtypes, vec![("transformer".to_string(), WeightDType::Fp8)]);
        assert_eq!(by("offload", "group").changes, vec![("offload".to_string(), "group".to_string())], "one change alone");
        // the same list as the core's, in its order, less what does not lower the device total
        let core = reverse::what_ifs(&p, &settings(&s)).unwrap();
        let lowering: Vec<u64> = core.iter().filter(|c| reverse::device_total(&p.estimate(&c.settings).unwrap()) < base).map(|c| c.peak_bytes).collect();
        assert_eq!(w.iter().map(|x| x.peak).collect::<Vec<_>>(), lowering);
    }

    #[test]
    fn decode_and_training_have_their_own_what_ifs() {
        let p = spec("sdxl").unwrap();
        let d = PipelineState { preset: "sdxl".into(), mode: PipeMode::Decode, width: Some(2048), height: Some(2048), ..PipelineState::default() };
        let w = what_ifs(&d, &p, None).unwrap();
        assert!(w.iter().any(|x| x.state.vae_tiling == Some(0)), "{w:?}");
        let t = PipelineState { preset: "sdxl".into(), mode: PipeMode::Train, checkpointing: false, cached: false, batch: 2, ..PipelineState::default() };
        let w = what_ifs(&t, &p, None).unwrap();
        for want in [
            PipelineState { checkpointing: true, ..t.clone() },
            PipelineState { optimizer: OptimizerKind::Adam8bit, ..t.clone() },
            PipelineState { lora_r: 8, ..t.clone() },
            PipelineState { width: Some(768), height: Some(768), ..t.clone() },
            PipelineState { batch: 1, ..t.clone() },
            PipelineState { cached: true, ..t.clone() },
        ] {
            assert!(w.iter().any(|x| x.state == want), "{want:?} in {w:?}");
        }
        assert!(!w.iter().any(|x| x.state.lora_r == 32), "a larger rank costs memory");
        let cached = w.iter().find(|x| x.state.cached).unwrap();
        assert_eq!(cached.saves, train_whatif::frozen_weights(&p, &settings(&t)).unwrap());
    }

    #[test]
    fn the_largest_value_fits_and_the_next_does_not() {
        for (id, mode, knob) in [("flux.1-dev", PipeMode::Infer, Knob::Resolution), ("sdxl", PipeMode::Train, Knob::Batch), ("wan2.1-t2v-1.3b", PipeMode::Infer, Knob::Frames), ("sd-1.5", PipeMode::Decode, Knob::Resolution)] {
            let p = spec(id).unwrap();
            let s = PipelineState { preset: id.into(), mode, offload: Offload::Model, ..PipelineState::default() };
            let b = largest(&s, &p, knob, GIB24).unwrap().unwrap_or_else(|| panic!("{id}: nothing fits"));
            assert!(!b.at_limit, "{id} {knob:?}");
            assert_eq!(current(&b.state, &p, knob), b.value, "{id} {knob:?}");
            assert_eq!(answer(&b.state, &p).unwrap().device_total(), b.device_total);
            assert!(b.device_total <= GIB24);
            let next = match knob {
                Knob::Batch => PipelineState { batch: b.value + 1, ..b.state.clone() },
                Knob::Frames => PipelineState { frames: Some(b.value + 4), ..b.state.clone() },
                _ => PipelineState { width: Some(b.value + 16), height: Some(b.value + 16), ..b.state.clone() },
            };
            assert!(answer(&next, &p).map_or(true, |a| a.device_total() > GIB24), "{id} {knob:?} {}", b.value);
        }
        assert!(largest(&PipelineState::default(), &spec("flux.1-dev").unwrap(), Knob::Batch, GB).unwrap().is_none());
        assert!(knobs(&spec("sdxl").unwrap()).iter().all(|k| *k != Knob::Frames));
    }
}
