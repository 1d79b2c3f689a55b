//! Which parameters belong to which wrapping unit, and when backward is done with them.
//!
//! A *unit* is what `fully_shard` (FSDP2) or DeepSpeed's ZeRO-3 gathers at once: each iteration
//! of a `repeat` block (the transformer layers: `fully_shard(layer)` per decoder layer), or, in a
//! model without one, each top-level block. Everything else (embeddings, final norm, head) belongs
//! to the root (`fully_shard(model)` last).

use crate::graph::Graph;
use crate::resolve::Resolved;

/// One parameter tensor as the strategies see it.
#[derive(Debug, Clone)]
pub struct Param {
    pub shape: Vec<u64>,
    pub numel: u64,
    /// Bytes per element in the simulated graph (the compute dtype).
    pub elem: u64,
    /// Bytes as stored in the simulated graph: `numel × elem`, or a quantised base's packed
    /// layout (bitsandbytes, `--weights`).
    pub stored: u64,
    /// `requires_grad`: only these get gradients, reducer buckets, reduce-scatters and optimizer
    /// state (a frozen base, LoRA's wrapped weights and `"trainable": false` layers do not).
    pub trainable: bool,
    /// Unit index, or `None` for the root.
    pub unit: Option<usize>,
    /// Forward index of the first recorded op that reads it: backward has its whole gradient
    /// once it is past that op.
    pub first_use: u32,
}

impl Param {
    /// Bytes of its gradient (`0` for a frozen parameter).
    pub fn grad_bytes(&self) -> u64 {
        if self.trainable { self.numel.saturating_mul(self.elem) } else { 0 }
    }
}

/// The units of a model in forward order, with their op ranges.
#[derive(Debug, Clone, Default)]
pub struct Layout {
    pub params: Vec<Param>,
    /// `(first op, last op)` of each unit, forward order.
    pub units: Vec<(u32, u32)>,
    /// [`Layout::unit_of_op`] of every op up to the last unit's end ([`NO_UNIT`]: none), so the
    /// strategies' overlays look a sample's unit up instead of scanning the units: the scan was a
    /// third of the native time of a Llama-3.1-70B FSDP sizing (80 units, every sample).
    unit_by_op: Vec<u32>,
    /// [`Layout::units_begun`] of every op up to the last unit's first (a binary search per
    /// sample was the next largest part of that sizing).
    begun_by_op: Vec<u32>,
}

const NO_UNIT: u32 = u32::MAX;

impl Layout {
    pub fn new(r: &Resolved) -> Layout {
        let g = &r.graph;
        let unit_of_row = unit_rows(r);
        let mut units: Vec<(u32, u32)> = Vec::new();
        let mut op_unit: Vec<Option<usize>> = Vec::with_capacity(g.ops.len());
        for (i, op) in g.ops.iter().enumerate() {
            let u = unit_of_row.get(op.layer as usize).copied().flatten();
            if let Some(u) = u {
                if units.len() <= u {
                    units.resize(u + 1, (i as u32, i as u32));
                }
                units[u].1 = i as u32;
            }
            op_unit.push(u);
        }
        let first_uses = first_uses(g);
        let params = g
            .params
            .iter()
            .map(|&p| {
                let v = g.value(p);
                let first = first_uses.get(p as usize).copied().flatten().unwrap_or(0);
                Param {
                    shape: v.shape.0.to_vec(),
                    numel: v.shape.numel(),
                    elem: v.dtype.size(),
                    stored: g.storages[g.storage_of(p) as usize].bytes.fixed,
                    trainable: v.requires_grad,
                    unit: op_unit.get(first as usize).copied().flatten(),
                    first_use: first,
                }
            })
            .collect();
        let (unit_by_op, begun_by_op) = (unit_table(&units), begun_table(&units));
        Layout { params, units, unit_by_op, begun_by_op }
    }

    /// The unit forward op `op` belongs to.
    pub fn unit_of_op(&self, op: u32) -> Option<usize> {
        self.unit_by_op.get(op as usize).copied().filter(|&u| u != NO_UNIT).map(|u| u as usize)
    }

    /// How many units have begun by forward op `op` (their first op is `op` or earlier): units
    /// begin in forward order.
    pub fn units_begun(&self, op: u32) -> usize {
        self.begun_by_op.get(op as usize).map_or(self.units.len(), |&n| n as usize)
    }

    /// Parameters of a unit (`None`: the root).
    pub fn of(&self, unit: Option<usize>) -> impl Iterator<Item = &Param> {
        self.params.iter().filter(move |p| p.unit == unit)
    }

    pub fn numel(&self) -> u64 {
        self.params.iter().map(|p| p.numel).fold(0, u64::saturating_add)
    }

    /// Bytes of the parameters as stored in the simulated graph.
    pub fn bytes(&self) -> u64 {
        self.params.iter().map(|p| p.stored).fold(0, u64::saturating_add)
    }

    /// The parameters that train.
    pub fn trainable(&self) -> impl DoubleEndedIterator<Item = &Param> {
        self.params.iter().filter(|p| p.trainable)
    }

    /// Elements of the trainable parameters.
    pub fn trainable_numel(&self) -> u64 {
        self.trainable().map(|p| p.numel).fold(0, u64::saturating_add)
    }

