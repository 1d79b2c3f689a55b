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
    /// Unit index, or `None` for the root.
    pub unit: Option<usize>,
    /// Forward index of the first recorded op that reads it: backward has its whole gradient
    /// once it is past that op.
    pub first_use: u32,
}

/// The units of a model in forward order, with their op ranges.
#[derive(Debug, Clone, Default)]
pub struct Layout {
    pub params: Vec<Param>,
    /// `(first op, last op)` of each unit, forward order.
    pub units: Vec<(u32, u32)>,
}

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
        let params = g
            .params
            .iter()
            .map(|&p| {
                let v = g.value(p);
                let first = first_use(g, p).unwrap_or(0);
                Param {
                    shape: v.shape.0.clone(),
                    numel: v.shape.numel(),
                    elem: v.dtype.size(),
                    unit: op_unit.get(first as usize).copied().flatten(),
                    first_use: first,
                }
            })
            .collect();
        Layout { params, units }
    }

    /// The unit forward op `op` belongs to.
    pub fn unit_of_op(&self, op: u32) -> Option<usize> {
        self.units.iter().position(|&(a, b)| a <= op && op <= b)
    }

    /// Parameters of a unit (`None`: the root).
    pub fn of(&self, unit: Option<usize>) -> impl Iterator<Item = &Param> {
        self.params.iter().filter(move |p| p.unit == unit)
    }

    pub fn numel(&self) -> u64 {
        self.params.iter().map(|p| p.numel).fold(0, u64::saturating_add)
    }

    /// Bytes of the parameters in the simulated graph.
    pub fn bytes(&self) -> u64 {
        self.params.iter().map(|p| p.numel.saturating_mul(p.elem)).fold(0, u64::saturating_add)
    }
}

fn first_use(g: &Graph, p: u32) -> Option<u32> {
    let reads = |recorded: bool| g.ops.iter().position(|op| (op.recorded || !recorded) && op.inputs.contains(&p));
    reads(true).or_else(|| reads(false)).map(|i| i as u32)
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
