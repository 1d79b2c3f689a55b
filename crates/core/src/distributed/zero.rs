//! DeepSpeed ZeRO stages 1–3 with optional CPU offload, rank 0.
//!
//! Read from DeepSpeed (`deepspeed/runtime/zero/`):
//! - `stage_1_and_2.py` (`DeepSpeedZeroOptimizer.__init__`, `step`, `reduce_ipg_grads`): half
//!   parameters stay whole; each rank keeps an fp32 master copy of its flat partition
//!   (`single_partition_of_fp32_groups`, only when the model is fp16/bf16) and the optimizer
//!   state on it; `step` gives the partition an fp32 gradient. Stage 1 keeps whole half `.grad`s
//!   until after backward; stage 2 reduces them in `reduce_bucket_size` (5e8 elements) buckets as
//!   backward produces them, keeping only this rank's partition (`grads_in_partition`).
//! - `stage3.py` and `partitioned_param_coordinator.py`: parameters are partitioned too
//!   (`ds_tensor`); a module's parameters are gathered before it runs and released after it,
//!   except parameters under `stage3_param_persistence_threshold` (1e5 elements, kept whole)
//!   and those reused within `stage3_max_reuse_distance` (1e9 elements); the coordinator
//!   prefetches up to `stage3_prefetch_bucket_size` (5e7) elements ahead, and at most
//!   `stage3_max_live_parameters` (1e9) are live. The gradient partitions are one flat buffer
//!   allocated at start (`grad_partitions_flat_buffer`).
//! - After the step, the updated partitions are cast to half and all-gathered in
//!   `allgather_bucket_size` (5e8) chunks straight into the flat half parameter groups
//!   (`all_gather_dp_groups`): no buffer beyond the parameters themselves.
//! - `offload_optimizer`: master weights, optimizer state and fp32 gradient partitions live in
//!   host memory (CPU Adam); `offload_param` (stage 3) also the parameter partitions.
//!
//! Gathering here is per unit (a transformer layer) and per root op (embedding, head), where
//! DeepSpeed gathers per module; within a layer that is the same parameters, at most one
//! layer earlier. Not measured on this machine (DeepSpeed needs CUDA): modelled.

use super::layout::Layout;
use super::setup::{DistBreakdown, DistConfig, ModelStates, Offload, Rank, Strategy};
use crate::config::TrainConfig;
use crate::memory::optimizer;
use crate::memory::simulate::Phase;
use crate::memory::breakdown::Breakdown;
use crate::memory::{OptimizerCost, Overlay};
use crate::units::DType;

/// DeepSpeed's defaults (`deepspeed/runtime/zero/config.py`), in elements.
pub const REDUCE_BUCKET_SIZE: u64 = 500_000_000;
pub const PREFETCH_BUCKET_SIZE: u64 = 50_000_000;
pub const MAX_LIVE_PARAMETERS: u64 = 1_000_000_000;
pub const MAX_REUSE_DISTANCE: u64 = 1_000_000_000;
pub const PARAM_PERSISTENCE_THRESHOLD: u64 = 100_000;

pub struct Zero {
    layout: Layout,
    stage: u8,
    offload: Offload,
    accumulating: bool,
    /// Bytes per element of the trainable parameters (and their gradients).
    elem: u64,
    /// `ceil(Ψ_trainable / N)` elements: one rank's flat partition of what the optimizer holds
    /// (DeepSpeed flattens the optimizer's parameter groups: the trainable parameters).
    part: u64,
    /// Stage 3: one rank's partition of every parameter (frozen ones too), bytes as stored.
    param_part: u64,
    /// fp32 master copy of the partition (half models only).
    master: u64,
    state: OptimizerCost,
    /// Per unit: elements above the persistence threshold; whether kept gathered from its
    /// forward to its backward (reuse distance).
    unit_numel: Vec<u64>,
    /// Per unit: bytes as stored of those parameters.
    unit_bytes: Vec<u64>,
    kept: Vec<bool>,
    /// Whole parameters under the persistence threshold (stage 3), bytes.
    persistent: u64,
    /// The trainable parameters' first uses, ascending, and the gradient bytes of those from
    /// each on (a suffix sum, one entry more): the gradients promoted after an op in a binary
    /// search instead of a pass over every parameter at every sample.
    first_uses: Vec<u32>,
    grads_from: Vec<u64>,
    /// The root's parameters above the persistence threshold: `(first use, elements, bytes)`.
    roots: Vec<(u32, u64, u64)>,
}

#[derive(Default)]
struct State {
    gathered: u64,
    unreduced: u64,
    partition_grads: u64,
    reduced_base: u64,
}

