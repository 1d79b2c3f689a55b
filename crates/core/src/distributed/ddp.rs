//! DDP (`torch.nn.parallel.DistributedDataParallel`), rank 0.
//!
//! `torch/nn/parallel/distributed.py` (`DistributedDataParallel._ddp_init_helper`) assigns
//! parameters, in reverse order of `model.parameters()`, to buckets with
//! `dist._compute_bucket_assignment_by_size(params, [_DEFAULT_FIRST_BUCKET_BYTES (1 MiB),
//! bucket_cap_mb (25) MiB])`; `torch/csrc/distributed/c10d/reducer.cpp`
//! (`Reducer::initialize_buckets`) allocates each bucket's flat `gradients` tensor (`at::empty`
//! of the bucket's total numel, the parameters' dtype) once, at construction: they live for the
//! whole job, one gradient's worth in all. Without `gradient_as_bucket_view`, `.grad` tensors are
//! separate and copied into the buckets (`copy_grad_to_bucket`) before the all-reduce; with it,
//! `mark_variable_ready_dense` copies a fresh `.grad` into its bucket view and points `.grad` at
//! the view, so gradients take no memory beyond the buckets. The all-reduce (`allreduce_hook`)
//! works in place. Measured: `shared/reference/llm/README.md` section C (world size 2).

use super::layout::Layout;
use super::setup::{DistBreakdown, ModelStates, Rank};
use crate::config::{Mode, TrainConfig};
use crate::memory::simulate::Phase;
use crate::memory::breakdown::Breakdown;
use crate::memory::{OptimizerCost, Overlay};

/// `dist._DEFAULT_FIRST_BUCKET_BYTES`.
pub const FIRST_BUCKET_BYTES: u64 = 1 << 20;
/// `bucket_cap_mb = 25` (MiB): DDP's default.
pub const BUCKET_CAP_BYTES: u64 = 25 << 20;

pub struct Ddp {
    layout: Layout,
    view: bool,
    accumulating: bool,
    buckets: Vec<u64>,
    opt: OptimizerCost,
}

impl Ddp {
    /// `distributed.py` (`_build_params_for_reducer`) hands the reducer only the parameters
    /// with `requires_grad`: a frozen base gets no bucket, no `.grad` and no optimizer state.
    pub fn new(layout: Layout, config: TrainConfig, view: bool, accumulating: bool) -> Ddp {
        let sizes: Vec<u64> = layout.trainable().rev().map(|p| p.grad_bytes()).collect();
        let buckets = if config.mode == Mode::Train { bucket_sizes(&sizes) } else { Vec::new() };
        let opt = layout.optimizer_cost(&config, |p| p.shape.clone(), |p| p.elem);
        Ddp { layout, view, accumulating, buckets, opt }
    }

    fn total(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// `.grad` bytes the simulation holds at a sample (they are bucket views with `view`).
    fn grads_held(&self, phase: Phase, op: Option<u32>) -> u64 {
        let done = |first: u32| match (phase, op) {
            _ if self.accumulating => true,
            (Phase::Optimizer, _) | (_, None) => true,
            (Phase::Backward, Some(i)) => first > i,
            (Phase::Forward, _) => false,
        };
        self.layout.trainable().filter(|p| done(p.first_use)).map(|p| p.grad_bytes()).fold(0, u64::saturating_add)
    }
}

/// Bucket sizes in bytes, `reducer.cpp`'s `compute_bucket_assignment_by_size` for one dtype: a
/// bucket closes once it reaches the current limit; the limits are the first bucket's, then the cap.
pub fn bucket_sizes(param_bytes_in_bucket_order: &[u64]) -> Vec<u64> {
    let limits = [FIRST_BUCKET_BYTES, BUCKET_CAP_BYTES];
    let mut out = Vec::new();
    let mut cur = 0u64;
    for &b in param_bytes_in_bucket_order {
        cur = cur.saturating_add(b);
        if cur >= limits[out.len().min(1)] {
            out.push(cur);
            cur = 0;
        }
    }
    if cur > 0 {
        out.push(cur);
    }
    out
}

impl Overlay for Ddp {
    fn at(&self, phase: Phase, op: Option<u32>) -> (Breakdown, Breakdown) {
        let add = Breakdown { gradients: self.total(), ..Breakdown::default() };
        let sub = Breakdown { gradients: if self.view { self.grads_held(phase, op) } else { 0 }, ..Breakdown::default() };
        (add, sub)
    }
}

impl Rank for Ddp {
    fn optimizer(&self) -> OptimizerCost {
        self.opt
    }

    fn model_states(&self) -> ModelStates {
        let p = self.layout.bytes();
        let grads = if self.view { self.total() } else { self.total().saturating_add(self.layout.trainable_bytes()) };
        ModelStates { parameters: p, gradients: grads, optimizer: self.opt.state, host: 0 }
    }

    fn detail(&self, _: Phase, _: Option<u32>) -> DistBreakdown {
        DistBreakdown { unsharded_parameters: self.layout.bytes(), gradient_buckets: self.total(), ..DistBreakdown::default() }
    }

    fn host_bytes(&self) -> u64 {
        0
    }

    fn basis(&self) -> &'static str {
        "DDP: single-GPU step measured (reference records); reducer buckets modelled from torch/nn/parallel/distributed.py and c10d/reducer.cpp (25 MiB, first 1 MiB)"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_bucket_closes_at_one_mib_the_rest_at_25() {
        let mib = 1u64 << 20;
        let b = bucket_sizes(&[mib / 2, mib / 2, 10 * mib, 10 * mib, 10 * mib, 3 * mib]);
        assert_eq!(b, vec![mib, 30 * mib, 3 * mib]);
        assert_eq!(b.iter().sum::<u64>(), 34 * mib);
    }
}
