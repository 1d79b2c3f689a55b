//! The storage-level timeline of one steady-state step.
//!
//! Forward: each op allocates its outputs; a storage dies after its last forward reader unless an
//! op saved it. Backward, ops in reverse: input gradients are allocated (or passed through for
//! views and `add`), parameter gradients appear, then the op's saved storages and incoming
//! gradient are released. The peak is sampled after each op's allocations, before its frees —
//! where PyTorch's `max_memory_allocated` sees it. Checkpointing units drop their saved tensors in
//! the forward, keep their inputs, and recompute the unit's forward when backward reaches it.
//! Ops the backward does not reach (`reach.rs`) never run backward; what they saved dies with them.

use super::breakdown::{Breakdown, Category};
use super::device::{round512, round_reserved};
use super::reach;
use crate::graph::{GradRule, Graph, Lin, StorageClass, StorageId, ValueId};
pub use super::phase::{Phase, TimelinePoint};

/// What the optimizer adds, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OptimizerCost {
    pub state: u64,
    pub step_temporaries: u64,
}

/// Bytes a caller lays over each sample of the step, `(added, removed)` by category, keyed by
/// the phase and op of the sample (`crate::distributed`: sharded and gathered parameters, reduced
/// gradients, communication buffers). Batch-independent.
pub trait Overlay {
    fn at(&self, phase: Phase, op: Option<u32>) -> (Breakdown, Breakdown);
}

/// Result of one simulated step.
#[derive(Debug, Clone, PartialEq)]
pub struct StepResult {
    pub peak: u64,
    pub peak_phase: Phase,
    /// Op index at the peak (`None` in the optimizer step).
    pub peak_op: Option<u32>,
    pub breakdown: Breakdown,
    pub phase_peaks: [u64; 3],
    /// Sizes of the tensors live at the sample asked for with `snapshot_at`.
    pub snapshot: Vec<Lin>,
    /// The graph's storages live at that sample (the snapshot's storages, without gradients):
    /// for listing them by the op that made them (`examples/generate_live.rs`).
    pub snapshot_storages: Vec<StorageId>,
    pub timeline: Vec<TimelinePoint>,
    /// Bytes saved for backward by each op (at the simulated batch), indexed by op.
    pub saved_by_op: Vec<u64>,
    /// `(512-byte rounded, reserved)` totals: a sample's allocated bytes plus the rounding of the
    /// storages and gradient buffers live then (`round512`, `round_reserved`). `max_rounded`: the
    /// largest over the samples (the caching allocator keeps the segments it reserved);
    /// `peak_rounded`: at the last sample of the allocated peak, what `envelope::device_total`
    /// makes of the snapshot a second simulation would take there.
    #[doc(hidden)]
    pub max_rounded: (u64, u64),
    #[doc(hidden)]
    pub peak_rounded: (u64, u64),
    /// Whether an overlay took more from a category at some sample than the step held there
    /// (the sample then counts the category as empty): such samples are not lines in the batch
    /// (see `envelope::Envelope::overlaid`).
    #[doc(hidden)]
    pub overlay_clamped: bool,
}

/// Batch-independent bookkeeping for a graph, computed once and reused across batch sizes.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Storages that die after forward op `i` (not saved, last read there).
    fwd_frees: Vec<Vec<StorageId>>,
    /// Saved storages released after backward op `i`.
    bwd_frees: Vec<Vec<StorageId>>,
    /// Storages released after forward ends (autocast weight cache).
    end_of_forward_frees: Vec<StorageId>,
    /// For each checkpointing unit: its op range and the storages it allocates and keeps on recompute.
    units: Vec<UnitPlan>,
    training: bool,
    /// For each value: how many recorded ops take it as input (parameters only; tied weights > 1).
    param_uses: Vec<u32>,
    /// Gradient accumulation: after the first micro-batch every `.grad` exists for the whole
    /// step and new parameter gradients are added into them.
    accumulating: bool,
    /// Per op: the backward reaches it ([`reach::backward`]); the others never run backward.
    reach: Vec<bool>,
    /// The parameters whose `.grad` the backward makes ([`reach::grad_params`]).
    grad_params: Vec<ValueId>,
}

#[derive(Debug, Clone)]
struct UnitPlan {
    first: usize,
    last: usize,
    /// Per op of the unit (recompute): storages to free right after it.
    recompute_frees: Vec<Vec<StorageId>>,
}

const NONE: u32 = u32::MAX;

