//! FSDP2 (`fully_shard` on each unit, then on the root), rank 0.
//!
//! Read from torch 2.15's `torch/distributed/fsdp/_fully_shard/`:
//! - `_fsdp_param.py` (`FSDPParam._init_sharded_param`): each parameter is chunked on dim 0 into
//!   N chunks padded to `ceil(dim0 / N)` rows; rank 0 keeps one padded chunk in the original dtype.
//!   Gradients and optimizer state live on that shard.
//! - `_fsdp_param_group.py` (`pre_forward`, `post_forward`, `pre_backward`, `post_backward`,
//!   `_backward_prefetch`): a unit all-gathers before its forward and, with
//!   `reshard_after_forward`, frees its unsharded parameters after it; the root is never
//!   resharded after forward (its parameters stay gathered until the end of backward). In
//!   backward each unit's pre-backward waits for its own all-gather (the copy-out frees the
//!   all-gather output) and then prefetches the next unit in backward order, whose all-gather
//!   output is alive during this unit's backward.
//! - `_fsdp_collectives.py` (`foreach_all_gather`, `foreach_reduce`): the all-gather output is
//!   `N × Σ shard numel` in `param_dtype`; after a unit's backward its unsharded gradients are
//!   copied into a reduce-scatter input of `N × Σ shard numel` in `reduce_dtype`, freed, and the
//!   reduced shard is cast to the original dtype.
//!
//! - `_fsdp_param_group.py` (`wait_for_unshard`): in forward the all-gather output is not freed
//!   after its copy-out but kept in `comm_ctx.all_gather_state` until the next unit's
//!   (`release_all_gather_state_for_comm_reuse`), so one unit's all-gather output lives beside
//!   the forward at every point — the last unit's through the head and the loss.
//!
//! Measured: `shared/reference/llm/fsdp.jsonl` (FSDPMemTracker on a fake process group, CPU:
//! no separate streams). On CUDA the next unit's all-gather may be issued while the current unit
//! computes (implicit prefetch), keeping up to one more unit gathered; not modelled.

use super::layout::{Layout, Param};
use super::setup::{DistBreakdown, DistConfig, ModelStates, Rank};
use crate::config::TrainConfig;
use crate::memory::simulate::Phase;
use crate::memory::breakdown::Breakdown;
use crate::memory::{OptimizerCost, Overlay};

pub struct Fsdp {
    layout: Layout,
    raf: bool,
    accumulating: bool,
    /// Per unit, the root last: gradient bytes of its trainable parameters in the graph.
    grad_base: Vec<u64>,
    /// Per unit, the root last: gathered (padded) bytes in `param_dtype`.
    unsharded: Vec<u64>,
    /// Per unit, the root last: rank 0's shard in the original dtype.
    shard: Vec<u64>,
    /// Per unit, the root last: rank 0's gradient shards (trainable parameters only).
    grad_shard: Vec<u64>,
    /// Per unit, the root last: reduce-scatter input in `reduce_dtype` (trainable parameters:
    /// `foreach_reduce` runs over the parameters that have a gradient).
    rs_input: Vec<u64>,
    opt: OptimizerCost,
    /// The sums the overlay needs at every sample of the step, once (a 70B job has 81 units
    /// and is simulated at every size the sizing tries): over the units before each unit, and
    /// over all of them with the root (`base`: the parameter bytes as the simulated graph stores
    /// them).
    before: Running,
    all: Totals,
}

/// Index `k`: the sum over units `0..k` in forward order (saturating, like the per-unit sums).
struct Running {
    unsharded: Vec<u64>,
    grad_base: Vec<u64>,
    grad_shard: Vec<u64>,
}

struct Totals {
    base: u64,
    shard: u64,
    grad_base: u64,
    grad_shard: u64,
}

#[derive(Default)]
struct State {
    gathered: u64,
    all_gather: u64,
    reduce_scatter: u64,
    /// Gradient bytes (in the graph) already reduced, and their shards.
    reduced_base: u64,
    reduced_shard: u64,
}

