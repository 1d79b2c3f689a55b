//! A ggml context without data: the tensors of one graph, their shapes and strides, the ops
//! that made them, and `ggml_build_forward_expand`'s node order. Enough of `ggml/src/ggml.c`
//! (llama.cpp as vendored by llama-cpp-python 0.3.36) for `gallocr` to allocate the graph as
//! `ggml-alloc.c` does. Each constructor follows the ggml function of the same name: the result's
//! type, shape and strides, whether it is a view (and of what), and its sources in order.

use crate::gguf::GgmlType;

/// The ops the graphs use; `can_inplace` is `ggml_op_can_inplace` (`ggml-alloc.c`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    None,
    Add,
    AddId,
    Mul,
    Div,
    Scale,
    Unary,
    Glu,
    RmsNorm,
    Norm,
    MulMat,
    MulMatId,
    GetRows,
    SetRows,
    Cpy,
    Cont,
    Reshape,
    View,
    Permute,
    Transpose,
    Rope,
    SoftMax,
    FlashAttnExt,
    Argsort,
    TopK,
    SumRows,
    Concat,
    Repeat,
    Clamp,
    Fill,
    /// Any other op that writes a new tensor and is not in `ggml_op_can_inplace`.
    Other,
}

impl Op {
    pub fn can_inplace(self) -> bool {
        matches!(self, Op::Fill | Op::Scale | Op::Add | Op::AddId | Op::Mul | Op::Div | Op::Unary | Op::Rope | Op::RmsNorm | Op::Clamp | Op::SoftMax)
    }
}

/// `GGML_TENSOR_FLAG_INPUT`, `GGML_TENSOR_FLAG_OUTPUT`.
pub const FLAG_INPUT: u8 = 1;
pub const FLAG_OUTPUT: u8 = 2;
/// vramcalc's own marks (not ggml flags), for the scheduler (`sched_assign`): a weight
/// (`GGML_BACKEND_BUFFER_USAGE_WEIGHTS`) in the buffer of its `backend`; a weight loaded once per
/// device that uses it (`rope_freqs`: `TENSOR_DUPLICATED`), so never copied; a node whose backend
/// the caller set (`ggml_backend_sched_set_tensor_backend`).
pub const FLAG_WEIGHT: u8 = 4;
pub const FLAG_SHARED: u8 = 8;
pub const FLAG_PINNED: u8 = 16;

#[derive(Debug, Clone)]
pub struct Tensor {
    pub op: Op,
    pub ty: GgmlType,
    pub ne: [u64; 4],
    pub nb: [u64; 4],
    pub flags: u8,
    /// Memory outside the compute buffer (weights, the KV cache): `data` or `buffer` set.
    pub external: bool,
    /// The tensor whose memory a view shares (always a non-view: `ggml_new_tensor_impl` follows
    /// a view's own `view_src`).
    pub view_src: Option<usize>,
    pub src: Vec<usize>,
    /// Backend (buffer id) this tensor's node runs on.
    pub backend: usize,
}

impl Tensor {
    /// `ggml_nbytes`.
    pub fn nbytes(&self) -> u64 {
        if self.ne.contains(&0) {
            return 0;
        }
        // Saturating: a hostile header's sizes must not overflow (nothing real comes near).
        let first = if self.ty.blck == 1 { self.ty.bytes } else { self.ne[0].saturating_mul(self.nb[0]) / self.ty.blck };
        let rest = if self.ty.blck == 1 { 0..4 } else { 1..4 };
        rest.fold(first, |a, i| a.saturating_add((self.ne[i] - 1).saturating_mul(self.nb[i])))
    }
    pub fn nelements(&self) -> u64 {
        self.ne.iter().fold(1u64, |a, &x| a.saturating_mul(x))
    }
    /// `ggml_are_same_layout`.
    pub fn same_layout(&self, o: &Tensor) -> bool {
        self.ty == o.ty && self.ne == o.ne && self.nb == o.nb
    }
}

/// Contiguous strides (`ggml_new_tensor_impl`).
pub fn strides(ty: GgmlType, ne: [u64; 4]) -> [u64; 4] {
    let mut nb = [ty.bytes, 0, 0, 0];
    nb[1] = ty.bytes.saturating_mul(ne[0] / ty.blck.max(1));
    nb[2] = nb[1].saturating_mul(ne[1]);
    nb[3] = nb[2].saturating_mul(ne[2]);
    nb
}

pub type T = usize;