impl Plan {
    pub fn new(g: &Graph, training: bool) -> Plan {
        let n_ops = g.ops.len();
        let n_st = g.storages.len();
        let mut last_use = vec![NONE; n_st];
        let mut first_saver = vec![NONE; n_st];
        let mut unit_of_alloc = vec![NONE; n_st];
        for (i, op) in g.ops.iter().enumerate() {
            for &v in op.inputs.iter().chain(op.outputs.iter()) {
                last_use[g.storage_of(v) as usize] = i as u32;
            }
            for &s in &op.allocs {
                last_use[s as usize] = last_use[s as usize].max(i as u32).min(i as u32).max(i as u32);
                unit_of_alloc[s as usize] = op.unit.unwrap_or(NONE);
            }
        }
        // recompute the true last use (allocation may precede reads)
        for (i, op) in g.ops.iter().enumerate() {
            for &v in &op.inputs {
                let s = g.storage_of(v) as usize;
                last_use[s] = last_use[s].max(i as u32);
            }
        }
        for &(s, until) in &g.holds {
            last_use[s as usize] = last_use[s as usize].max(until);
        }
        let reach = if training { reach::backward(g) } else { vec![false; n_ops] };
        if training {
            reach::hold_unreached(g, &reach, &mut last_use);
        }
        let (mut units, mut first_rec): (Vec<UnitPlan>, Vec<Option<usize>>) = (Vec::new(), Vec::new());
        for (i, op) in g.ops.iter().enumerate() {
            if let Some(u) = op.unit {
                let u = u as usize;
                if units.len() <= u {
                    units.resize(u + 1, UnitPlan { first: i, last: i, recompute_frees: vec![] });
                    first_rec.resize(u + 1, None);
                    units[u].first = i;
                }
                units[u].last = i;
                first_rec[u] = first_rec[u].or(op.recorded.then_some(i)); // its inputs' release: not at an unrecorded op (a frozen fp8 weight's cast)
            }
        }
        // Saved storages: in a checkpointing unit nothing is kept but the unit's inputs.
        for (i, op) in g.ops.iter().enumerate().rev() {
            if !training || !reach[i] {
                continue;
            }
            match op.unit {
                None => {
                    for &s in &op.saved {
                        first_saver[s as usize] = i as u32;
                    }
                }
                Some(u) => {
                    let first = first_rec[u as usize].unwrap_or(units[u as usize].first);
                    for &v in &op.inputs {
                        let s = g.storage_of(v) as usize;
                        let from_outside = unit_of_alloc[s] != u || matches!(g.storages[s].class, StorageClass::Input);
                        if from_outside && g.storages[s].class == StorageClass::Activation {
                            // held by the checkpoint until the unit's backward is done
                            first_saver[s] = first_saver[s].min(first as u32);
                        }
                    }
                }
            }
        }
        let mut fwd_frees = vec![Vec::new(); n_ops];
        let mut bwd_frees = vec![Vec::new(); n_ops];
        let mut end_of_forward_frees = Vec::new();
        for s in 0..n_st {
            let class = g.storages[s].class;
            if !matches!(class, StorageClass::Activation | StorageClass::ParamCast | StorageClass::KvPast) || s as StorageId == g.storage_of(g.output) {
                continue;
            }
            if first_saver[s] != NONE {
                bwd_frees[first_saver[s] as usize].push(s as StorageId);
            } else if class == StorageClass::ParamCast {
                end_of_forward_frees.push(s as StorageId);
            } else if last_use[s] != NONE {
                fwd_frees[last_use[s] as usize].push(s as StorageId);
            }
        }
        // Recompute plan: within a unit, storages saved by the unit's ops stay until their saver's
        // backward; the rest die at their last use inside the unit.
        // `saver[s]`: the first op of the unit that saves storage `s` (`NO_SAVER` when none does);
        // one table for all units, cleared after each.
        const NO_SAVER: usize = usize::MAX;
        let mut saver = vec![NO_SAVER; n_st];
        for unit in units.iter_mut() {
            for i in (unit.first..=unit.last).rev() {
                let op = &g.ops[i];
                if reach[i] {
                    for &s in &op.saved {
                        saver[s as usize] = i;
                    }
                }
            }
            let mut frees = vec![Vec::new(); unit.last - unit.first + 1];
            for i in unit.first..=unit.last {
                for &s in &g.ops[i].allocs {
                    let j = saver[s as usize];
                    if j != NO_SAVER {
                        bwd_frees[j].push(s);
                    } else {
                        let lu = (last_use[s as usize] as usize).clamp(i, unit.last);
                        frees[lu - unit.first].push(s);
                    }
                }
            }
            unit.recompute_frees = frees;
            for op in &g.ops[unit.first..=unit.last] {
                for &s in &op.saved {
                    saver[s as usize] = NO_SAVER;
                }
            }
        }
        let mut param_uses = vec![0u32; g.values.len()];
        for (op, _) in g.ops.iter().zip(&reach).filter(|(_, &r)| r) {
            for &v in &op.inputs {
                if g.storages[g.storage_of(v) as usize].class == StorageClass::Param {
                    param_uses[v as usize] += 1;
                }
            }
        }
        let grad_params = if training { reach::grad_params(g) } else { Vec::new() };
        Plan { fwd_frees, bwd_frees, end_of_forward_frees, units, training, param_uses, accumulating: false, reach, grad_params }
    }