impl Zero {
    pub fn new(layout: Layout, config: &TrainConfig, dist: &DistConfig, n: u64, accumulating: bool) -> Zero {
        let stage = match dist.strategy {
            Strategy::Zero1 => 1,
            Strategy::Zero2 => 2,
            _ => 3,
        };
        let elem = layout.trainable().next().map_or(4, |p| p.elem);
        let part = layout.trainable_numel().div_ceil(n.max(1));
        let master = if elem < 4 { part.saturating_mul(4) } else { 0 };
        let state = optimizer::cost(config.optimizer, config.optimizer_impl, &[&[part]], DType::F32);
        let k = layout.units.len();
        let mut unit_numel = vec![0u64; k];
        let mut unit_bytes = vec![0u64; k];
        let mut persistent = 0u64;
        for p in &layout.params {
            if stage == 3 && p.numel <= PARAM_PERSISTENCE_THRESHOLD {
                // kept whole on every rank (`ds_persist`), never gathered
                persistent = persistent.saturating_add(p.stored);
            } else if let Some(u) = p.unit {
                unit_numel[u] = unit_numel[u].saturating_add(p.numel);
                unit_bytes[u] = unit_bytes[u].saturating_add(p.stored);
            }
        }
        // persistent parameters stay whole (`ds_persist`): the rest is partitioned
        let param_part = layout.bytes().saturating_sub(persistent).div_ceil(n.max(1));
        let root: u64 = layout.of(None).map(|p| p.numel).sum();
        // reuse distance of a unit: what is fetched between its forward and its backward
        let mut kept = vec![false; k];
        let mut live = 0u64;
        for v in (0..k).rev() {
            let between: u64 = unit_numel[v + 1..].iter().sum::<u64>().saturating_mul(2).saturating_add(root);
            if between < MAX_REUSE_DISTANCE && live.saturating_add(unit_numel[v]) <= MAX_LIVE_PARAMETERS {
                kept[v] = true;
                live = live.saturating_add(unit_numel[v]);
            }
        }
        let mut uses: Vec<(u32, u64)> = layout.trainable().map(|p| (p.first_use, p.grad_bytes())).collect();
        uses.sort_unstable_by_key(|u| u.0);
        let mut grads_from = vec![0u64; uses.len() + 1];
        for k in (0..uses.len()).rev() {
            grads_from[k] = grads_from[k + 1].saturating_add(uses[k].1);
        }
        let first_uses = uses.iter().map(|u| u.0).collect();
        let roots = layout.of(None).filter(|p| p.numel > PARAM_PERSISTENCE_THRESHOLD).map(|p| (p.first_use, p.numel, p.stored)).collect();
        Zero {
            layout,
            stage,
            offload: dist.offload,
            accumulating,
            elem,
            part,
            param_part,
            master,
            state,
            unit_numel,
            unit_bytes,
            kept,
            persistent,
            first_uses,
            grads_from,
            roots,
        }
    }

    /// Gradient bytes of the trainable parameters first used after op `i` (`None`: all).
    fn promoted(&self, i: Option<u32>) -> u64 {
        let k = i.map_or(0, |i| self.first_uses.partition_point(|&u| u <= i));
        self.grads_from[k]
    }

    fn base_total(&self) -> u64 {
        self.layout.bytes()
    }

    /// Bytes gathered at a sample beyond the persistent parameters (stage 3): the root's
    /// parameters the op reads, the current unit, the units prefetched within
    /// `stage3_prefetch_bucket_size`, and the units kept from their forward to their backward.
    fn gathered(&self, phase: Phase, i: u32) -> u64 {
        let units = &self.layout.units;
        let cur = self.layout.unit_of_op(i);
        let root_params = || self.roots.iter().filter(|r| r.0 == i);
        let root: u64 = root_params().map(|r| r.1).sum();
        let root_bytes: u64 = root_params().map(|r| r.2).sum();
        let mut live = vec![false; units.len()];
        let forward = phase == Phase::Forward;
        let step = |u: usize| if forward { (u + 1 < units.len()).then_some(u + 1) } else { u.checked_sub(1) };
        let mut next = match cur {
            Some(u) => {
                live[u] = true;
                step(u)
            }
            None if forward && units.first().is_some_and(|&(f, _)| i < f) => Some(0),
            None if !forward && units.last().is_some_and(|&(_, l)| i > l) => units.len().checked_sub(1),
            None => None,
        };
        let mut fetched = 0u64;
        while let Some(v) = next {
            fetched = fetched.saturating_add(self.unit_numel[v]);
            if fetched > PREFETCH_BUCKET_SIZE {
                break;
            }
            live[v] = true;
            next = step(v);
        }
        for (v, &(first, last)) in units.iter().enumerate() {
            // kept: its forward is done and its backward not yet
            let pending = if forward { last < i } else { first <= i };
            live[v] |= self.kept[v] && pending;
        }
        let (mut numel, mut bytes) = (root, root_bytes);
        for (v, _) in live.iter().enumerate().filter(|(_, &l)| l) {
            numel = numel.saturating_add(self.unit_numel[v]);
            bytes = bytes.saturating_add(self.unit_bytes[v]);
        }
        // `stage3_max_live_parameters` caps the elements, at the live parameters' bytes each
        let cap = MAX_LIVE_PARAMETERS.max(cur.map_or(0, |u| self.unit_numel[u]));
        if numel > cap { (bytes as u128 * cap as u128 / numel.max(1) as u128) as u64 } else { bytes }
    }

