//! What-ifs of a denoiser's LoRA step (`estimate --mode train --what-if`): each change alone,
//! re-simulated with `train::lora_step` — gradient checkpointing on or off, 8-bit Adam, half or
//! twice the rank, 3/4 of each side, batch 1 — and, given the weights of the pipeline's other
//! components, training on uncached latents and text embeddings (the VAE and text encoders then
//! stay loaded, frozen, beside the step: diffusers' scripts without `--cache_latents` and with
//! the text encoders on the GPU; their no-grad encode passes run before the step and are not
//! its peak). Modelled, not measured.

use super::component::{Component, ComponentKind, Pass};
use super::offload::Offload;
use super::pipeline::{PipelineSettings, PipelineSpec};
use super::train::{lora_step, TrainStep};
use crate::config::{Device, OptimizerKind, Precision};
use crate::error::Result;
use crate::finetune::FineTune;
use serde::Serialize;

/// A LoRA step's setup.
#[derive(Debug, Clone, PartialEq)]
pub struct LoraSetup {
    pub pass: Pass,
    pub precision: Precision,
    pub device: Device,
    pub batch: u64,
    pub finetune: FineTune,
    pub checkpointing: bool,
    pub optimizer: OptimizerKind,
}

impl LoraSetup {
    pub fn step(&self, c: &Component) -> Result<TrainStep> {
        lora_step(c, self.pass, self.precision, self.device, self.batch, self.finetune, self.checkpointing, self.optimizer)
    }
}

/// One change and its step's peak.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TrainWhatIf {
    pub name: String,
    pub peak_bytes: u64,
    /// Against the setup's own peak (negative: less memory).
    pub delta_bytes: i64,
    /// The changed setup (`None`: the uncached what-if, which changes the pipeline around the step).
    #[serde(skip)]
    pub setup: Option<LoraSetup>,
}

/// Each change alone on `s`; `other_weights`: the bytes of the VAE and text encoders, when the
/// pipeline is known (the uncached what-if).
pub fn what_ifs(c: &Component, s: &LoraSetup, other_weights: Option<u64>) -> Result<Vec<TrainWhatIf>> {
    let base = s.step(c)?.peak;
    let mut tries: Vec<(String, LoraSetup)> = Vec::new();
    let with = |f: &dyn Fn(&mut LoraSetup)| {
        let mut t = s.clone();
        f(&mut t);
        t
    };
    let ck = if s.checkpointing { "no gradient checkpointing" } else { "gradient checkpointing" };
    tries.push((ck.into(), with(&|t| t.checkpointing = !t.checkpointing)));
    if s.optimizer != OptimizerKind::Adam8bit {
        tries.push(("8-bit Adam".into(), with(&|t| t.optimizer = OptimizerKind::Adam8bit)));
    }
    let r = s.finetune.lora_r;
    if r >= 2 {
        tries.push((format!("rank {}", r / 2), with(&|t| t.finetune.lora_r = r / 2)));
    }
    tries.push((format!("rank {}", r.saturating_mul(2)), with(&|t| t.finetune.lora_r = r.saturating_mul(2))));
    if let Pass::Denoise { width, height, frames, text_len } = s.pass {
        let smaller = |x: u64| ((x * 3 / 4) / 16).max(1) * 16;
        if (smaller(width), smaller(height)) != (width, height) {
            let pass = Pass::Denoise { width: smaller(width), height: smaller(height), frames, text_len };
            tries.push((format!("{}×{} (3/4 the sides)", smaller(width), smaller(height)), with(&|t| t.pass = pass)));
        }
    }
    if s.batch > 1 {
        tries.push(("batch 1".into(), with(&|t| t.batch = 1)));
    }
    let mut out = Vec::new();
    for (name, t) in tries {
        let peak = t.step(c)?.peak;
        out.push(TrainWhatIf { name, peak_bytes: peak, delta_bytes: delta(peak, base), setup: Some(t) });
    }
    if let Some(w) = other_weights {
        let peak = base.saturating_add(w);
        out.push(TrainWhatIf { name: "uncached latents and text embeddings".into(), peak_bytes: peak, delta_bytes: delta(peak, base), setup: None });
    }
    Ok(out)
}

/// The weights of the pipeline's VAE and text encoders at `s`'s dtypes: what training on
/// uncached latents and text embeddings keeps loaded, frozen, beside the step.
pub fn frozen_weights(spec: &PipelineSpec, s: &PipelineSettings) -> Result<u64> {
    let e = spec.estimate(&PipelineSettings { offload: Offload::None, ..s.clone() })?;
    let frozen = |name: &str| spec.components.iter().any(|(n, k)| n == name && k.kind() != ComponentKind::Denoiser);
    Ok(e.components.iter().filter(|x| frozen(&x.name)).map(|x| x.weight_bytes).sum())
}

fn delta(a: u64, b: u64) -> i64 {
    (a as i128 - b as i128).clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::finetune::{Method, NameList};

    #[test]
    fn checkpointing_smaller_sizes_and_8bit_adam_lower_the_step() {
        let spec = PipelineSpec::preset("sd-1.5").unwrap();
        let unet = &spec.components.iter().find(|c| c.0 == "unet").unwrap().1;
        let ft = FineTune { method: Method::Lora, lora_r: 16, lora_targets: NameList::parse("to_q,to_k,to_v,to_out.0").unwrap(), ..FineTune::default() };
        let s = LoraSetup {
            pass: Pass::Denoise { width: 512, height: 512, frames: 1, text_len: 77 },
            precision: Precision::Bf16,
            device: Device::Cuda,
            batch: 2,
            finetune: ft,
            checkpointing: false,
            optimizer: OptimizerKind::Adamw,
        };
        let w = what_ifs(unet, &s, Some(1_000_000)).unwrap();
        let get = |n: &str| w.iter().find(|x| x.name == n).unwrap_or_else(|| panic!("no {n}: {w:?}"));
        for n in ["gradient checkpointing", "8-bit Adam", "rank 8", "384×384 (3/4 the sides)", "batch 1"] {
            assert!(get(n).delta_bytes < 0, "{n}: {}", get(n).delta_bytes);
        }
        assert!(get("rank 32").delta_bytes > 0);
        assert_eq!(get("uncached latents and text embeddings").delta_bytes, 1_000_000);
    }
}
