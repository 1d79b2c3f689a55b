//! The reverse answer and the what-ifs of a pipeline: the largest width, height, resolution,
//! frame count or batch whose device total fits a GPU (`largest`), and each memory trick
//! (offload modes, VAE tiling and slicing, fp8 and nf4 weights, a smaller size, fewer frames)
//! applied alone with its peak (`what_ifs`). Both re-estimate the pipeline (`PipelineSpec::estimate`);
//! nothing here is measured.
//!
//! The search assumes the peak grows with the value (every stage's activations do, and the
//! weights do not change), doubles from the smallest value until it does not fit, then bisects.

use super::component::ComponentKind;
use super::offload::Offload;
use super::pipeline::{Family, PipelineEstimate, PipelineSettings, PipelineSpec, WeightDType};
use crate::error::{Error, Result};
use crate::memory::device::{CUBLAS_WORKSPACE_BYTES, CUDA_CONTEXT_BYTES};
use serde::{Deserialize, Serialize};

/// What `largest` grows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Knob {
    Width,
    Height,
    /// Width and height together, in the aspect ratio of the settings (or the default size).
    Resolution,
    /// Video frames (Wan: `4k + 1`).
    Frames,
    /// Prompts per call (`images_per_prompt` as set).
    Batch,
}

crate::config::names!(Knob { Width = "width", Height = "height", Resolution = "resolution", Frames = "frames", Batch = "batch" });

/// The device total of an estimate: the peak allocated plus the CUDA context and cuBLAS
/// workspace (approximate, as `vramcalc diffusion-table` counts it).
pub fn device_total(e: &PipelineEstimate) -> u64 {
    e.peak_bytes.saturating_add(CUDA_CONTEXT_BYTES).saturating_add(CUBLAS_WORKSPACE_BYTES)
}

/// `largest`'s answer: the value, the settings it gives and their estimate.
#[derive(Debug, Clone, PartialEq)]
pub struct Largest {
    pub knob: Knob,
    pub value: u64,
    pub settings: PipelineSettings,
    pub estimate: PipelineEstimate,
    /// The device total at the value.
    pub total_bytes: u64,
    /// The value reached the search's limit (it may fit beyond).
    pub at_limit: bool,
}

/// The pixel step of a family's sizes: the pipelines' `vae_scale_factor` (× 2 where the latent
/// is packed or patchified in 2 × 2: SD3, Flux, Wan).
fn pixel_step(f: Family) -> u64 {
    match f {
        Family::Sd | Family::Sdxl => 8,
        _ => 16,
    }
}

/// The settings at step `k` (k ≥ 1) of `knob`, and the value they stand for.
fn at(spec: &PipelineSpec, base: &PipelineSettings, knob: Knob, k: u64) -> (PipelineSettings, u64) {
    let (dw, dh, _) = spec.default_size();
    let (w0, h0) = (base.width.unwrap_or(dw), base.height.unwrap_or(dh));
    let step = pixel_step(spec.family);
    let mut s = base.clone();
    let v = match knob {
        Knob::Width => {
            s.width = Some(k * step);
            k * step
        }
        Knob::Height => {
            s.height = Some(k * step);
            k * step
        }
        Knob::Resolution => {
            // the longer side grows by steps, the other keeps the ratio (rounded to a step)
            let (long, short) = (w0.max(h0).max(1), w0.min(h0));
            let other = ((k * step * short + long / 2) / long / step).max(1) * step;
            if w0 >= h0 {
                s.width = Some(k * step);
                s.height = Some(other);
            } else {
                s.height = Some(k * step);
                s.width = Some(other);
            }
            k * step
        }
        Knob::Frames => {
            s.frames = Some(4 * (k - 1) + 1);
            4 * (k - 1) + 1
        }
        Knob::Batch => {
            s.batch = k;
            k
        }
    };
    (s, v)
}

/// The search's limit in steps: the sizes `estimate` accepts.
fn limit(spec: &PipelineSpec, base: &PipelineSettings, knob: Knob) -> u64 {
    match knob {
        Knob::Width | Knob::Height | Knob::Resolution => 16384 / pixel_step(spec.family),
        Knob::Frames => 1024,
        Knob::Batch => 4096 / base.images_per_prompt.max(1),
    }
}

/// The largest value of `knob` whose device total fits `gpu_bytes`, the other settings as in
/// `base`; `None` when not even the smallest does. Errors other than a size out of range are
/// returned.
pub fn largest(spec: &PipelineSpec, base: &PipelineSettings, knob: Knob, gpu_bytes: u64) -> Result<Option<Largest>> {
    let Some(f) = largest_by(spec, base, knob, gpu_bytes, |s| spec.estimate(s).map(|e| device_total(&e)))? else { return Ok(None) };
    let estimate = spec.estimate(&f.settings)?;
    Ok(Some(Largest { knob, value: f.value, settings: f.settings, estimate, total_bytes: f.total_bytes, at_limit: f.at_limit }))
}