    /// Simulates one step at `batch` with the optimizer's persistent state and step temporaries.
    /// Simulates a later micro-batch of gradient accumulation (the worst one) instead of a plain step.
    pub fn with_accumulation(mut self, accumulating: bool) -> Plan {
        self.accumulating = accumulating && self.training;
        self
    }

    /// `snapshot_at`: index of a sample (in timeline order) at which to list the live tensors.
    pub fn simulate(&self, g: &Graph, batch: u64, opt: OptimizerCost, record_timeline: bool, snapshot_at: Option<usize>) -> StepResult {
        let mut sim = Sim::new(g, batch, record_timeline);
        sim.snapshot_at = snapshot_at;
        self.run(sim, opt)
    }

    /// [`Plan::simulate`] with `overlay` added to every sample (its peak, breakdown and timeline).
    pub fn simulate_overlaid(&self, g: &Graph, batch: u64, opt: OptimizerCost, record_timeline: bool, overlay: &dyn Overlay) -> StepResult {
        let mut sim = Sim::new(g, batch, record_timeline);
        sim.overlay = Some(overlay);
        self.run(sim, opt)
    }

    fn run(&self, mut sim: Sim, opt: OptimizerCost) -> StepResult {
        let g = sim.g;
        // persistent memory at the start of the step
        for s in 0..g.storages.len() {
            let cat = match g.storages[s].class {
                StorageClass::Param => Category::Parameters,
                StorageClass::Buffer => Category::Buffers,
                StorageClass::Input => Category::Input,
                // the cache of earlier forwards (its category is `kv_cache`, see `alloc`)
                StorageClass::KvResident | StorageClass::KvPast => Category::Activations,
                _ => continue,
            };
            sim.alloc(s as StorageId, cat);
        }
        sim.add_raw(Category::OptimizerState, if self.training { opt.state } else { 0 });
        if self.accumulating {
            // `.grad`s left by the earlier micro-batches
            for &p in &self.grad_params {
                let id = sim.new_grad(g.value(p).bytes(), true);
                sim.promote_grad(id);
            }
        }
        self.forward(&mut sim);
        if self.training {
            self.backward(&mut sim);
            sim.phase = Phase::Optimizer;
            sim.layer = NONE;
            sim.op = None;
            sim.add_raw(Category::Temporaries, opt.step_temporaries);
            sim.sample();
            sim.sub_raw(Category::Temporaries, opt.step_temporaries);
        }
        sim.finish()
    }

    fn forward(&self, sim: &mut Sim) {
        let g = sim.g;
        sim.phase = Phase::Forward;
        for (i, op) in g.ops.iter().enumerate() {
            sim.op = Some(i as u32);
            sim.layer = op.layer;
            for &s in &op.allocs {
                sim.alloc(s, Category::Activations);
            }
            let scratch = op.fwd_scratch.at(sim.batch);
            sim.add_raw(Category::Activations, scratch);
            sim.sample();
            sim.sub_raw(Category::Activations, scratch);
            for &s in &self.fwd_frees[i] {
                sim.free(s);
            }
            if op.recorded && sim.record {
                let saved: u64 = op.saved.iter().map(|&s| sim.storage_bytes(s)).fold(0, u64::saturating_add);
                sim.saved_by_op[i] = saved;
            }
        }
        for &s in &self.end_of_forward_frees {
            sim.free(s);
        }
        if !self.training {
            sim.free(g.storage_of(g.output));
        }
    }

