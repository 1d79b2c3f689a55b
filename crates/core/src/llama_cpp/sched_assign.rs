//! `ggml_backend_sched_split_graph`'s passes 1 to 4 (`ggml/src/ggml-backend.cpp`, llama.cpp as
//! vendored by llama-cpp-python 0.3.36): which backend runs each node. Read from source, **not
//! measured** (no GPU here; with the CPU alone every node is the CPU's and nothing changes).
//!
//! Backends are numbered as the compute buffers are here: 0 the CPU, `1..=n_gpus` the GPUs. The
//! scheduler's priority order is llama.cpp's list of backends (`llama_context` constructor): the
//! GPUs in order, then the CPU last.
//!
//! - Pass 1 (`ggml_backend_sched_backend_id_from_cur`): a node the caller pinned keeps its
//!   backend ([`FLAG_PINNED`]: `graph_get_cb`'s layer norms); a view of a weight or of the KV cache
//!   (`view_src` in a buffer: "1.vsrc") runs where that buffer is; graph inputs are the CPU's;
//!   other nodes but `ROPE` and `FLASH_ATTN_EXT` follow their first weight source ("1.wgt"),
//!   except that a weight in host memory whose op a GPU wants to offload runs on the first GPU
//!   ("1.off": `op_offload`, on by default, `--no-op-offload` turns it off; CUDA's `offload_op`,
//!   `ggml_backend_cuda_device_offload_op`, wants it when `get_op_batch_size(op) >= 32`,
//!   `GGML_OP_OFFLOAD_MIN_BATCH`).
//! - Pass 2: four sweeps over the non-view nodes: GPU backends spread down, then up (the CPU
//!   stops a sweep), then any backend down and up.
//! - Pass 3: a node still unassigned goes to the backend holding most of its sources (first in
//!   priority order on ties). The upgrade to a higher-priority backend of the same buffer type
//!   never applies here (no two of these backends share one).
//! - Pass 4: views follow their `view_src`; unassigned sources follow their consumer.
//!
//! Every op of these graphs is taken to run on CUDA (`ggml_backend_cuda_device_supports_op`
//! accepts them for the types used here).

use super::ggml::{Graph, Op, Tensor, FLAG_INPUT, FLAG_PINNED, FLAG_WEIGHT};

const NONE: usize = usize::MAX;
const CPU: usize = 0;

/// `GGML_OP_OFFLOAD_MIN_BATCH`'s default (`ggml_backend_cuda_reg_get_device`, `ggml-cuda.cu`).
pub const OP_OFFLOAD_MIN_BATCH: u64 = 32;

/// `ggml_is_view_op`.
pub fn is_view_op(op: Op) -> bool {
    matches!(op, Op::View | Op::Reshape | Op::Permute | Op::Transpose)
}

/// `get_op_batch_size` (`ggml-cuda.cu`).
fn op_batch_size(t: &Tensor) -> u64 {
    match t.op {
        Op::GetRows => 0,
        Op::MulMat => t.ne[1],
        Op::MulMatId | Op::Rope => t.ne[2],
        _ => t.ne[1] * t.ne[2] * t.ne[3],
    }
}