/// The tensors of one graph and its nodes and leafs in `ggml_build_forward_expand` order.
#[derive(Debug, Default)]
pub struct Graph {
    pub t: Vec<Tensor>,
    pub nodes: Vec<T>,
    pub leafs: Vec<T>,
    visited: Vec<bool>,
    /// The backend new tensors run on (set by the builder per layer).
    pub backend: usize,
}

impl Graph {
    pub fn push(&mut self, x: Tensor) -> T {
        self.t.push(x);
        self.visited.push(false);
        self.t.len() - 1
    }

    fn raw(&mut self, op: Op, ty: GgmlType, ne: [u64; 4], view_of: Option<(T, [u64; 4])>, src: Vec<T>) -> T {
        let (view_src, nb) = match view_of {
            Some((a, nb)) => (Some(self.t[a].view_src.unwrap_or(a)), nb),
            None => (None, strides(ty, ne)),
        };
        let backend = self.backend;
        self.push(Tensor { op, ty, ne, nb, flags: 0, external: false, view_src, src, backend })
    }

    /// A tensor outside the compute buffer: a weight or a KV cache.
    pub fn external(&mut self, ty: GgmlType, ne: [u64; 4]) -> T {
        let t = self.raw(Op::None, ty, ne, None, vec![]);
        self.t[t].external = true;
        t
    }

    /// A graph input (`ggml_set_input`), allocated in the compute buffer.
    /// On the CPU (backend 0): the scheduler's "1.inp".
    pub fn input(&mut self, ty: GgmlType, ne: [u64; 4]) -> T {
        let t = self.raw(Op::None, ty, ne, None, vec![]);
        self.t[t].flags |= FLAG_INPUT;
        self.t[t].backend = 0;
        t
    }

    pub fn set_output(&mut self, t: T) {
        self.t[t].flags |= FLAG_OUTPUT;
    }

    pub fn ne(&self, t: T) -> [u64; 4] {
        self.t[t].ne
    }

    /// `ggml_build_forward_expand`: depth-first over the sources, left to right.
    pub fn expand(&mut self, t: T) {
        if self.visited[t] {
            return;
        }
        self.visited[t] = true;
        for i in 0..self.t[t].src.len() {
            let s = self.t[t].src[i];
            self.expand(s);
        }
        if self.t[t].op == Op::None {
            self.leafs.push(t);
        } else {
            self.nodes.push(t);
        }
    }

    // ---- ops (ggml.c) ----

