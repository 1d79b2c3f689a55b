//! `ggml_gallocr` (`ggml/src/ggml-alloc.c`) sizing one graph: the high-water mark of each
//! buffer's dynamic allocator when the graph's tensors are allocated in graph order and freed
//! after their last consumer ran. Read from source and followed step by step:
//!
//! - `ggml_gallocr_alloc_graph_impl`: the leafs first, then the graph inputs (`FLAG_INPUT`) while
//!   children and views are counted, then for each node its sources and itself, then each source
//!   whose children and views are all done is freed (a view's last use frees its `view_src`);
//!   outputs (`FLAG_OUTPUT`) are never freed; tensors with memory elsewhere (weights, the KV cache)
//!   and views take nothing;
//! - `ggml_gallocr_allocate_node`: an op of `ggml_op_can_inplace` takes over a source it alone
//!   consumes (same layout, owned, not an output) and frees the rest of that source's block
//!   (`ggml_gallocr_free_extra_space`);
//! - `ggml_dyn_tallocr_alloc` / `_free_bytes`: sizes rounded to the buffer's alignment; the best
//!   fitting free block other than the last (the smallest that fits, the later on ties), else the
//!   last block, which grows the buffer; freed ranges merge with their neighbours. One chunk per
//!   buffer (`max_size` is unbounded for the CPU and CUDA buffer types).

use super::ggml::{Graph, Op, Tensor, FLAG_INPUT, FLAG_OUTPUT};
use crate::gguf::GgmlType;

/// A backend's compute buffer type: its alignment, and whether it is CUDA's (whose
/// `get_alloc_size` differs from `ggml_nbytes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufType {
    pub align: u64,
    pub cuda: bool,
}

impl BufType {
    pub const CPU: BufType = BufType { align: 32, cuda: false };
    /// `ggml_backend_cuda_buffer_type_get_alignment`: 128.
    pub const CUDA: BufType = BufType { align: 128, cuda: true };

    /// `ggml_backend_buft_get_alloc_size`. CUDA (`ggml_backend_cuda_buffer_type_get_alloc_size`,
    /// read from source, not measured): a flash-attention node also holds f16 copies of a
    /// quantized K and V (`ggml_cuda_flash_attn_ext_get_f16_extra_data`, 128-aligned) when its
    /// kernel needs them: the MMA/tile kernels of a batch always, the vector kernel of single
    /// tokens only without a vector case for the K/V type pair (taken as: the types differ).
    /// A quantized tensor on CUDA (the scheduler's copy of a quantized weight or KV view) gets
    /// its last row padded to `MATRIX_ROW_PADDING` = 512 elements, as in the model buffers.
    pub fn alloc_size(self, g: &Graph, t: &Tensor) -> u64 {
        let n = t.nbytes();
        if self.cuda && t.ty.is_quantized() && !t.ne[0].is_multiple_of(512) {
            return n + t.ty.row_bytes(512 - t.ne[0] % 512);
        }
        if !self.cuda || t.op != Op::FlashAttnExt || t.src.len() < 3 {
            return n;
        }
        let (q, k, v) = (&g.t[t.src[0]], &g.t[t.src[1]], &g.t[t.src[2]]);
        let batch = q.ne[1] > 1;
        let need = batch || k.ty != v.ty;
        let mut end = n;
        if need && k.ty != GgmlType::F16 {
            end = end.div_ceil(128) * 128 + k.nelements().saturating_mul(2);
        }
        let v_is_k = v.view_src.is_some() && v.view_src == k.view_src;
        if need && v.ty != GgmlType::F16 && !v_is_k {
            end = end.div_ceil(128) * 128 + v.nelements().saturating_mul(2);
        }
        end
    }
}

#[derive(Debug, Clone, Copy)]
struct Block {
    offset: u64,
    size: u64,
}

#[derive(Debug)]
struct DynAlloc {
    align: u64,
    blocks: Vec<Block>,
    max_size: u64,
}

const HUGE: u64 = u64::MAX / 4;