/// Sets every node's `backend` as the scheduler would for `n_gpus` GPUs (none: unchanged).
pub fn assign(g: &mut Graph, n_gpus: usize, op_offload: bool) {
    if n_gpus == 0 {
        return;
    }
    // Priority order: the GPUs, then the CPU.
    let prio: Vec<usize> = (1..=n_gpus).chain([CPU]).collect();
    let mut be = vec![NONE; g.t.len()];
    for (i, t) in g.t.iter().enumerate() {
        if t.external {
            be[i] = t.backend;
        } else if t.flags & FLAG_INPUT != 0 {
            be[i] = CPU;
        }
    }
    // Pass 1.
    for &n in &g.nodes {
        let t = &g.t[n];
        if t.flags & FLAG_PINNED != 0 {
            be[n] = t.backend;
            continue;
        }
        if let Some(v) = t.view_src.filter(|&v| g.t[v].external) {
            be[n] = g.t[v].backend;
            continue;
        }
        if matches!(t.op, Op::Rope | Op::FlashAttnExt) {
            continue;
        }
        let weight = t.src.iter().copied().find(|&s| g.t[s].flags & FLAG_WEIGHT != 0 && g.t[s].view_src.is_none());
        if let Some(w) = weight {
            let wb = g.t[w].backend;
            let offload = op_offload && wb == CPU && op_batch_size(t) >= OP_OFFLOAD_MIN_BATCH;
            be[n] = if offload { prio[0] } else { wb };
        }
    }
    // Pass 2.
    let order: Vec<usize> = g.nodes.iter().copied().filter(|&n| !is_view_op(g.t[n].op)).collect();
    expand(order.iter().copied(), &mut be, true);
    expand(order.iter().rev().copied(), &mut be, true);
    expand(order.iter().copied(), &mut be, false);
    expand(order.iter().rev().copied(), &mut be, false);
    // Pass 3: the backend with the most sources in memory it can use.
    for &n in &order {
        if be[n] != NONE {
            continue;
        }
        let mut best = None;
        for &b in &prio {
            let count = g.t[n].src.iter().filter(|&&s| home(g, &be, s) == Some(b)).count();
            if best.is_none_or(|(c, _)| count > c) {
                best = Some((count, b));
            }
        }
        be[n] = best.map_or(prio[0], |(_, b)| b);
    }
    // Pass 4.
    for i in 0..g.nodes.len() {
        let n = g.nodes[i];
        if be[n] == NONE {
            if let Some(v) = g.t[n].view_src {
                be[n] = be[v];
            }
        }
        for k in 0..g.t[n].src.len() {
            let s = g.t[n].src[k];
            if be[s] == NONE {
                be[s] = g.t[s].view_src.map_or(be[n], |v| be[v]);
            }
        }
        if be[n] == NONE {
            be[n] = prio[0];
        }
    }
    for (t, b) in g.t.iter_mut().zip(be) {
        if b != NONE && !t.external {
            t.backend = b;
        }
    }
}

/// The backend whose buffer type a source's memory is in, when known
/// (`ggml_backend_sched_buffer_supported`): a weight's or cache's buffer, else its backend.
fn home(g: &Graph, be: &[usize], s: usize) -> Option<usize> {
    let root = g.t[s].view_src.unwrap_or(s);
    if g.t[root].external {
        return Some(g.t[root].backend);
    }
    [be[s], be[root]].into_iter().find(|&b| b != NONE)
}

fn expand(order: impl Iterator<Item = usize>, be: &mut [usize], gpus_only: bool) {
    let mut cur = NONE;
    for n in order {
        if be[n] != NONE {
            cur = if gpus_only && be[n] == CPU { NONE } else { be[n] };
        } else if cur != NONE {
            be[n] = cur;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::gallocr::{reserve, BufType};
    use super::super::ggml::{Graph, FLAG_WEIGHT};
    use super::assign;
    use crate::gguf::GgmlType;

    /// `x` (a graph input) through two f16 weights in host memory and a unary op:
    /// `unary(W2 · (W1 · x))` for `n` tokens; returns the graph and its nodes.
    fn two_products(n: u64) -> (Graph, [usize; 3]) {
        let mut g = Graph::default();
        let x = g.input(GgmlType::F32, [256, n, 1, 1]);
        let weight = |g: &mut Graph| {
            let w = g.external(GgmlType::F16, [256, 256, 1, 1]);
            g.t[w].flags |= FLAG_WEIGHT;
            w
        };
        let (w1, w2) = (weight(&mut g), weight(&mut g));
        let y1 = g.mul_mat(w1, x);
        let y2 = g.mul_mat(w2, y1);
        let y3 = g.unary(y2);
        g.expand(y3);
        (g, [y1, y2, y3])
    }

    fn buffers(g: Graph) -> Vec<u64> {
        reserve(&super::super::sched::split(g, 1), &[BufType::CPU, BufType::CUDA])
    }

    #[test]
    fn large_batches_run_host_weights_on_the_first_gpu_one_copy_at_a_time() {
        let (mut g, nodes) = two_products(64);
        assign(&mut g, 1, true);
        assert!(nodes.iter().all(|&n| g.t[n].backend == 1), "offloaded, and the unary op follows");
        // Each weight copy (128 KiB) starts a split of its own, so the second reuses the first's
        // memory: W1' + x' + y1, then W2' and y2 in the hole of W1' and x' (both copies at once
        // would need 384 KiB).
        assert_eq!(buffers(g), vec![64 << 10, 256 << 10]);
    }

    #[test]
    fn small_batches_and_no_op_offload_stay_on_the_cpu() {
        for (n, offload) in [(16, true), (64, false)] {
            let (mut g, nodes) = two_products(n);
            assign(&mut g, 1, offload);
            assert!(nodes.iter().all(|&n| g.t[n].backend == 0), "{n} tokens, op_offload {offload}");
            assert_eq!(buffers(g)[1], 0);
        }
    }
}
