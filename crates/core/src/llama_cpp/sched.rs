//! `ggml_backend_sched` (`ggml/src/ggml-backend.cpp`) splitting a graph over the devices that run
//! its layers, as far as it changes what each backend's compute buffer holds. Read from source,
//! **not measured** (no GPU here; with the CPU alone the graph is unchanged, which the dumps of
//! llama.cpp's own reserved graphs confirm):
//!
//! - each node runs where passes 1 to 4 put it (`sched_assign`: ops with weights follow the
//!   weights, their neighbours follow them); graph inputs are the CPU's ("1.inp"), so their
//!   memory is the host's compute buffer;
//! - consecutive nodes of one backend form a split (`ggml_backend_sched_split_graph`, pass 5);
//!   a source from another backend is copied into the split's backend (`ggml_dup_tensor_layout`,
//!   "4.cpy"), once per (tensor, backend);
//! - the scheduler's graph (`graph_copy`) puts before each split, per copied input, a dependency
//!   on the source (an `OP_NONE` view, so the source lives until the copy) and the copy;
//! - with pipeline parallelism (`n_copies` = `GGML_SCHED_MAX_COPIES` = 4: several GPUs holding
//!   every layer, `-sm layer`, no tensor overrides; `llama_context` constructor) every graph input
//!   and every split input has four copies, flagged input and output so ggml-alloc places them
//!   first and never frees them (passes 5 and 6, and the leafs of `graph_copy`);
//! - op offload (`sched_assign`): the matrix products (and every other op) of weights in host
//!   memory run on the first GPU for batches of 32 tokens or more; each such weight is then an
//!   input of its split, copied into the first GPU's compute buffer. A node whose weight is on
//!   another backend starts a new split when the current one has inputs already (pass 5: "by
//!   starting a new split, the memory of the previously offloaded weights can be reused"), so
//!   each copy lives from its split's start to its last use; views of a CPU layer's KV cache read
//!   on the GPU are copied likewise.
//!
//! Left out: CUDA's `graph_optimize` (its fusion keeps some MoE tensors alive longer), and ops
//! CUDA cannot run (every op of these graphs can).

use std::collections::HashMap;

use super::ggml::{Graph, Op, Tensor, FLAG_INPUT, FLAG_OUTPUT, FLAG_SHARED, FLAG_WEIGHT};
use super::sched_assign::is_view_op;

/// `GGML_SCHED_MAX_COPIES`.
pub const PIPELINE_COPIES: usize = 4;

/// A split: its backend, its first node, and its inputs as (dependency, copy).
type Split = (usize, usize, Vec<(usize, usize)>);

/// The scheduler's graph of `g` (a node's `backend` says where it runs) with `n_copies` copies of
/// each input (1 without pipeline parallelism).
pub fn split(g: Graph, n_copies: usize) -> Graph {
    let one_backend = g.t.iter().all(|t| t.backend == 0);
    if one_backend {
        return g;
    }
    let n_copies = n_copies.max(1);
    let pinned = FLAG_INPUT | FLAG_OUTPUT;
    let mut out = Graph::default();
    for t in &g.t {
        out.push(t.clone());
    }
    let mut leafs = Vec::new();
    if n_copies > 1 {
        // Pass 6: every graph input, `n_copies` times on its own backend (copy 0 is itself).
        for &l in &g.leafs {
            if g.t[l].flags & FLAG_INPUT == 0 {
                continue;
            }
            out.t[l].flags |= pinned;
            leafs.push(l);
            for _ in 1..n_copies {
                let c = out.push(Tensor { flags: pinned, ..g.t[l].clone() });
                leafs.push(c);
            }
        }
    }
    // The backend whose memory a tensor is in: a weight's or cache's buffer, else its node's.
    let home = |t: &[Tensor], x: usize| t[t[x].view_src.unwrap_or(x)].backend;
    let is_weight = |t: &[Tensor], x: usize| t[x].flags & FLAG_WEIGHT != 0 && t[x].flags & FLAG_SHARED == 0;
    let mut copies: HashMap<(usize, usize), usize> = HashMap::new();
    let mut split_copies = Vec::new();
    // Pass 5: (backend, first node, the split's inputs as (dependency, copy)).
    let mut splits: Vec<Split> = Vec::new();
    let first = g.nodes.iter().find(|&&n| !is_view_op(g.t[n].op)).map_or(0, |&n| g.t[n].backend);
    splits.push((first, 0, Vec::new()));
    for i in 0..g.nodes.len() {
        let n = g.nodes[i];
        if is_view_op(out.t[n].op) {
            continue;
        }
        let b = out.t[n].backend;
        let (cur, _, inputs) = splits.last().expect("one split at least");
        let need_new = b == *cur && !inputs.is_empty() && out.t[n].src.iter().any(|&s| is_weight(&out.t, s) && home(&out.t, s) != b);
        if b != *cur || need_new {
            splits.push((b, i, Vec::new()));
        }
        for k in 0..out.t[n].src.len() {
            let s = out.t[n].src[k];
            let root = out.t[s].view_src.unwrap_or(s);
            if out.t[root].flags & FLAG_SHARED != 0 || out.t[s].backend == b || home(&out.t, s) == b {
                continue;
            }
            let c = match copies.get(&(s, b)) {
                Some(&c) => c,
                None => {
                    let x = &out.t[s];
                    let flags = if n_copies > 1 { pinned } else { 0 };
                    let copy = Tensor { op: Op::None, ty: x.ty, ne: x.ne, nb: x.nb, flags, external: false, view_src: None, src: vec![], backend: b };
                    let dep = Tensor { view_src: Some(root), src: vec![s], backend: x.backend, flags: 0, ..copy.clone() };
                    let d = out.push(dep);
                    let c = out.push(copy.clone());
                    split_copies.push(c);
                    for _ in 1..n_copies {
                        let extra = out.push(copy.clone());
                        split_copies.push(extra);
                    }
                    copies.insert((s, b), c);
                    splits.last_mut().expect("one split at least").2.push((d, c));
                    c
                }
            };
            out.t[n].src[k] = c;
        }
    }
    // `graph_copy`: each split's input dependencies and copies, then its nodes.
    for (j, (_, start, inputs)) in splits.iter().enumerate() {
        let end = splits.get(j + 1).map_or(g.nodes.len(), |s| s.1);
        for &(d, c) in inputs {
            out.nodes.push(d);
            out.nodes.push(c);
        }
        out.nodes.extend_from_slice(&g.nodes[*start..end]);
    }
    if n_copies > 1 {
        leafs.extend(split_copies);
    }
    leafs.extend_from_slice(&g.leafs);
    out.leafs = leafs;
    out
}