impl DynAlloc {
    fn new(align: u64) -> DynAlloc {
        DynAlloc { align, blocks: vec![Block { offset: 0, size: HUGE }], max_size: 0 }
    }

    fn pad(&self, size: u64) -> u64 {
        size.div_ceil(self.align).saturating_mul(self.align)
    }

    fn alloc(&mut self, size: u64) -> u64 {
        let size = self.pad(size);
        if self.blocks.is_empty() {
            // Only a hostile size can exhaust the last block.
            self.blocks.push(Block { offset: self.max_size, size: HUGE });
        }
        let n = self.blocks.len();
        let mut best: Option<usize> = None;
        let mut best_size = u64::MAX;
        for (i, b) in self.blocks[..n - 1].iter().enumerate() {
            if b.size >= size && b.size <= best_size {
                best = Some(i);
                best_size = b.size;
            }
        }
        let i = best.unwrap_or(n - 1);
        let b = &mut self.blocks[i];
        let addr = b.offset;
        b.offset = b.offset.saturating_add(size);
        b.size = b.size.saturating_sub(size);
        if b.size == 0 {
            self.blocks.remove(i);
        }
        self.max_size = self.max_size.max(addr.saturating_add(size));
        addr
    }

    fn free(&mut self, offset: u64, size: u64) {
        let size = self.pad(size);
        for i in 0..self.blocks.len() {
            let b = self.blocks[i];
            if b.offset.saturating_add(b.size) == offset {
                self.blocks[i].size = self.blocks[i].size.saturating_add(size);
                if i + 1 < self.blocks.len() && self.blocks[i].offset.saturating_add(self.blocks[i].size) == self.blocks[i + 1].offset {
                    self.blocks[i].size = self.blocks[i].size.saturating_add(self.blocks[i + 1].size);
                    self.blocks.remove(i + 1);
                }
                return;
            }
            if offset.saturating_add(size) == b.offset {
                self.blocks[i].offset = offset;
                self.blocks[i].size = self.blocks[i].size.saturating_add(size);
                if i > 0 && self.blocks[i - 1].offset.saturating_add(self.blocks[i - 1].size) == self.blocks[i].offset {
                    self.blocks[i - 1].size = self.blocks[i - 1].size.saturating_add(self.blocks[i].size);
                    self.blocks.remove(i);
                }
                return;
            }
        }
        let pos = self.blocks.iter().position(|b| b.offset >= offset).unwrap_or(self.blocks.len());
        self.blocks.insert(pos, Block { offset, size });
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct HashNode {
    n_children: i64,
    n_views: i64,
    buffer: usize,
    addr: u64,
    allocated: bool,
}

struct Galloc<'g> {
    g: &'g Graph,
    h: Vec<HashNode>,
    bufs: Vec<DynAlloc>,
    types: Vec<BufType>,
}

impl Galloc<'_> {
    fn is_own(&self, t: usize) -> bool {
        self.h[t].allocated
    }

    fn allocate(&mut self, t: usize, buffer: usize) {
        let x = &self.g.t[t];
        if x.external || self.is_own(t) || x.view_src.is_some() {
            return;
        }
        self.h[t].allocated = true;
        if x.op.can_inplace() {
            for &p in &x.src {
                let px = &self.g.t[p];
                if !self.is_own(p) {
                    continue;
                }
                let out = px.flags & FLAG_OUTPUT != 0 || px.view_src.is_some_and(|v| self.g.t[v].flags & FLAG_OUTPUT != 0);
                if out || !x.same_layout(px) {
                    continue;
                }
                let ph = self.h[p];
                if ph.n_children == 1 && ph.n_views == 0 {
                    // A view is never owned (`allocate` skips views), so `is_own` already
                    // excluded ggml-alloc's "reusing view parent" branch.
                    self.h[t].buffer = ph.buffer;
                    self.h[t].addr = ph.addr;
                    self.h[p].allocated = false;
                    let ty = self.types[ph.buffer];
                    let (ps, ns) = (ty.alloc_size(self.g, px), ty.alloc_size(self.g, x));
                    let a = &mut self.bufs[ph.buffer];
                    let (ps, ns) = (a.pad(ps), a.pad(ns));
                    if ps > ns {
                        a.free(ph.addr.saturating_add(ns), ps - ns);
                    }
                    return;
                }
            }
        }
        self.h[t].buffer = buffer;
        let size = self.types[buffer].alloc_size(self.g, x);
        self.h[t].addr = self.bufs[buffer].alloc(size);
    }

