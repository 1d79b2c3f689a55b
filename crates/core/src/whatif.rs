//! What-ifs: the usual memory tricks, each applied to a setup, with the peak it gives. The web
//! app's panel and `vramcalc estimate --what-if` show the same list.

#[path = "whatif_finetune.rs"]
pub mod finetune;
#[path = "whatif_job.rs"]
pub mod job;

use crate::config::{Mode, OptimizerKind, Precision, TrainConfig};
use crate::error::Result;
use crate::memory::Prepared;
use crate::spec::{Layer, ModelSpec};
use serde::Serialize;

/// One memory trick.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Trick {
    HalveBatch,
    Amp,
    Checkpointing,
    InplaceRelu,
    #[serde(rename = "grad-accum")]
    GradAccum4,
    Sgd,
    ShorterSeq,
}

impl Trick {
    pub const ALL: [Trick; 7] =
        [Trick::HalveBatch, Trick::Amp, Trick::Checkpointing, Trick::InplaceRelu, Trick::GradAccum4, Trick::Sgd, Trick::ShorterSeq];

    /// A stable id (JSON, test ids).
    pub fn id(self) -> &'static str {
        match self {
            Trick::HalveBatch => "halve-batch",
            Trick::Amp => "amp",
            Trick::Checkpointing => "checkpointing",
            Trick::InplaceRelu => "inplace-relu",
            Trick::GradAccum4 => "grad-accum",
            Trick::Sgd => "sgd",
            Trick::ShorterSeq => "shorter-seq",
        }
    }

    /// What the trick does, in English (the CLI; the app translates).
    pub fn describe(self) -> &'static str {
        match self {
            Trick::HalveBatch => "halve the batch",
            Trick::Amp => "mixed precision (AMP bf16)",
            Trick::Checkpointing => "activation checkpointing",
            Trick::InplaceRelu => "in-place ReLU",
            Trick::GradAccum4 => "4× gradient accumulation, same effective batch",
            Trick::Sgd => "SGD with momentum instead",
            Trick::ShorterSeq => "halve the sequence length",
        }
    }
}

/// A trick applied to a setup, and the peak it gives.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WhatIf {
    pub trick: Trick,
    pub config: TrainConfig,
    /// Peak allocated bytes with the trick.
    pub peak: u64,
    pub device_total: u64,
}

/// The setup with `trick` applied, or `None` where it does not apply (already on, batch 1, …).
pub fn apply(trick: Trick, spec: &ModelSpec, c: &TrainConfig) -> Option<TrainConfig> {
    let train = c.mode == Mode::Train;
    let mut n = *c;
    match trick {
        Trick::HalveBatch => {
            if c.batch < 2 {
                return None;
            }
            n.batch = c.batch / 2;
            n.grad_accum = c.grad_accum.min(n.batch).max(1);
        }
        Trick::Amp => {
            // generation runs on the weights' dtype (`whatif_gen` has its own tricks)
            if c.precision != Precision::Fp32 || c.mode == Mode::Generate {
                return None;
            }
            // bf16 autocast: what LLM training uses on Ampere and newer (no GradScaler needed)
            n.precision = Precision::AmpBf16;
        }
        Trick::Checkpointing => {
            if c.checkpointing || !train {
                return None;
            }
            n.checkpointing = true;
        }
        Trick::InplaceRelu => {
            let has_relu = spec.layers.iter().any(|l| l.any(&|l| matches!(l, Layer::Relu(_))));
            if c.inplace_relu == Some(true) || !has_relu {
                return None;
            }
            n.inplace_relu = Some(true);
        }
        Trick::GradAccum4 => {
            // offered once: the batch stays the effective batch, the micro-batch shrinks
            if !train || c.grad_accum > 1 || c.batch < 4 {
                return None;
            }
            n.grad_accum = c.grad_accum * 4;
        }
        Trick::Sgd => {
            if !train || matches!(c.optimizer, OptimizerKind::Sgd | OptimizerKind::SgdMomentum) {
                return None;
            }
            n.optimizer = OptimizerKind::SgdMomentum;
        }
        Trick::ShorterSeq => {
            if c.mode == Mode::Generate {
                return None;
            }
            let s = spec.seq_len(c.seq_len)?;
            if s < 2 {
                return None;
            }
            n.seq_len = Some(s / 2);
        }
    }
    Some(n)
}

/// Every applicable trick with its result; tricks whose setup the core rejects are left out.
/// An error when the setup itself is rejected.
pub fn what_ifs(spec: &ModelSpec, config: &TrainConfig) -> Result<Vec<WhatIf>> {
    Prepared::new(spec, config)?;
    Ok(what_ifs_with(spec, config, |cfg| Some(Prepared::new(spec, cfg).ok()?.peak_at(cfg.batch))))
}

/// [`what_ifs`] with `peak` giving a setup's peak and device total (`None`: rejected), so a
/// caller can reuse models it has resolved (the web app's cache). A trick that lowers neither
/// the peak nor the device total (checkpointing a model without blocks) is left out.
pub fn what_ifs_with(
    spec: &ModelSpec,
    config: &TrainConfig,
    mut peak: impl FnMut(&TrainConfig) -> Option<(u64, u64)>,
) -> Vec<WhatIf> {
    let Some((base_peak, base_total)) = peak(config) else { return Vec::new() };
    Trick::ALL
        .iter()
        .filter_map(|&trick| {
            let cfg = apply(trick, spec, config)?;
            let (peak, device_total) = peak(&cfg)?;
            (peak < base_peak || device_total < base_total).then_some(WhatIf { trick, config: cfg, peak, device_total })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_ifs_save_memory() {
        use crate::presets;
        let spec = presets::build("bert-base").unwrap();
        let cfg = TrainConfig::default();
        let base = crate::estimate(&spec, &cfg).unwrap().peak_bytes;
        let w = what_ifs(&spec, &cfg).unwrap();
        let ids: Vec<_> = w.iter().map(|w| w.trick).collect();
        assert!(ids.contains(&Trick::ShorterSeq) && ids.contains(&Trick::Amp) && !ids.contains(&Trick::InplaceRelu));
        for t in &w {
            if matches!(t.trick, Trick::HalveBatch | Trick::ShorterSeq | Trick::GradAccum4) {
                assert!(t.peak < base, "{:?}", t.trick);
            }
        }
        let cnn = presets::build("resnet18").unwrap();
        let w = what_ifs(&cnn, &cfg).unwrap();
        // torchvision's ResNet runs its ReLUs in place already: the trick applies, saves nothing,
        // and so is not offered
        assert!(w.iter().all(|w| w.trick != Trick::ShorterSeq && w.trick != Trick::InplaceRelu));
        assert!(apply(Trick::InplaceRelu, &cnn, &cfg).is_some());
        let base = crate::estimate(&cnn, &cfg).unwrap();
        assert!(w.iter().all(|w| w.peak < base.peak_bytes || w.device_total < base.device_total_bytes));
        let mut broken = cnn.clone();
        broken.input.shape = vec![7];
        assert!(what_ifs(&broken, &cfg).is_err());
    }

    #[test]
    fn trick_ids_are_their_json() {
        for t in Trick::ALL {
            assert_eq!(serde_json::to_value(t).unwrap(), t.id());
        }
    }
}