    fn backward(&self, sim: &mut Sim) {
        let g = sim.g;
        sim.phase = Phase::Backward;
        let mut grads = Grads::new(g);
        let mut uses_left = self.param_uses.clone();
        grads.set(g.output, sim.new_grad(Lin { fixed: 4, per_sample: 0 }, false));
        let mut unit_done = vec![false; self.units.len()];
        for i in (0..g.ops.len()).rev() {
            let op = &g.ops[i];
            if !self.reach[i] {
                continue;
            }
            sim.op = Some(i as u32);
            sim.layer = op.layer;
            if let Some(u) = op.unit {
                let u = u as usize;
                if !unit_done[u] {
                    unit_done[u] = true;
                    self.recompute(sim, u);
                    sim.phase = Phase::Backward;
                    sim.op = Some(i as u32);
                    sim.layer = op.layer;
                }
            }
            let has_grad = op.outputs.iter().any(|&o| grads.get(o).is_some());
            let mut new_grads_done: Vec<ValueId> = Vec::new();
            // second contributions to a gradient, summed out of place afterwards
            let mut accumulate: Vec<(ValueId, usize)> = Vec::new();
            if has_grad {
                let out_grad = op.outputs.first().and_then(|&o| grads.get(o));
                for &v in &op.inputs {
                    let val = g.value(v);
                    if !val.requires_grad {
                        continue;
                    }
                    let is_param = g.storages[val.storage as usize].class == StorageClass::Param;
                    if is_param {
                        // contributions gather in AccumulateGrad's input buffer until the last one
                        let id = sim.new_grad(val.bytes(), false);
                        match grads.get(v) {
                            None => grads.set(v, id),
                            Some(_) => accumulate.push((v, id)),
                        }
                        let left = &mut uses_left[v as usize];
                        *left = left.saturating_sub(1);
                        if *left == 0 {
                            new_grads_done.push(v);
                        }
                        continue;
                    }
                    let alias = out_grad.is_some() && (op.grad == GradRule::Slices || op.grad == GradRule::Alias && out_grad.is_some_and(|og| sim.grads[og].bytes == val.bytes()));
                    let contribution = if alias {
                        let og = out_grad.unwrap_or(usize::MAX);
                        sim.grads[og].refs += 1;
                        og
                    } else {
                        sim.new_grad(val.bytes(), false)
                    };
                    match grads.get(v) {
                        None => grads.set(v, contribution),
                        Some(_) => accumulate.push((v, contribution)),
                    }
                }
            }
            let scratch = if has_grad { op.bwd_scratch.at(sim.batch) } else { 0 };
            sim.add_raw(Category::Temporaries, scratch);
            sim.sample();
            sim.sub_raw(Category::Temporaries, scratch);
            for &o in &op.outputs {
                if let Some(id) = grads.take(o) {
                    sim.release_grad(id);
                }
            }
            for &s in &self.bwd_frees[i] {
                sim.free(s);
            }
            // Then the engine adds the op's outputs into the next ops' input buffers; a second
            // gradient for the same tensor is summed out of place (`old + new`).
            for (v, new_id) in accumulate {
                let old = grads.get(v).unwrap_or(usize::MAX);
                let sum = sim.new_grad(g.value(v).bytes(), false);
                sim.sample();
                sim.release_grad(old);
                sim.release_grad(new_id);
                grads.set(v, sum);
            }
            // AccumulateGrad runs once all of a parameter's contributions are in: the tensor
            // becomes `.grad`, or is added in place into the `.grad` earlier micro-batches left.
            for v in new_grads_done {
                if let Some(id) = grads.take(v) {
                    if self.accumulating {
                        sim.release_grad(id);
                    } else {
                        sim.grads[id].param = true;
                        sim.promote_grad(id);
                    }
                }
            }
        }
        // gradients nobody consumed die with the graph (every saved storage was freed above)
        for id in 0..sim.grads.len() {
            if !sim.grads[id].param && sim.grads[id].refs > 0 {
                sim.grads[id].refs = 1;
                sim.release_grad(id);
            }
        }
    }

    /// Re-runs a checkpointing unit's forward when backward first needs its saved tensors.
    fn recompute(&self, sim: &mut Sim, u: usize) {
        let g = sim.g;
        let unit = &self.units[u];
        for i in unit.first..=unit.last {
            let op = &g.ops[i];
            sim.op = Some(i as u32);
            sim.layer = op.layer;
            for &s in &op.allocs {
                sim.alloc(s, Category::Activations);
            }
            sim.sample();
            for &s in &unit.recompute_frees[i - unit.first] {
                sim.free(s);
            }
        }
    }
}