    fn free(&mut self, t: usize) {
        if self.g.t[t].flags & FLAG_OUTPUT != 0 {
            return;
        }
        let hn = self.h[t];
        let size = self.types[hn.buffer].alloc_size(self.g, &self.g.t[t]);
        self.bufs[hn.buffer].free(hn.addr, size);
        self.h[t].allocated = false;
    }
}

/// The compute buffer of each backend (`types[b]` its buffer type) for graph `g`:
/// `ggml_gallocr_reserve_n`'s chunk sizes. A tensor's backend is its `backend` field.
pub fn reserve(g: &Graph, types: &[BufType]) -> Vec<u64> {
    let bufs = types.iter().map(|t| DynAlloc::new(t.align)).collect();
    let mut s = Galloc { g, h: vec![HashNode::default(); g.t.len()], bufs, types: types.to_vec() };
    for &l in &g.leafs {
        s.allocate(l, g.t[l].backend);
    }
    for &n in &g.nodes {
        let x = &g.t[n];
        // `OP_NONE` views are the scheduler's dependencies, not views that keep memory.
        if let (Some(v), true) = (x.view_src, x.op != super::ggml::Op::None) {
            s.h[v].n_views += 1;
        }
        if x.flags & FLAG_INPUT != 0 {
            s.allocate(n, x.backend);
        }
        for &p in &x.src {
            s.h[p].n_children += 1;
            if g.t[p].flags & FLAG_INPUT != 0 {
                s.allocate(p, x.backend);
            }
        }
    }
    for &n in &g.nodes {
        let x = &g.t[n];
        for &p in &x.src {
            s.allocate(p, x.backend);
        }
        s.allocate(n, x.backend);
        for &p in &x.src {
            s.h[p].n_children -= 1;
            let ph = s.h[p];
            if ph.n_children == 0 && ph.n_views == 0 {
                if let Some(v) = g.t[p].view_src {
                    s.h[v].n_views -= 1;
                    let vh = s.h[v];
                    if vh.n_views == 0 && vh.n_children == 0 && vh.allocated {
                        s.free(v);
                    }
                } else if ph.allocated {
                    s.free(p);
                }
            }
        }
    }
    s.bufs.iter().map(|b| b.max_size).collect()
}

#[cfg(test)]
mod tests {
    use super::DynAlloc;

    /// `ggml_dyn_tallocr`: best fit among the free blocks but the last, merging on free.
    #[test]
    fn best_fit_reuses_the_smallest_hole_and_merges() {
        let mut a = DynAlloc::new(32);
        let x = a.alloc(100); // 0..128
        let y = a.alloc(64); // 128..192
        let z = a.alloc(200); // 192..416
        let _w = a.alloc(32); // 416..448
        a.free(x, 100);
        a.free(z, 200);
        // Holes of 128 and 224: 120 bytes go to the 128 hole.
        assert_eq!(a.alloc(120), 0);
        a.free(0, 120);
        a.free(y, 64); // merges 0..128, 128..192 and 192..416 into one hole
        assert_eq!(a.blocks[0].offset, 0);
        assert_eq!(a.blocks[0].size, 416);
        assert_eq!(a.max_size, 448);
    }

    #[test]
    fn absurd_sizes_saturate_without_panicking() {
        let mut a = DynAlloc::new(32);
        let x = a.alloc(u64::MAX);
        a.alloc(u64::MAX / 2);
        a.free(x, u64::MAX);
        assert_eq!(a.max_size, u64::MAX);
    }
}