impl Fsdp {
    /// `orig`: bytes per element of the parameters as the model holds them before
    /// `fully_shard` (`MixedPrecisionPolicy(param_dtype)` casts from it for compute).
    pub fn new(layout: Layout, config: &TrainConfig, dist: &DistConfig, n: u64, accumulating: bool, orig: Option<u64>) -> Fsdp {
        let k = layout.units.len() + 1;
        let zeros = || vec![0u64; k];
        let (mut base, mut grad_base, mut unsharded, mut shard, mut grad_shard, mut rs_input) = (zeros(), zeros(), zeros(), zeros(), zeros(), zeros());
        let orig_of = |p: &Param| if p.trainable || p.stored == p.numel.saturating_mul(p.elem) { orig.unwrap_or(p.elem) } else { p.elem };
        for p in &layout.params {
            let i = p.unit.unwrap_or(k - 1);
            let o = orig_of(p);
            let pdt = dist.fsdp_param_dtype.map_or(p.elem, |d| d.size());
            let rdt = dist.fsdp_reduce_dtype.map_or(pdt, |d| d.size());
            base[i] = base[i].saturating_add(p.stored);
            let (chunk, gathered, own) = if p.stored == p.numel.saturating_mul(p.elem) {
                let chunk = shard_numel(&p.shape, n);
                (chunk, chunk.saturating_mul(n).saturating_mul(pdt), chunk.saturating_mul(o))
            } else {
                // a quantised base (FSDP-QLoRA): `bnb_4bit_quant_storage` of the compute dtype
                // makes the packed bytes a flat tensor of that dtype, sharded like any other
                // and never cast by the policy (modelled, not measured)
                let chunk = p.stored.div_ceil(p.elem.max(1)).div_ceil(n.max(1));
                let b = chunk.saturating_mul(p.elem);
                (chunk, b.saturating_mul(n), b)
            };
            unsharded[i] = unsharded[i].saturating_add(gathered);
            shard[i] = shard[i].saturating_add(own);
            if p.trainable {
                grad_base[i] = grad_base[i].saturating_add(p.grad_bytes());
                grad_shard[i] = grad_shard[i].saturating_add(own);
                rs_input[i] = rs_input[i].saturating_add(chunk.saturating_mul(n).saturating_mul(rdt));
            }
        }
        let opt = layout.optimizer_cost(config, |p| {
            let mut s = p.shape.clone();
            if let Some(d0) = s.first_mut() {
                *d0 = d0.div_ceil(n.max(1));
            }
            s
        }, orig_of);
        let before = Running { unsharded: running(&unsharded[..k - 1]), grad_base: running(&grad_base[..k - 1]), grad_shard: running(&grad_shard[..k - 1]) };
        let all = Totals { base: base.iter().sum(), shard: shard.iter().sum(), grad_base: grad_base.iter().sum(), grad_shard: grad_shard.iter().sum() };
        Fsdp { layout, raf: dist.reshard_after_forward, accumulating, grad_base, unsharded, shard, grad_shard, rs_input, opt, before, all }
    }

    fn root(&self) -> usize {
        self.layout.units.len()
    }