    /// `ggml_dup_tensor`-shaped result of `op` (same type and shape as `a`, contiguous).
    pub fn unary_like(&mut self, op: Op, a: T, src: Vec<T>) -> T {
        let (ty, ne) = (self.t[a].ty, self.t[a].ne);
        self.raw(op, ty, ne, None, src)
    }
    pub fn add(&mut self, a: T, b: T) -> T {
        self.unary_like(Op::Add, a, vec![a, b])
    }
    pub fn mul(&mut self, a: T, b: T) -> T {
        self.unary_like(Op::Mul, a, vec![a, b])
    }
    pub fn div(&mut self, a: T, b: T) -> T {
        self.unary_like(Op::Div, a, vec![a, b])
    }
    pub fn scale(&mut self, a: T) -> T {
        self.unary_like(Op::Scale, a, vec![a])
    }
    /// `ggml_scale_inplace(a)`: a view of `a`.
    pub fn scale_inplace(&mut self, a: T) -> T {
        self.view_tensor(Op::Scale, a, vec![a])
    }
    pub fn unary(&mut self, a: T) -> T {
        self.unary_like(Op::Unary, a, vec![a])
    }
    pub fn rms_norm(&mut self, a: T) -> T {
        self.unary_like(Op::RmsNorm, a, vec![a])
    }
    /// `ggml_norm` (layer norm without its weight and bias).
    pub fn norm(&mut self, a: T) -> T {
        self.unary_like(Op::Norm, a, vec![a])
    }
    pub fn cont(&mut self, a: T) -> T {
        self.unary_like(Op::Cont, a, vec![a])
    }
    /// `ggml_rope_ext(a, pos, freq_factors)`.
    pub fn rope(&mut self, a: T, pos: T, freq: Option<T>) -> T {
        let mut src = vec![a, pos];
        src.extend(freq);
        self.unary_like(Op::Rope, a, src)
    }
    /// `ggml_soft_max_ext(a, mask, …)` (and its sinks).
    pub fn soft_max(&mut self, a: T, mask: Option<T>, sinks: Option<T>) -> T {
        let mut src = vec![a];
        src.extend(mask);
        src.extend(sinks);
        self.unary_like(Op::SoftMax, a, src)
    }
    /// `ggml_swiglu_split(a, b)` and the other `ggml_glu_impl` ops with two inputs.
    pub fn glu_split(&mut self, a: T, b: T) -> T {
        self.unary_like(Op::Glu, a, vec![a, b])
    }
    pub fn op(&mut self, op: Op, ty: GgmlType, ne: [u64; 4], src: Vec<T>) -> T {
        self.raw(op, ty, ne, None, src)
    }
    pub fn mul_mat(&mut self, a: T, b: T) -> T {
        let (na, nb) = (self.t[a].ne, self.t[b].ne);
        self.raw(Op::MulMat, GgmlType::F32, [na[1], nb[1], nb[2], nb[3]], None, vec![a, b])
    }
    pub fn mul_mat_id(&mut self, a: T, b: T, ids: T) -> T {
        let (na, nb, ni) = (self.t[a].ne, self.t[b].ne, self.t[ids].ne);
        self.raw(Op::MulMatId, GgmlType::F32, [na[1], ni[0], nb[2], 1], None, vec![a, b, ids])
    }
    pub fn get_rows(&mut self, a: T, b: T) -> T {
        let (na, nb) = (self.t[a].ne, self.t[b].ne);
        let ty = if self.t[a].ty == GgmlType::I32 { GgmlType::I32 } else { GgmlType::F32 };
        self.raw(Op::GetRows, ty, [na[0], nb[0], nb[1], nb[2]], None, vec![a, b])
    }
    /// `ggml_set_rows(a, b, c)`: a view of `a`; sources `b, c, a`.
    pub fn set_rows(&mut self, a: T, b: T, c: T) -> T {
        self.view_tensor(Op::SetRows, a, vec![b, c, a])
    }
    /// `ggml_cpy(a, b)`: a view of `b`.
    pub fn cpy(&mut self, a: T, b: T) -> T {
        self.view_tensor(Op::Cpy, b, vec![a, b])
    }
    /// `ggml_view_tensor`-based ops: same shape and strides as `a`, sharing its memory.
    fn view_tensor(&mut self, op: Op, a: T, src: Vec<T>) -> T {
        let (ty, ne, nb) = (self.t[a].ty, self.t[a].ne, self.t[a].nb);
        self.raw(op, ty, ne, Some((a, nb)), src)
    }
    pub fn reshape(&mut self, a: T, ne: [u64; 4]) -> T {
        let ty = self.t[a].ty;
        let nb = strides(ty, ne);
        self.raw(Op::Reshape, ty, ne, Some((a, nb)), vec![a])
    }
    /// `ggml_view_4d` (and the lower ranks: unused dimensions 1).
    pub fn view(&mut self, a: T, ne: [u64; 4], nb123: [u64; 3]) -> T {
        let ty = self.t[a].ty;
        let nb = [ty.bytes, nb123[0], nb123[1], nb123[2]];
        self.raw(Op::View, ty, ne, Some((a, nb)), vec![a])
    }
    pub fn permute(&mut self, a: T, ax: [usize; 4]) -> T {
        let (ty, ne0, nb0) = (self.t[a].ty, self.t[a].ne, self.t[a].nb);
        let (mut ne, mut nb) = ([0; 4], [0; 4]);
        for i in 0..4 {
            ne[ax[i]] = ne0[i];
            nb[ax[i]] = nb0[i];
        }
        self.raw(Op::Permute, ty, ne, Some((a, nb)), vec![a])
    }
    pub fn transpose(&mut self, a: T) -> T {
        let t = self.permute(a, [1, 0, 2, 3]);
        self.t[t].op = Op::Transpose;
        t
    }
    /// `ggml_flash_attn_ext(q, k, v, mask, …)`: f32 `[v.ne0, q.ne2, q.ne1, q.ne3]`.
    pub fn flash_attn_ext(&mut self, q: T, k: T, v: T, mask: T, sinks: Option<T>) -> T {
        let (nq, nv) = (self.t[q].ne, self.t[v].ne);
        let mut src = vec![q, k, v, mask];
        src.extend(sinks);
        self.raw(Op::FlashAttnExt, GgmlType::F32, [nv[0], nq[2], nq[1], nq[3]], None, src)
    }
}