struct Grads {
    of_value: Vec<u32>,
}

impl Grads {
    fn new(g: &Graph) -> Grads {
        Grads { of_value: vec![NONE; g.values.len()] }
    }
    fn get(&self, v: ValueId) -> Option<usize> {
        let id = self.of_value[v as usize];
        (id != NONE).then_some(id as usize)
    }
    fn set(&mut self, v: ValueId, id: usize) {
        self.of_value[v as usize] = id as u32;
    }
    fn take(&mut self, v: ValueId) -> Option<usize> {
        let id = self.get(v);
        self.of_value[v as usize] = NONE;
        id
    }
}

struct GradBuf {
    bytes: Lin,
    refs: u32,
    param: bool,
}

struct Sim<'g> {
    g: &'g Graph,
    overlay: Option<&'g dyn Overlay>,
    batch: u64,
    live: Vec<bool>,
    cat_of: Vec<Category>,
    grads: Vec<GradBuf>,
    cur: Breakdown,
    phase: Phase,
    op: Option<u32>,
    layer: u32,
    peak: u64,
    peak_phase: Phase,
    peak_op: Option<u32>,
    peak_breakdown: Breakdown,
    phase_peaks: [u64; 3],
    record: bool,
    n_samples: usize,
    snapshot_at: Option<usize>,
    snapshot: Vec<Lin>,
    snapshot_storages: Vec<StorageId>,
    timeline: Vec<TimelinePoint>,
    saved_by_op: Vec<u64>,
    /// Rounding overhead of the live storages and gradient buffers (`round512(b) − b`,
    /// `round_reserved(b) − b` summed) and the largest rounded totals so far.
    overhead: (u64, u64),
    max_rounded: (u64, u64),
    /// `overhead` at the last sample whose total equals the peak so far.
    peak_overhead: (u64, u64),
    /// See [`StepResult::overlay_clamped`].
    overlay_clamped: bool,
}

impl<'g> Sim<'g> {
    fn new(g: &'g Graph, batch: u64, record: bool) -> Self {
        Sim {
            g,
            overlay: None,
            batch,
            live: vec![false; g.storages.len()],
            cat_of: vec![Category::Activations; g.storages.len()],
            grads: Vec::new(),
            cur: Breakdown::default(),
            phase: Phase::Forward,
            op: None,
            layer: NONE,
            peak: 0,
            peak_phase: Phase::Forward,
            peak_op: None,
            peak_breakdown: Breakdown::default(),
            phase_peaks: [0; 3],
            record,
            n_samples: 0,
            snapshot_at: None,
            snapshot: Vec::new(),
            snapshot_storages: Vec::new(),
            timeline: Vec::new(),
            saved_by_op: if record { vec![0; g.ops.len()] } else { Vec::new() },
            overhead: (0, 0),
            max_rounded: (0, 0),
            peak_overhead: (0, 0),
            overlay_clamped: false,
        }
    }

    /// Adds (or removes) a live block of `b` bytes to the rounding overhead.
    fn round_overhead(&mut self, b: u64, add: bool) {
        let (r512, res) = (round512(b).saturating_sub(b), round_reserved(b).saturating_sub(b));
        let (a, b) = self.overhead;
        self.overhead = if add { (a.saturating_add(r512), b.saturating_add(res)) } else { (a.saturating_sub(r512), b.saturating_sub(res)) };
    }

    fn storage_bytes(&self, s: StorageId) -> u64 {
        self.g.storages[s as usize].bytes.at(self.batch)
    }

    /// Adds a storage's bytes to its category (the cache's to `kv_cache`).
    fn add_storage(&mut self, s: StorageId, c: Category, b: u64) {
        match self.g.storages[s as usize].class {
            k if k.is_kv() => self.cur.kv_cache = self.cur.kv_cache.saturating_add(b),
            k => {
                if k == StorageClass::ParamCast {
                    self.cur.weight_casts = self.cur.weight_casts.saturating_add(b);
                }
                self.add_raw(c, b)
            }
        }
    }

    fn add_raw(&mut self, c: Category, b: u64) {
        let slot = self.cur.slot(c);
        *slot = slot.saturating_add(b);
    }

    fn sub_raw(&mut self, c: Category, b: u64) {
        let slot = self.cur.slot(c);
        *slot = slot.saturating_sub(b);
    }

