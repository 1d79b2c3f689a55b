//! Where a step's peak is, without the rest of an estimate: what the solver's answer names just
//! above the largest value that fits (`solve::Limit`), from the simulations the search already
//! runs to measure the totals, instead of a second full estimate (its timeline, per-layer table
//! and, for a generation, the decode series with one more forward built).
//!
//! The figures are the estimate's: [`Prepared::estimate`]'s `peak_bytes`, `device_total_bytes`,
//! `peak_phase`, `peak_at` and `breakdown` come from the same simulations (a timeline changes
//! none of them: `simulate.rs` only records it), and `peak_at` is formatted by the same function.

use super::breakdown::Breakdown;
use super::device::DeviceTotal;
use super::simulate::{Overlay, OptimizerCost, Phase, StepResult};
use super::Prepared;
use crate::config::TrainConfig;
use crate::error::{Error, Result};
use crate::spec::ModelSpec;

/// The peak of one step and where it is.
#[derive(Debug, Clone, PartialEq)]
pub struct PeakSummary {
    pub peak_bytes: u64,
    pub device_total_bytes: u64,
    pub peak_phase: Phase,
    /// The estimate's `peak_at`.
    pub peak_at: String,
    /// The estimate's breakdown at the peak.
    pub breakdown: Breakdown,
}

impl Prepared {
    /// [`Prepared::peak_once`] with where the peak is: one simulation at the batch (two for a
    /// generation: the prefill and the last decode step), no batch envelope.
    pub fn measure(spec: &ModelSpec, config: &TrainConfig) -> Result<PeakSummary> {
        let p = Prepared::unchecked(spec, config, 1)?;
        let s = p.summary_direct(config.batch);
        if s.device_total_bytes == u64::MAX {
            return Err(Error::TooLarge(format!("at batch {} the step needs more than 2^64 bytes (18.4 EB)", config.batch)));
        }
        Ok(s)
    }

    /// The peak at `batch`, its device total by direct simulation ([`Prepared::measure`]).
    fn summary_direct(&self, batch: u64) -> PeakSummary {
        if let Some(one) = self.at_batch(batch) {
            return one.summary_direct(batch);
        }
        let micro = self.micro(batch);
        #[cfg(feature = "candle")]
        if self.candle.is_some() {
            let (_, device) = self.device_at(batch);
            return self.summarize(self.step(batch, false), None, device);
        }
        if let Some(gen) = &self.generation {
            let (r, last) = gen.simulate(&self.resolved.graph, &self.plan, micro);
            let (_, device) = gen.device_of(&r, last.as_ref(), micro);
            return self.summarize(r, last, device);
        }
        // the rounding of the tensors live at the last sample of the peak (the envelope keeps
        // the last of equal lines), counted as the simulation goes: `envelope::device_total` of
        // that sample's snapshot, in one simulation instead of two
        let r = self.plan.simulate(&self.resolved.graph, micro, self.opt, false, None);
        let device = DeviceTotal::new(r.peak_rounded.0, r.peak_rounded.1);
        self.summarize(r, None, device)
    }

    /// The peak at `batch` of a prepared model, the device total from its envelope as the
    /// estimate and [`Prepared::peak_at`] take it (the batch unchecked: see
    /// [`Prepared::check_batch`]).
    pub fn summary_at(&self, batch: u64) -> PeakSummary {
        if let Some(one) = self.at_batch(batch) {
            return one.summary_at(batch);
        }
        let (_, device) = self.device_at(batch);
        if let Some(gen) = &self.generation {
            let (r, last) = gen.simulate(&self.resolved.graph, &self.plan, self.micro(batch));
            return self.summarize(r, last, device);
        }
        self.summarize(self.step(batch, false), None, device)
    }

    /// [`Prepared::summary_at`] under a rank's `overlay`, simulated as
    /// [`Prepared::estimate_overlaid`] and [`Prepared::peak_overlaid`] simulate it.
    pub fn summary_overlaid(&self, batch: u64, opt: OptimizerCost, overlay: &dyn Overlay) -> PeakSummary {
        let r = self.plan.simulate_overlaid(&self.resolved.graph, self.micro(batch), opt, false, overlay);
        let device = self.device_like(batch, r.peak);
        self.summarize(r, None, device)
    }

    /// The summary of the prefill's (or the step's) simulation `r` and a generation's last
    /// decode step `decode`, the peak in whichever is higher (as [`Prepared::estimate`] takes it).
    fn summarize(&self, r: StepResult, decode: Option<StepResult>, device: DeviceTotal) -> PeakSummary {
        let (r, peak_at) = self.peak_place(r, decode, &self.config);
        let mut breakdown = r.breakdown;
        let g = &self.resolved.graph;
        breakdown.frozen_parameters = g.frozen_param_bytes();
        breakdown.adapter_parameters = g.adapter_bytes();
        PeakSummary { peak_bytes: r.peak, device_total_bytes: device.total, peak_phase: r.peak_phase, peak_at, breakdown }
    }

    /// The simulation holding the peak (a generation's last decode step when its peak is higher
    /// than the prefill's) and the estimate's label of where it is.
    pub(super) fn peak_place(&self, r: StepResult, decode: Option<StepResult>, cfg: &TrainConfig) -> (StepResult, String) {
        let (mut r, mut prefix, mut at) = (r, "", &self.resolved);
        if let Some(gen) = &self.generation {
            prefix = "prefill: ";
            if let (Some(d), Some(last)) = (decode.filter(|d| d.peak > r.peak), &gen.last) {
                r = d;
                (prefix, at) = ("last decode step: ", &last.resolved);
            }
        }
        let label = match r.peak_op {
            Some(i) => {
                let op = &at.graph.ops[i as usize];
                let l = &at.layers[op.layer as usize];
                format!("{prefix}{} ({}): {}, {}", l.path, l.kind, op.name, r.peak_phase.name())
            }
            None => format!("optimizer step ({})", cfg.optimizer),
        };
        (r, label)
    }
}