    /// Bytes of the trainable parameters (and so of their gradients) in the compute dtype.
    pub fn trainable_bytes(&self) -> u64 {
        self.trainable().map(Param::grad_bytes).fold(0, u64::saturating_add)
    }

    /// The optimizer's cost over the trainable parameters, as the single-GPU step counts it
    /// (`memory::Prepared::new`): shapes `shard(shape)`, state in the first trainable one's dtype.
    pub fn optimizer_cost(&self, config: &crate::config::TrainConfig, shard: impl Fn(&Param) -> Vec<u64>, elem: impl Fn(&Param) -> u64) -> crate::memory::OptimizerCost {
        let shapes: Vec<Vec<u64>> = self.trainable().map(shard).collect();
        let refs: Vec<&[u64]> = shapes.iter().map(Vec::as_slice).collect();
        let dtype = match self.trainable().next().map(elem) {
            Some(2) => crate::units::DType::Bf16,
            _ => crate::units::DType::F32,
        };
        crate::memory::optimizer::cost(config.optimizer, config.optimizer_impl, &refs, dtype)
    }
}

/// For each value, the first recorded op that reads it, else the first op at all: one pass over
/// the ops (a sweep over the number of GPUs lays out the model once per size; asking op by op for
/// each of a 70B model's 723 parameters was most of a size's work).
fn first_uses(g: &Graph) -> Vec<Option<u32>> {
    let (mut recorded, mut any) = (vec![None; g.values.len()], vec![None; g.values.len()]);
    for (i, op) in g.ops.iter().enumerate() {
        for &v in &op.inputs {
            let Some(slot) = any.get_mut(v as usize) else { continue };
            slot.get_or_insert(i as u32);
            if op.recorded {
                recorded[v as usize].get_or_insert(i as u32);
            }
        }
    }
    recorded.into_iter().zip(any).map(|(r, a)| r.or(a)).collect()
}

/// For each op up to the last unit's first, how many units begin at or before it.
fn begun_table(units: &[(u32, u32)]) -> Vec<u32> {
    let end = units.last().map_or(0, |&(first, _)| first as usize + 1);
    (0..end).map(|op| units.partition_point(|&(first, _)| first as usize <= op) as u32).collect()
}

/// For each op up to the last unit's end, the first unit (forward order) whose op range holds it:
/// what a scan of `units` finds, ranges that overlap included.
fn unit_table(units: &[(u32, u32)]) -> Vec<u32> {
    let end = units.iter().map(|&(_, last)| last as usize + 1).max().unwrap_or(0);
    let mut table = vec![NO_UNIT; end];
    for (u, &(first, last)) in units.iter().enumerate() {
        for slot in table.iter_mut().take(last as usize + 1).skip(first as usize) {
            if *slot == NO_UNIT {
                *slot = u as u32;
            }
        }
    }
    table
}

/// For each row of the layer table (pre-order, with depths), its unit.
fn unit_rows(r: &Resolved) -> Vec<Option<usize>> {
    let rows = &r.layers;
    let has_repeat = rows.iter().any(|l| l.kind == "repeat");
    let mut out: Vec<Option<usize>> = vec![None; rows.len()];
    let mut stack: Vec<usize> = Vec::new();
    let mut last_key = String::new();
    let mut next = 0usize;
    for i in 0..rows.len() {
        while stack.last().is_some_and(|&t| rows[t].depth >= rows[i].depth) {
            stack.pop();
        }
        out[i] = match stack.last().copied() {
            Some(p) if out[p].is_some() => out[p],
            Some(p) if rows[p].kind == "repeat" => {
                let key = format!("{p}:{}", iteration(&rows[i].path));
                if key != last_key {
                    last_key = key;
                    next += 1;
                }
                Some(next - 1)
            }
            None if !has_repeat && rows[i].block && rows[i].params > 0 => {
                next += 1;
                Some(next - 1)
            }
            _ => None,
        };
        stack.push(i);
    }
    out
}

/// `layers[1].body#2[0]` → `layers[1].body#2`: one iteration of a repeat.
fn iteration(path: &str) -> &str {
    match path.rfind('[') {
        Some(i) if path[..i].contains("body#") => &path[..i],
        _ => path,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tables answer what the scan and the binary search they replaced answered, op by op:
    /// disjoint, touching, nested and overlapping ranges, and ops outside every unit.
    #[test]
    fn the_unit_tables_are_the_searches_they_replace() {
        let scan = |units: &[(u32, u32)], op: u32| units.iter().position(|&(a, b)| a <= op && op <= b);
        for units in [vec![], vec![(3, 5)], vec![(0, 2), (3, 9), (12, 12)], vec![(0, 10), (2, 4), (3, 12)], vec![(5, 7), (1, 6)]] {
            let layout = Layout { unit_by_op: unit_table(&units), begun_by_op: begun_table(&units), units: units.clone(), ..Layout::default() };
            for op in 0..16 {
                assert_eq!(layout.unit_of_op(op), scan(&units, op), "{units:?} op {op}");
                if units.is_sorted() {
                    assert_eq!(layout.units_begun(op), units.partition_point(|&(first, _)| first <= op), "{units:?} op {op}");
                }
            }
        }
    }
}