    fn alloc(&mut self, s: StorageId, c: Category) {
        if std::mem::replace(&mut self.live[s as usize], true) {
            return;
        }
        self.cat_of[s as usize] = c;
        let b = self.storage_bytes(s);
        self.round_overhead(b, true);
        self.add_storage(s, c, b);
    }

    fn free(&mut self, s: StorageId) {
        if !std::mem::replace(&mut self.live[s as usize], false) {
            return;
        }
        let b = self.storage_bytes(s);
        self.round_overhead(b, false);
        match self.g.storages[s as usize].class {
            k if k.is_kv() => self.cur.kv_cache = self.cur.kv_cache.saturating_sub(b),
            k => {
                if k == StorageClass::ParamCast {
                    self.cur.weight_casts = self.cur.weight_casts.saturating_sub(b);
                }
                self.sub_raw(self.cat_of[s as usize], b)
            }
        }
    }

    fn new_grad(&mut self, bytes: Lin, param: bool) -> usize {
        self.grads.push(GradBuf { bytes, refs: 1, param });
        self.round_overhead(bytes.at(self.batch), true);
        // a parameter's gradient counts as a temporary until AccumulateGrad makes it `.grad`
        self.add_raw(Category::Temporaries, bytes.at(self.batch));
        self.grads.len() - 1
    }

    fn promote_grad(&mut self, id: usize) {
        let b = self.grads[id].bytes.at(self.batch);
        let t = self.cur.slot(Category::Temporaries);
        *t = t.saturating_sub(b);
        let gr = self.cur.slot(Category::Gradients);
        *gr = gr.saturating_add(b);
    }

    fn release_grad(&mut self, id: usize) {
        if id >= self.grads.len() || self.grads[id].param {
            return;
        }
        let buf = &mut self.grads[id];
        if buf.refs == 0 {
            return;
        }
        buf.refs -= 1;
        if buf.refs == 0 {
            let b = buf.bytes.at(self.batch);
            self.sub_raw(Category::Temporaries, b);
            self.round_overhead(b, false);
        }
    }

    fn sample(&mut self) {
        let cur = match self.overlay {
            Some(o) => {
                let (add, sub) = o.at(self.phase, self.op);
                let mut b = self.cur;
                for c in Category::ALL {
                    let held = b.get(c).saturating_add(add.get(c));
                    self.overlay_clamped |= sub.get(c) > held;
                    *b.slot(c) = held.saturating_sub(sub.get(c));
                }
                b
            }
            None => self.cur,
        };
        let total = cur.total();
        let rounded = (total.saturating_add(self.overhead.0), total.saturating_add(self.overhead.1));
        self.max_rounded = (self.max_rounded.0.max(rounded.0), self.max_rounded.1.max(rounded.1));
        let pi = self.phase as usize;
        self.phase_peaks[pi] = self.phase_peaks[pi].max(total);
        if total >= self.peak {
            self.peak_overhead = self.overhead;
        }
        if total > self.peak {
            self.peak = total;
            self.peak_phase = self.phase;
            self.peak_op = self.op;
            self.peak_breakdown = cur;
        }
        if self.record {
            self.timeline.push(TimelinePoint { phase: self.phase, layer: self.layer, op: self.op.unwrap_or(NONE), bytes: total });
        }
        if self.snapshot_at == Some(self.n_samples) {
            self.take_snapshot();
        }
        self.n_samples += 1;
    }

    /// Lists every live storage and gradient (optimizer state and workspaces are not tensors here).
    fn take_snapshot(&mut self) {
        let g = self.g;
        let storages = self.live.iter().enumerate().filter(|(_, &l)| l).map(|(s, _)| g.storages[s].bytes);
        let grads = self.grads.iter().filter(|b| b.refs > 0).map(|b| b.bytes);
        self.snapshot = storages.chain(grads).collect();
        self.snapshot_storages = self.live.iter().enumerate().filter(|(_, &l)| l).map(|(s, _)| s as StorageId).collect();
    }

    fn finish(self) -> StepResult {
        StepResult {
            peak: self.peak,
            peak_phase: self.peak_phase,
            peak_op: self.peak_op,
            breakdown: self.peak_breakdown,
            phase_peaks: self.phase_peaks,
            snapshot: self.snapshot,
            snapshot_storages: self.snapshot_storages,
            timeline: self.timeline,
            saved_by_op: self.saved_by_op,
            max_rounded: self.max_rounded,
            peak_rounded: (self.peak.saturating_add(self.peak_overhead.0), self.peak.saturating_add(self.peak_overhead.1)),
            overlay_clamped: self.overlay_clamped,
        }
    }
}