    fn state(&self, phase: Phase, op: Option<u32>) -> State {
        let units = &self.layout.units;
        let root = self.root();
        let mut s = State::default();
        let Some(i) = op.filter(|_| phase != Phase::Optimizer) else {
            s.reduced_base = self.all.grad_base;
            s.reduced_shard = self.all.grad_shard;
            return s;
        };
        let cur = self.layout.unit_of_op(i);
        // Units start in forward order (`Layout::new` opens each at the op it first sees), so
        // the units begun by op `i` are the first `run` ones, and `cur` (begun, not ended) is one.
        let run = self.layout.units_begun(i);
        s.gathered = self.unsharded[root].saturating_add(if self.raf {
            cur.map_or(0, |u| self.unsharded[u])
        } else {
            // without reshard_after_forward every unit run so far stays gathered until its
            // post-backward (in backward: those whose first op backward has not passed)
            self.before.unsharded[run]
        });
        if phase == Phase::Backward {
            // reduced: the units whose first op backward has passed (not `cur`, begun by `i`)
            let (b, sh) = (&self.before.grad_base, &self.before.grad_shard);
            s.reduced_base = b[units.len()].saturating_sub(b[run]);
            s.reduced_shard = sh[units.len()].saturating_sub(sh[run]);
        }
        if phase == Phase::Forward {
            // `wait_for_unshard` in forward keeps the all-gather output of the unit gathered
            // last (`comm_ctx.all_gather_state`, "implicit prefetch") until the next unit's
            // copy-out: the root's until the first unit's, the last unit's to the forward's end
            s.all_gather = self.unsharded[run.checked_sub(1).unwrap_or(root)];
        }
        if phase == Phase::Backward {
            if self.raf {
                let next = match cur {
                    Some(u) => u.checked_sub(1),
                    None if units.last().is_some_and(|&(_, last)| i > last) => Some(units.len() - 1),
                    None => None,
                };
                s.all_gather = next.map_or(0, |v| self.unsharded[v]);
            }
            if let Some(u) = cur.filter(|&u| units[u].0 == i) {
                s.reduce_scatter = self.rs_input[u];
            }
        }
        s
    }
}

/// `[0, x0, x0 + x1, …]`, saturating.
fn running(xs: &[u64]) -> Vec<u64> {
    let mut out = Vec::with_capacity(xs.len() + 1);
    let mut sum = 0u64;
    out.push(sum);
    for &x in xs {
        sum = sum.saturating_add(x);
        out.push(sum);
    }
    out
}

/// Rank 0's padded chunk of a parameter: `ceil(dim0 / n) × the other dims`.
pub(crate) fn shard_numel(shape: &[u64], n: u64) -> u64 {
    match shape.split_first() {
        Some((d0, rest)) => rest.iter().fold(d0.div_ceil(n.max(1)), |a, &d| a.saturating_mul(d)),
        None => 1,
    }
}

impl Overlay for Fsdp {
    fn at(&self, phase: Phase, op: Option<u32>) -> (Breakdown, Breakdown) {
        let s = self.state(phase, op);
        let (all_base, all_shard) = (self.all.base, self.all.shard);
        let mut add = Breakdown { parameters: all_shard.saturating_add(s.gathered), temporaries: s.all_gather.saturating_add(s.reduce_scatter), ..Breakdown::default() };
        let mut sub = Breakdown { parameters: all_base, ..Breakdown::default() };
        if self.accumulating {
            // earlier micro-batches left full `.grad`s in the simulation; FSDP keeps shards, and
            // the unit in backward (and the root) hold unsharded gradients until reduced
            sub.gradients = self.all.grad_base;
            add.gradients = self.all.grad_shard;
            if phase == Phase::Backward {
                let cur = op.and_then(|i| self.layout.unit_of_op(i)).unwrap_or(self.root());
                add.gradients = add.gradients.saturating_add(self.grad_base[cur]);
            }
        } else {
            sub.gradients = s.reduced_base;
            add.gradients = s.reduced_shard;
        }
        (add, sub)
    }
}

impl Rank for Fsdp {
    fn optimizer(&self) -> OptimizerCost {
        self.opt
    }

    fn model_states(&self) -> ModelStates {
        ModelStates { parameters: self.shard.iter().sum(), gradients: self.grad_shard.iter().sum(), optimizer: self.opt.state, host: 0 }
    }

    fn detail(&self, phase: Phase, op: Option<u32>) -> DistBreakdown {
        let s = self.state(phase, op);
        DistBreakdown {
            sharded_parameters: self.shard.iter().sum(),
            unsharded_parameters: s.gathered,
            sharded_gradients: s.reduced_shard,
            all_gather_buffers: s.all_gather,
            reduce_scatter_buffers: s.reduce_scatter,
            ..DistBreakdown::default()
        }
    }

    fn host_bytes(&self) -> u64 {
        0
    }

    fn basis(&self) -> &'static str {
        "FSDP2: mechanism checked against measured per-rank records (shared/reference/llm/fsdp.jsonl, torch 2.15 FSDPMemTracker, fake process group) to 0.01 %; CUDA's implicit forward prefetch not modelled"
    }
}