/// [`largest_by`]'s answer: the value, the settings it gives and their device total.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    pub value: u64,
    pub settings: PipelineSettings,
    pub total_bytes: u64,
    pub at_limit: bool,
}

/// The same search over any figure of the settings: `total(settings)` is the device total of
/// what is asked (the whole pipeline, the decode alone, a LoRA step at that size and batch).
pub fn largest_by(spec: &PipelineSpec, base: &PipelineSettings, knob: Knob, gpu_bytes: u64, mut total: impl FnMut(&PipelineSettings) -> Result<u64>) -> Result<Option<Found>> {
    if knob == Knob::Frames && spec.family != Family::Wan {
        return Err(Error::Config(format!("{} makes images: --of frames is for video pipelines (Wan)", spec.name)));
    }
    // the smallest `estimate` accepts: 16 px, one frame, one prompt
    let min_k = match knob {
        Knob::Width | Knob::Height | Knob::Resolution => 16u64.div_ceil(pixel_step(spec.family)),
        _ => 1,
    };
    let max_k = limit(spec, base, knob).max(min_k);
    let mut try_k = |k: u64| -> Result<Option<(PipelineSettings, u64, u64)>> {
        let (s, v) = at(spec, base, knob, k);
        let t = total(&s)?;
        Ok((t <= gpu_bytes).then_some((s, v, t)))
    };
    let Some(mut best) = try_k(min_k)? else { return Ok(None) };
    let mut lo = min_k;
    // doubling, then bisection between the last that fits and the first that does not
    let mut hi = None;
    let mut k = min_k;
    while hi.is_none() {
        let next = k.saturating_mul(2).min(max_k);
        if next == k {
            break;
        }
        k = next;
        match try_k(k) {
            Ok(Some(b)) => {
                best = b;
                lo = k;
            }
            Ok(None) | Err(_) => hi = Some(k),
        }
    }
    if let Some(mut hi) = hi {
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            match try_k(mid) {
                Ok(Some(b)) => {
                    best = b;
                    lo = mid;
                }
                Ok(None) | Err(_) => hi = mid,
            }
        }
    }
    let (settings, value, total_bytes) = best;
    Ok(Some(Found { value, settings, total_bytes, at_limit: lo == max_k }))
}

/// One what-if: a change alone on the settings and its estimate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PipelineWhatIf {
    /// What changes (`offload model`, `VAE tiling`, …).
    pub name: String,
    pub peak_bytes: u64,
    pub peak_stage: String,
    /// Peak + CUDA context + cuBLAS workspace (approximate).
    pub total_bytes: u64,
    pub cpu_ram_bytes: u64,
    /// Against the settings' own peak (negative: less memory).
    pub delta_bytes: i64,
    #[serde(skip)]
    pub settings: PipelineSettings,
}

