//! The result of one simulated candle step: what the ledger (`ledger.rs`) records and the
//! tracer (`tensor.rs`) hands back, below both and `candle/mod.rs`.

use crate::memory::breakdown::Breakdown;
use crate::memory::simulate::{Phase, StepResult, TimelinePoint};

/// The result of one simulated candle step.
#[derive(Debug, Clone, Default)]
pub struct CandleStep {
    pub peak: u64,
    pub peak_phase: Option<Phase>,
    /// Row of the per-layer table active at the peak (`u32::MAX`: loss or optimizer).
    pub peak_layer: u32,
    pub breakdown: Breakdown,
    pub phase_peaks: [u64; 3],
    pub peak_rounded512: u64,
    pub peak_reserved: u64,
    pub timeline: Vec<TimelinePoint>,
}

impl CandleStep {
    /// As the PyTorch simulation's result, with `peak_op` found by the caller.
    pub fn into_step_result(self, peak_op: Option<u32>, n_ops: usize) -> StepResult {
        StepResult {
            peak: self.peak,
            peak_phase: self.peak_phase.unwrap_or(Phase::Forward),
            peak_op,
            breakdown: self.breakdown,
            phase_peaks: self.phase_peaks,
            snapshot: Vec::new(),
            snapshot_storages: Vec::new(),
            timeline: self.timeline,
            saved_by_op: vec![0; n_ops],
            max_rounded: (self.peak_rounded512, self.peak_reserved),
            peak_rounded: (self.peak_rounded512, self.peak_reserved),
            overlay_clamped: false,
        }
    }
}
