//! The step's phases and its samples of memory: the vocabulary the simulation, its timeline
//! and the distributed overlays share.

use serde::{Deserialize, Serialize};

/// Where in the step something happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    Forward,
    Backward,
    Optimizer,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Forward => "forward",
            Phase::Backward => "backward",
            Phase::Optimizer => "optimizer",
        }
    }
}

/// One sample of memory over the step (after an op's allocations).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimelinePoint {
    pub phase: Phase,
    /// Row of the per-layer table whose op this is (`u32::MAX` for the optimizer step).
    pub layer: u32,
    /// Index of the op in the graph (`u32::MAX` for the optimizer step).
    pub op: u32,
    pub bytes: u64,
}