/// Each trick alone on `base`, in the order people try them; a change that is already set, or
/// that does not apply (slicing a batch of one, fewer frames of an image), is left out.
pub fn what_ifs(spec: &PipelineSpec, base: &PipelineSettings) -> Result<Vec<PipelineWhatIf>> {
    let e0 = spec.estimate(base)?;
    let mut tries: Vec<(String, PipelineSettings)> = Vec::new();
    for o in [Offload::Model, Offload::Group, Offload::Sequential] {
        if base.offload != o {
            tries.push((format!("offload {o}"), PipelineSettings { offload: o, ..base.clone() }));
        }
    }
    if base.vae_tiling.is_none() {
        tries.push(("VAE tiling".into(), PipelineSettings { vae_tiling: Some(0), ..base.clone() }));
    }
    if !base.vae_slicing && base.batch.saturating_mul(base.images_per_prompt) > 1 {
        tries.push(("VAE slicing".into(), PipelineSettings { vae_slicing: true, ..base.clone() }));
    }
    let denoisers: Vec<String> = spec.components.iter().filter(|c| c.1.kind() == ComponentKind::Denoiser).map(|c| c.0.clone()).collect();
    let t5: Vec<String> = spec.components.iter().filter(|(_, c)| matches!(c, super::Component::Text(t) if t.class.contains("T5"))).map(|c| c.0.clone()).collect();
    let set = |names: &[String], d: WeightDType| {
        let mut s = base.clone();
        for n in names {
            s.component_dtypes.retain(|(m, _)| m != n);
            s.component_dtypes.push((n.clone(), d));
        }
        s
    };
    let already = |names: &[String], d: WeightDType| names.iter().all(|n| base.component_dtypes.iter().any(|(m, x)| m == n && *x == d));
    if !already(&denoisers, WeightDType::Fp8) {
        tries.push(("fp8 denoiser".into(), set(&denoisers, WeightDType::Fp8)));
    }
    if !t5.is_empty() {
        let both: Vec<String> = denoisers.iter().chain(&t5).cloned().collect();
        if !already(&both, WeightDType::Fp8) {
            tries.push(("fp8 denoiser and T5".into(), set(&both, WeightDType::Fp8)));
        }
    }
    if !already(&denoisers, WeightDType::Nf4) {
        tries.push(("nf4 denoiser".into(), set(&denoisers, WeightDType::Nf4)));
    }
    let (dw, dh, df) = spec.default_size();
    let step = pixel_step(spec.family);
    let (w, h) = (base.width.unwrap_or(dw), base.height.unwrap_or(dh));
    let smaller = |x: u64| ((x * 3 / 4) / step).max(1) * step;
    if smaller(w) >= 16 && smaller(h) >= 16 && (smaller(w), smaller(h)) != (w, h) {
        tries.push((format!("{}×{} (3/4 the sides)", smaller(w), smaller(h)), PipelineSettings { width: Some(smaller(w)), height: Some(smaller(h)), ..base.clone() }));
    }
    if spec.family == Family::Wan {
        let f = base.frames.unwrap_or(df);
        let half = (f.saturating_sub(1) / 4 / 2) * 4 + 1;
        if half < f {
            tries.push((format!("{half} frames"), PipelineSettings { frames: Some(half), ..base.clone() }));
        }
    }
    let mut out = Vec::new();
    for (name, s) in tries {
        let e = spec.estimate(&s)?;
        out.push(PipelineWhatIf {
            name,
            peak_bytes: e.peak_bytes,
            peak_stage: e.peak_stage.clone(),
            total_bytes: device_total(&e),
            cpu_ram_bytes: e.cpu_ram_bytes,
            delta_bytes: (e.peak_bytes as i128 - e0.peak_bytes as i128).clamp(i64::MIN as i128, i64::MAX as i128) as i64,
            settings: s,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(id: &str) -> PipelineSpec {
        PipelineSpec::preset(id).unwrap()
    }

    #[test]
    fn the_largest_value_fits_and_one_step_more_does_not() {
        let gb = 1_000_000_000u64;
        for (id, knob, base) in [
            ("sd-1.5", Knob::Resolution, PipelineSettings::default()),
            ("flux.1-dev", Knob::Batch, PipelineSettings { offload: Offload::Model, component_dtypes: vec![("transformer".into(), WeightDType::Fp8)], ..Default::default() }),
            ("wan2.1-t2v-1.3b", Knob::Frames, PipelineSettings { offload: Offload::Model, ..Default::default() }),
            ("sdxl", Knob::Width, PipelineSettings::default()),
        ] {
            let s = spec(id);
            let l = largest(&s, &base, knob, 24 * gb).unwrap().unwrap_or_else(|| panic!("{id}: nothing fits"));
            assert!(l.total_bytes <= 24 * gb, "{id}");
            assert!(!l.at_limit, "{id} {knob:?}: {}", l.value);
            // the next step does not fit
            let k = match knob {
                Knob::Frames => (l.value - 1) / 4 + 1,
                Knob::Batch => l.value,
                _ => l.value / pixel_step(s.family),
            };
            let (next, _) = at(&s, &base, knob, k + 1);
            assert!(device_total(&s.estimate(&next).unwrap()) > 24 * gb, "{id} {knob:?} {}", l.value);
        }
    }

    #[test]
    fn nothing_fits_a_tiny_card_and_frames_need_a_video_pipeline() {
        assert!(largest(&spec("flux.1-dev"), &PipelineSettings::default(), Knob::Width, 1_000_000_000).unwrap().is_none());
        let err = largest(&spec("sdxl"), &PipelineSettings::default(), Knob::Frames, 1 << 40).unwrap_err();
        assert!(err.to_string().contains("frames"), "{err}");
    }

    #[test]
    fn what_ifs_lower_the_peak_where_they_should() {
        let s = spec("flux.1-dev");
        let w = what_ifs(&s, &PipelineSettings::default()).unwrap();
        let get = |n: &str| w.iter().find(|x| x.name == n).unwrap_or_else(|| panic!("no {n}"));
        for n in ["offload model", "offload group", "offload sequential", "fp8 denoiser", "nf4 denoiser", "fp8 denoiser and T5"] {
            assert!(get(n).delta_bytes < 0, "{n}: {}", get(n).delta_bytes);
        }
        assert!(get("offload sequential").peak_bytes < get("offload model").peak_bytes);
        assert!(get("offload model").cpu_ram_bytes > 0);
        assert!(w.iter().any(|x| x.name.contains("3/4")));
        // a batch of one is not sliced; an image has no frames
        assert!(!w.iter().any(|x| x.name == "VAE slicing" || x.name.ends_with("frames")));
        let v = what_ifs(&spec("wan2.1-t2v-1.3b"), &PipelineSettings { batch: 2, ..Default::default() }).unwrap();
        assert!(v.iter().any(|x| x.name == "41 frames" && x.delta_bytes < 0));
        assert!(v.iter().any(|x| x.name == "VAE slicing"));
    }
}
