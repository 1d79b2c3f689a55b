//! `ggml_backend_sched` (`ggml/src/ggml-backend.cpp`) splitting a graph over the devices that run
//! its layers, as far as it changes what each backend's compute buffer holds. Read from source,
//! **not measured** (no GPU here; with the CPU alone the graph is unchanged, which the dumps of
//! llama.cpp's own reserved graphs confirm):
//!
//! - each node runs where its layer's weights are (`ggml_backend_sched_backend_id_from_cur`: ops
//!   with weights follow the weights; the builder gives every node its layer's device); graph
//!   inputs are the CPU's ("1.inp"), so their memory is the host's compute buffer;
//! - consecutive nodes of one backend form a split (`ggml_backend_sched_split_graph`, pass 5);
//!   a source from another backend is copied into the split's backend (`ggml_dup_tensor_layout`,
//!   "4.cpy"), once per (tensor, backend);
//! - the scheduler's graph (`graph_copy`) puts before each split, per copied input, a dependency
//!   on the source (an `OP_NONE` view, so the source lives until the copy) and the copy;
//! - with pipeline parallelism (`n_copies` = `GGML_SCHED_MAX_COPIES` = 4: several GPUs holding
//!   every layer, `-sm layer`, no tensor overrides; `llama_context` constructor) every graph input
//!   and every split input has four copies, flagged input and output so ggml-alloc places them
//!   first and never frees them (passes 5 and 6, and the leafs of `graph_copy`).
//!
//! Left out: `op_offload` (batches of ≥ 32 tokens run the matrix products of CPU-held weights on
//! the first GPU, copying those weights into its compute buffer) and the backend passes that move
//! weightless nodes next to their neighbours.

use std::collections::HashMap;

use super::ggml::{Graph, Op, Tensor, FLAG_INPUT, FLAG_OUTPUT};

/// `GGML_SCHED_MAX_COPIES`.
pub const PIPELINE_COPIES: usize = 4;

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
    let home = |t: &[Tensor], x: usize| t[t[x].view_src.unwrap_or(x)].backend;
    let mut copies: HashMap<(usize, usize), usize> = HashMap::new();
    let mut split_copies = Vec::new();
    let mut i = 0;
    while i < g.nodes.len() {
        let b = g.t[g.nodes[i]].backend;
        let mut j = i;
        while j < g.nodes.len() && g.t[g.nodes[j]].backend == b {
            j += 1;
        }
        let mut inputs = Vec::new();
        for &n in &g.nodes[i..j] {
            for k in 0..out.t[n].src.len() {
                let s = out.t[n].src[k];
                let root = out.t[s].view_src.unwrap_or(s);
                if out.t[root].external || home(&out.t, s) == b {
                    continue;
                }
                let c = *copies.entry((s, b)).or_insert_with(|| {
                    let x = &out.t[s];
                    let flags = if n_copies > 1 { pinned } else { 0 };
                    let copy = Tensor { op: Op::None, ty: x.ty, ne: x.ne, nb: x.nb, flags, external: false, view_src: None, src: vec![], backend: b };
                    let dep = Tensor { view_src: Some(root), src: vec![s], backend: home(&out.t, s), flags: 0, ..copy.clone() };
                    let d = out.push(dep);
                    let c = out.push(copy.clone());
                    split_copies.push(c);
                    for _ in 1..n_copies {
                        let extra = out.push(copy.clone());
                        split_copies.push(extra);
                    }
                    inputs.push((d, c));
                    c
                });
                out.t[n].src[k] = c;
            }
        }
        for (d, c) in inputs {
            out.nodes.push(d);
            out.nodes.push(c);
        }
        out.nodes.extend_from_slice(&g.nodes[i..j]);
        i = j;
    }
    if n_copies > 1 {
        leafs.extend(split_copies);
    }
    leafs.extend_from_slice(&g.leafs);
    out.leafs = leafs;
    out
}
