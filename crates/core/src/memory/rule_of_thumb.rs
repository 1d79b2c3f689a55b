//! The classic rule of thumb, shown beside the estimate for comparison and labelled as such:
//! `params × n + batch × outputs × activation size × 2 + input` (n = 2 SGD, 3 momentum, 4 Adam).
//! The estimate itself never uses it.

use crate::config::{Mode, OptimizerKind, Precision, TrainConfig};
use crate::resolve::Resolved;

/// The rule's `n`: copies of the parameters (weights, gradients, optimizer state); 1 in inference.
pub fn param_copies(cfg: &TrainConfig) -> u64 {
    match cfg.mode {
        Mode::Infer | Mode::Generate => 1,
        Mode::Train => match cfg.optimizer {
            OptimizerKind::Sgd => 2,
            OptimizerKind::SgdMomentum | OptimizerKind::Adagrad | OptimizerKind::Rmsprop => 3,
            _ => 4,
        },
    }
}

/// The rule's bytes for `resolved` under `cfg`.
pub(crate) fn bytes(resolved: &Resolved, cfg: &TrainConfig) -> u64 {
    let param_bytes = resolved.graph.param_bytes();
    let copies = param_copies(cfg);
    let act_size = match cfg.precision {
        Precision::Fp32 => 4,
        _ => 2,
    };
    let outputs: u64 = resolved.layers.iter().filter(|l| !l.block).map(|l| l.activation_values).fold(0, u64::saturating_add);
    let micro = cfg.micro_batch();
    let input = resolved.input_shape.numel().saturating_mul(micro).saturating_mul(4);
    let acts = micro.saturating_mul(outputs).saturating_mul(act_size).saturating_mul(if cfg.mode == Mode::Train { 2 } else { 1 });
    param_bytes.saturating_mul(copies).saturating_add(acts).saturating_add(input)
}
