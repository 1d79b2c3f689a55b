//! What an estimate reports; every view formats it.

use super::device::DeviceTotal;
use super::breakdown::Breakdown;
use super::simulate::{Phase, TimelinePoint};
use crate::config::TrainConfig;
use crate::resolve::{LayerInfo, Resolved};
use serde::{Deserialize, Serialize};

/// One row of the per-layer table, with the bytes it saves for backward.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LayerReport {
    #[serde(flatten)]
    pub info: LayerInfo,
    /// Bytes this layer's ops keep for backward at the estimate's (micro-)batch.
    pub saved_bytes: u64,
}

/// Everything the views show. Views format it; they never compute memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    pub config: TrainConfig,
    /// All parameters (`sum(p.numel() for p in model.parameters())`, adapters included).
    pub params: u64,
    /// Parameters that train (`requires_grad=True`), as peft's `print_trainable_parameters`
    /// counts them; all of them without fine-tuning.
    #[serde(default)]
    pub trainable_params: u64,
    /// The bitsandbytes format of a quantised base: its figures are modelled from the
    /// bitsandbytes source, not measured (`layer/bnb.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quantised_base: Option<crate::finetune::BaseFormat>,
    pub param_bytes: u64,
    pub buffer_bytes: u64,
    pub optimizer_state_bytes: u64,
    /// Peak allocated bytes of the step (`torch.cuda.max_memory_allocated`).
    pub peak_bytes: u64,
    pub peak_phase: Phase,
    /// Human label of where the peak happens: `layers[3] (conv2d): convolution, backward`.
    pub peak_at: String,
    pub breakdown: Breakdown,
    /// Peaks of each phase `[forward, backward, optimizer]`.
    pub phase_peaks: [u64; 3],
    /// Approximate device total (`nvidia-smi`), with its parts.
    pub device: DeviceTotal,
    pub device_total_bytes: u64,
    /// `params × n + batch × outputs × 2 + input` (n = 2 SGD, 3 momentum, 4 Adam): the classic rule.
    pub rule_of_thumb_bytes: u64,
    pub layers: Vec<LayerReport>,
    /// Memory after each op, forward then backward then the optimizer step (≤ 600 points).
    pub timeline: Vec<TimelinePoint>,
    /// `--mode generate`: prefill and decode peaks, the KV cache, memory over the decode steps.
    #[serde(default, skip_serializing_if = "Option::is_none", flatten)]
    pub generation: Option<super::generate::GenerationReport>,
}

/// The per-layer table: each layer's saved bytes (`saved_by_op`, indexed by op); a block reports
/// its whole body.
pub(crate) fn layer_reports(resolved: &Resolved, saved_by_op: &[u64]) -> Vec<LayerReport> {
    let g = &resolved.graph;
    let infos = &resolved.layers;
    let mut saved = vec![0u64; infos.len()];
    for (i, op) in g.ops.iter().enumerate() {
        saved[op.layer as usize] = saved[op.layer as usize].saturating_add(saved_by_op[i]);
    }
    // blocks report their whole body
    let mut total = saved.clone();
    for i in (0..infos.len()).rev() {
        if infos[i].block {
            let mut j = i + 1;
            while j < infos.len() && infos[j].depth > infos[i].depth {
                if infos[j].depth == infos[i].depth + 1 {
                    total[i] = total[i].saturating_add(total[j]);
                }
                j += 1;
            }
        }
    }
    infos.iter().cloned().zip(total).map(|(info, saved_bytes)| LayerReport { info, saved_bytes }).collect()
}
