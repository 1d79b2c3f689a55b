//! `ggml_backend_sched` (`ggml/src/ggml-backend.cpp`) splitting a graph over the devices that run
//! its layers, as far as it changes what each backend's compute buffer holds. Read from source,
//! **not measured** (no GPU here; with the CPU alone the graph is unchanged, which the dumps of
//! llama.cpp's own reserved graphs confirm):
//!
//! - each node runs where its layer's weights are (`ggml_backend_sched_backend_id_from_cur`: ops
//!   with weights follow the weights; the builder gives every node its layer's device); graph
//!   inputs are the CPU's ("1.inp");
//! - consecutive nodes of one backend form a split (`ggml_backend_sched_split_graph`, pass 5);
//!   a source from another backend is copied into the split's backend (`ggml_dup_tensor_layout`,
//!   "4.cpy"), once per (tensor, backend);
//! - the scheduler's graph (`graph_copy`) puts before each split, per copied input, a dependency
//!   on the source (an `OP_NONE` view, so the source lives until the copy) and the copy.
//!
//! Left out: `op_offload` (batches of ≥ 32 tokens run the matrix products of CPU-held weights on
//! the first GPU, copying those weights into its compute buffer), pipeline parallelism's four
//! copies of every split input (several GPUs, all layers offloaded), and the backend passes that
//! move weightless nodes next to their neighbours.

use std::collections::HashMap;

use super::ggml::{Graph, Op, Tensor};

/// The scheduler's graph of `g` over `n_backends` backends (a node's `backend` says where it runs).
pub fn split(g: Graph, n_backends: usize) -> Graph {
    if n_backends <= 1 || g.nodes.iter().all(|&n| g.t[n].backend == g.t[g.nodes[0]].backend) && g.t.iter().all(|t| t.backend == 0) {
        return g;
    }
    let mut out = Graph::default();
    for t in &g.t {
        out.push(t.clone());
    }
    out.leafs = g.leafs.clone();
    let home = |t: &[Tensor], x: usize| t[t[x].view_src.unwrap_or(x)].backend;
    let mut copies: HashMap<(usize, usize), usize> = HashMap::new();
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
                    let copy = Tensor { op: Op::None, ty: x.ty, ne: x.ne, nb: x.nb, flags: 0, external: false, view_src: None, src: vec![], backend: b };
                    let dep = Tensor { op: Op::None, view_src: Some(root), src: vec![s], backend: home(&out.t, s), ..copy.clone() };
                    let d = out.push(dep);
                    let c = out.push(copy);
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
    out
}