    fn state(&self, phase: Phase, op: Option<u32>) -> State {
        let mut s = State::default();
        let offload_opt = self.offload != Offload::None;
        let partition = if offload_opt { 0 } else { self.part.saturating_mul(self.elem) };
        let bucket = REDUCE_BUCKET_SIZE.saturating_mul(self.elem);
        let promoted = |i: Option<u32>| self.promoted(i);
        if self.stage == 3 {
            s.gathered = match (phase, op) {
                (Phase::Optimizer, _) | (_, None) => 0,
                (ph, Some(i)) => self.gathered(ph, i),
            };
        }
        if self.stage == 1 || phase == Phase::Forward && !self.accumulating {
            s.partition_grads = if self.stage == 3 { partition } else { 0 };
            return s;
        }
        let g = match phase {
            Phase::Optimizer => promoted(None),
            _ if self.accumulating => promoted(None),
            _ => promoted(op),
        };
        let reduced = if phase == Phase::Optimizer { g } else { g - g % bucket.max(1) };
        s.reduced_base = if self.accumulating { promoted(None) } else { reduced };
        s.unreduced = if self.accumulating { g.min(bucket) } else { g - reduced };
        s.partition_grads = if self.stage == 3 || reduced > 0 || self.accumulating { partition } else { 0 };
        s
    }
}

impl Overlay for Zero {
    fn at(&self, phase: Phase, op: Option<u32>) -> (Breakdown, Breakdown) {
        let s = self.state(phase, op);
        let offload_opt = self.offload != Offload::None;
        let mut add = Breakdown { gradients: s.partition_grads.saturating_add(if self.accumulating { s.unreduced } else { 0 }), ..Breakdown::default() };
        let mut sub = Breakdown { gradients: s.reduced_base, ..Breakdown::default() };
        if !offload_opt {
            add.optimizer_state = self.master;
            if phase == Phase::Optimizer && self.master > 0 {
                // `step`: the partition's fp32 gradient
                add.temporaries = self.part.saturating_mul(4);
            }
        }
        if self.stage == 3 {
            sub.parameters = self.base_total();
            let own = if self.offload == Offload::Params { 0 } else { self.param_part };
            add.parameters = own.saturating_add(self.persistent).saturating_add(s.gathered);
        }
        (add, sub)
    }
}

impl Rank for Zero {
    fn optimizer(&self) -> OptimizerCost {
        if self.offload != Offload::None {
            // CPU Adam steps in host memory
            OptimizerCost::default()
        } else {
            self.state
        }
    }

    fn model_states(&self) -> ModelStates {
        let s = self.state(Phase::Optimizer, None);
        let offload = self.offload != Offload::None;
        let parameters = if self.stage == 3 {
            let own = if self.offload == Offload::Params { 0 } else { self.param_part };
            own.saturating_add(self.persistent)
        } else {
            self.base_total()
        };
        let gradients = if self.stage == 1 { self.layout.trainable_bytes() } else { s.partition_grads };
        let fp32_grad = if self.master > 0 { self.part.saturating_mul(4) } else { 0 };
        let optimizer = if offload { 0 } else { self.master.saturating_add(self.state.state).saturating_add(fp32_grad) };
        ModelStates { parameters, gradients, optimizer, host: self.host_bytes() }
    }

    fn detail(&self, phase: Phase, op: Option<u32>) -> DistBreakdown {
        let s = self.state(phase, op);
        let own = if self.stage == 3 && self.offload != Offload::Params { self.param_part } else { 0 };
        DistBreakdown {
            sharded_parameters: own,
            unsharded_parameters: if self.stage == 3 { self.persistent.saturating_add(s.gathered) } else { self.base_total() },
            sharded_gradients: s.partition_grads,
            gradient_buckets: s.unreduced,
            ..DistBreakdown::default()
        }
    }

    fn host_bytes(&self) -> u64 {
        if self.offload == Offload::None {
            return 0;
        }
        // fp32 master + fp32 gradient partition + optimizer state (+ half parameter partition)
        let fp32 = self.part.saturating_mul(4);
        let params = if self.offload == Offload::Params { self.param_part } else { 0 };
        fp32.saturating_mul(2).saturating_add(self.state.state).saturating_add(params)
    }

    fn basis(&self) -> &'static str {
        "ZeRO: modelled from DeepSpeed's stage_1_and_2.py and stage3.py at their defaults; model states equal DeepSpeed's estimators where the mechanisms agree"
    }
}
