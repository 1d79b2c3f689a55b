//! Shadow tensors: a shape, a layout and an `Rc` to a shadow storage, plus the op that made them
//! (candle-core's `Tensor_`, `Layout` and `BackpropOp`), and the tracing context they share.
//!
//! Sizes are `u64` and every product of them saturates ([`product`]): an overflowing batch makes
//! the step's bytes `u64::MAX` (reported as `TooLarge`), never a wrapped number or a panic.

use super::ledger::{Ledger, SharedLedger, Storage};
use super::step::CandleStep;
use crate::memory::breakdown::Category;
use crate::memory::simulate::Phase;
use std::cell::Cell;
use std::rc::Rc;

/// Output pixels per im2col tile in candle's tiled CPU conv2d (`TILE_SIZE`).
const CONV_TILE: u64 = 512;

/// Bytes of one element: only fp32 is modelled (int tensors are counted as 4 bytes as well,
/// like the `u32` ids candle-nn's embedding and loss take).
const ELEMENT_BYTES: u64 = 4;

/// The product of `sizes`, saturating at `u64::MAX`.
pub(super) fn product(sizes: &[u64]) -> u64 {
    sizes.iter().fold(1, |acc, &d| acc.saturating_mul(d))
}

/// Bytes of a contiguous f32 tensor of `dims`.
fn f32_bytes(dims: &[u64]) -> u64 {
    product(dims).saturating_mul(ELEMENT_BYTES)
}

/// The tracing context of one trace: the memory ledger, tensor ids, the layer row that is
/// running and the category new storages get. Every shadow tensor holds an `Rc` to it, so ops
/// reach it without globals and two traces share nothing.
pub(super) struct Tracer {
    ledger: SharedLedger,
    next_id: Cell<usize>,
    /// Row of the per-layer table whose forward (or backward) runs (`u32::MAX`: none).
    layer: Cell<u32>,
    category: Cell<Category>,
    /// Kernel scratch of candle's CUDA backend instead of its CPU one.
    cuda: bool,
}

impl Tracer {
    /// `record`: keep the timeline; `cuda`: candle's CUDA kernels instead of its CPU ones.
    pub(super) fn new(record: bool, cuda: bool) -> Rc<Tracer> {
        let ledger = Ledger::shared(record);
        Rc::new(Tracer { ledger, next_id: Cell::new(0), layer: Cell::new(u32::MAX), category: Cell::new(Category::Activations), cuda })
    }
    pub(super) fn set_category(&self, cat: Category) {
        self.category.set(cat);
    }
    pub(super) fn set_layer(&self, row: u32) {
        self.layer.set(row);
    }
    pub(super) fn set_phase(&self, phase: Phase) {
        self.ledger.borrow_mut().set_phase(phase);
    }
    /// The step starts: from here allocations count towards the peak.
    pub(super) fn start_step(&self) {
        let mut ledger = self.ledger.borrow_mut();
        ledger.start_measuring();
        ledger.set_phase(Phase::Forward);
    }
    /// The step's figures (call once every tensor is dropped).
    pub(super) fn take_step(&self) -> CandleStep {
        self.ledger.borrow_mut().take_step()
    }
    fn storage(&self, bytes: u64) -> Rc<Storage> {
        Storage::new(&self.ledger, bytes, self.category.get(), self.layer.get())
    }
    /// Kernel scratch: allocated and freed inside one op.
    fn scratch(&self, bytes: u64) {
        if bytes == 0 {
            return;
        }
        let mut ledger = self.ledger.borrow_mut();
        ledger.alloc(bytes, Category::Temporaries, self.layer.get());
        ledger.free(bytes, Category::Temporaries);
    }
    fn id(&self) -> usize {
        let n = self.next_id.get() + 1;
        self.next_id.set(n);
        n
    }
    /// A new contiguous untracked tensor (`Tensor::zeros`, `rand`, inputs).
    pub(super) fn zeros(self: &Rc<Self>, shape: &[u64], int: bool) -> Tensor {
        self.new_tensor(shape, int, None, false)
    }
    /// A variable (`Var`): a parameter, a buffer or an optimizer moment.
    pub(super) fn var(self: &Rc<Self>, shape: &[u64]) -> Tensor {
        self.new_tensor(shape, false, None, true)
    }
    fn new_tensor(self: &Rc<Self>, shape: &[u64], int: bool, op: Option<Op>, var: bool) -> Tensor {
        let storage = self.storage(f32_bytes(shape));
        self.tensor(storage, shape.to_vec(), int, op, var)
    }
    fn tensor(self: &Rc<Self>, storage: Rc<Storage>, shape: Vec<u64>, int: bool, op: Option<Op>, var: bool) -> Tensor {
        let stride = contiguous_stride(&shape);
        Tensor(Rc::new(TensorInner { id: self.id(), storage, shape, stride, offset: 0, op, var, int, tracer: self.clone() }))
    }
}

fn contiguous_stride(shape: &[u64]) -> Vec<u64> {
    let mut stride = vec![0; shape.len()];
    let mut acc = 1u64;
    for i in (0..shape.len()).rev() {
        stride[i] = acc;
        acc = acc.saturating_mul(shape[i]);
    }
    stride
}

fn broadcast_shape(a: &[u64], b: &[u64]) -> Vec<u64> {
    let n = a.len().max(b.len());
    (0..n)
        .map(|i| {
            let x = if i + a.len() >= n { a[i + a.len() - n] } else { 1 };
            let y = if i + b.len() >= n { b[i + b.len() - n] } else { 1 };
            x.max(y)
        })
        .collect()
}

/// A shadow of candle's `Tensor`: cheap to clone, shares its storage with its views.
#[derive(Clone)]
pub(super) struct Tensor(Rc<TensorInner>);

struct TensorInner {
    id: usize,
    storage: Rc<Storage>,
    shape: Vec<u64>,
    stride: Vec<u64>,
    offset: u64,
    /// The op that made it, kept only when it is tracked (candle's `BackpropOp`).
    op: Option<Op>,
    var: bool,
    int: bool,
    tracer: Rc<Tracer>,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum UnaryOp {
    Relu,
    Sqr,
    Sqrt,
    Exp,
    Log,
    Tanh,
    GeluErf,
    /// candle's `gelu`: the tanh approximation.
    Gelu,
    Neg,
    Erf,
}

/// candle-core's `Op`, for the ops the traced programs use: what backward reads.
#[derive(Clone)]
pub(super) enum Op {
    Conv2d { arg: Tensor, kernel: Tensor, pad: u64, stride: u64, dilation: u64 },
    ConvTranspose2d { arg: Tensor, kernel: Tensor },
    Matmul(Tensor, Tensor),
    Binary(Tensor, Tensor, BinaryOp),
    Broadcast(Tensor),
    Reshape(Tensor),
    Transpose(Tensor, usize, usize),
    /// `(arg, dim, start, len)`.
    Narrow(Tensor, usize, u64, u64),
    Unary(Tensor, UnaryOp),
    Affine(Tensor, f64),
    /// A keepdim sum, with the shape it reduced to.
    Sum(Tensor, Vec<u64>),
    /// A keepdim max, with the shape it reduced to.
    Max(Tensor, Vec<u64>),
    MaxPool(Tensor),
    AvgPool(Tensor),
    Upsample(Tensor),
    IndexSelect(Tensor, Tensor),
    IndexAdd(Tensor, Tensor, Tensor),
    Gather(Tensor, Tensor),
    Copy(Tensor),
    Cmp(Tensor),
    ToDType(Tensor),
    /// The verifier's padded/overlapping max-pool: a custom op with its own backward.
    PoolCustom(Tensor),
}

impl Op {
    pub(super) fn args(&self) -> Vec<&Tensor> {
        match self {
            Op::Conv2d { arg, kernel, .. } | Op::ConvTranspose2d { arg, kernel } => vec![arg, kernel],
            Op::Matmul(a, b) | Op::Binary(a, b, _) | Op::IndexSelect(a, b) | Op::Gather(a, b) => vec![a, b],
            Op::IndexAdd(a, b, c) => vec![a, b, c],
            Op::Broadcast(a)
            | Op::Reshape(a)
            | Op::Transpose(a, ..)
            | Op::Narrow(a, ..)
            | Op::Unary(a, _)
            | Op::Affine(a, _)
            | Op::Sum(a, _)
            | Op::Max(a, _)
            | Op::MaxPool(a)
            | Op::AvgPool(a)
            | Op::Upsample(a)
            | Op::Copy(a)
            | Op::Cmp(a)
            | Op::ToDType(a)
            | Op::PoolCustom(a) => vec![a],
        }
    }
}

/// candle's `track_op`: an op is recorded when any input is a variable or was recorded.
fn tracked(args: &[&Tensor]) -> bool {
    args.iter().any(|a| a.0.var || a.0.op.is_some())
}

impl Tensor {
    pub(super) fn tracer(&self) -> &Rc<Tracer> {
        &self.0.tracer
    }
    pub(super) fn dims(&self) -> &[u64] {
        &self.0.shape
    }
    pub(super) fn numel(&self) -> u64 {
        product(&self.0.shape)
    }
    fn bytes(&self) -> u64 {
        f32_bytes(&self.0.shape)
    }
    pub(super) fn id(&self) -> usize {
        self.0.id
    }
    pub(super) fn op(&self) -> Option<&Op> {
        self.0.op.as_ref()
    }
    pub(super) fn is_var(&self) -> bool {
        self.0.var
    }
    pub(super) fn is_int(&self) -> bool {
        self.0.int
    }
    pub(super) fn is_contiguous(&self) -> bool {
        let mut acc = 1u64;
        for (&s, &d) in self.0.stride.iter().zip(&self.0.shape).rev() {
            if d > 1 && s != acc {
                return false;
            }
            acc = acc.saturating_mul(d);
        }
        true
    }
    /// A new storage-owning output of `op` (tracked when an input is).
    pub(super) fn out(&self, shape: &[u64], int: bool, op: Op) -> Tensor {
        let tracked = tracked(&op.args());
        self.tracer().new_tensor(shape, int, tracked.then_some(op), false)
    }
    /// A view sharing this tensor's storage.
    fn view(&self, shape: Vec<u64>, stride: Vec<u64>, offset: u64, op: Op) -> Tensor {
        let tracked = tracked(&op.args());
        self.alias(shape, stride, offset, tracked.then_some(op))
    }
    fn alias(&self, shape: Vec<u64>, stride: Vec<u64>, offset: u64, op: Option<Op>) -> Tensor {
        let tracer = self.tracer();
        let inner = TensorInner { id: tracer.id(), storage: self.0.storage.clone(), shape, stride, offset, op, var: false, int: self.0.int, tracer: tracer.clone() };
        Tensor(Rc::new(inner))
    }
    /// The same storage without its op (`Tensor::detach`).
    pub(super) fn detach(&self) -> Tensor {
        if self.0.op.is_none() && !self.0.var {
            return self.clone();
        }
        self.alias(self.0.shape.clone(), self.0.stride.clone(), self.0.offset, None)
    }
    pub(super) fn zeros_like(&self) -> Tensor {
        self.tracer().zeros(&self.0.shape, self.0.int)
    }
    /// `Var::set`: copies into the variable's storage.
    pub(super) fn set(&self, _src: &Tensor) {}

    pub(super) fn reshape(&self, shape: &[u64]) -> Tensor {
        if self.is_contiguous() {
            self.view(shape.to_vec(), contiguous_stride(shape), self.0.offset, Op::Reshape(self.clone()))
        } else {
            self.out(shape, self.0.int, Op::Reshape(self.clone()))
        }
    }
    pub(super) fn squeeze(&self, dim: usize) -> Tensor {
        let mut shape = self.0.shape.clone();
        let mut stride = self.0.stride.clone();
        shape.remove(dim);
        stride.remove(dim);
        self.view(shape, stride, self.0.offset, Op::Reshape(self.clone()))
    }
    pub(super) fn transpose(&self, a: usize, b: usize) -> Tensor {
        if a == b {
            return self.clone();
        }
        let mut shape = self.0.shape.clone();
        let mut stride = self.0.stride.clone();
        shape.swap(a, b);
        stride.swap(a, b);
        self.view(shape, stride, self.0.offset, Op::Transpose(self.clone(), a, b))
    }
    /// Transposes the last two dimensions.
    pub(super) fn t(&self) -> Tensor {
        let rank = self.0.shape.len();
        self.transpose(rank - 2, rank - 1)
    }
    pub(super) fn broadcast_as(&self, shape: &[u64]) -> Tensor {
        let extra = shape.len() - self.0.shape.len();
        let mut stride = vec![0; shape.len()];
        for i in 0..self.0.shape.len() {
            stride[i + extra] = if self.0.shape[i] == shape[i + extra] { self.0.stride[i] } else { 0 };
        }
        self.view(shape.to_vec(), stride, self.0.offset, Op::Broadcast(self.clone()))
    }
    pub(super) fn narrow(&self, dim: usize, start: u64, len: u64) -> Tensor {
        if start == 0 && len == self.0.shape[dim] {
            return self.clone();
        }
        let mut shape = self.0.shape.clone();
        shape[dim] = len;
        let offset = self.0.offset.saturating_add(start.saturating_mul(self.0.stride[dim]));
        self.view(shape, self.0.stride.clone(), offset, Op::Narrow(self.clone(), dim, start, len))
    }
    pub(super) fn contiguous(&self) -> Tensor {
        if self.is_contiguous() {
            self.clone()
        } else {
            self.out(&self.0.shape.clone(), self.0.int, Op::Copy(self.clone()))
        }
    }
    pub(super) fn binary(&self, rhs: &Tensor, op: BinaryOp) -> Tensor {
        let shape = self.0.shape.clone();
        self.out(&shape, false, Op::Binary(self.clone(), rhs.clone(), op))
    }
    /// `broadcast_add` and friends: broadcast views of whichever side differs, then the op.
    pub(super) fn broadcast_binary(&self, rhs: &Tensor, op: BinaryOp) -> Tensor {
        let shape = broadcast_shape(self.dims(), rhs.dims());
        let l = if shape != self.dims() { self.broadcast_as(&shape) } else { self.clone() };
        let r = if shape != rhs.dims() { rhs.broadcast_as(&shape) } else { rhs.clone() };
        l.binary(&r, op)
    }
    pub(super) fn add(&self, rhs: &Tensor) -> Tensor {
        self.binary(rhs, BinaryOp::Add)
    }
    pub(super) fn sub(&self, rhs: &Tensor) -> Tensor {
        self.binary(rhs, BinaryOp::Sub)
    }
    pub(super) fn mul(&self, rhs: &Tensor) -> Tensor {
        self.binary(rhs, BinaryOp::Mul)
    }
    pub(super) fn div(&self, rhs: &Tensor) -> Tensor {
        self.binary(rhs, BinaryOp::Div)
    }
    pub(super) fn unary(&self, op: UnaryOp) -> Tensor {
        let shape = self.0.shape.clone();
        self.out(&shape, false, Op::Unary(self.clone(), op))
    }
    /// `x * f`, `x + f`, `affine(m, a)`: one op.
    pub(super) fn affine(&self, mul: f64) -> Tensor {
        let shape = self.0.shape.clone();
        self.out(&shape, false, Op::Affine(self.clone(), mul))
    }
    pub(super) fn sum_keepdim(&self, dims: &[usize]) -> Tensor {
        let mut shape = self.0.shape.clone();
        for &d in dims {
            shape[d] = 1;
        }
        self.out(&shape.clone(), false, Op::Sum(self.clone(), shape))
    }
    pub(super) fn max_keepdim(&self, dim: usize) -> Tensor {
        let mut shape = self.0.shape.clone();
        shape[dim] = 1;
        self.out(&shape.clone(), false, Op::Max(self.clone(), shape))
    }
    pub(super) fn mean_keepdim(&self, dims: &[usize]) -> Tensor {
        self.sum_keepdim(dims).affine(1.0)
    }
    /// `sum_all`: a keepdim sum then a squeeze to a scalar.
    pub(super) fn sum_all(&self) -> Tensor {
        let dims: Vec<usize> = (0..self.0.shape.len()).collect();
        let sum = self.sum_keepdim(&dims);
        sum.view(vec![], vec![], 0, Op::Reshape(sum.clone()))
    }
    /// An elementwise comparison: a `u8` tensor, a quarter of an f32's bytes.
    pub(super) fn cmp(&self) -> Tensor {
        let shape = self.0.shape.clone();
        let tracked = tracked(&[self]);
        let tracer = self.tracer();
        let storage = tracer.storage(product(&shape));
        tracer.tensor(storage, shape, true, tracked.then_some(Op::Cmp(self.clone())), false)
    }
    pub(super) fn to_f32(&self) -> Tensor {
        let shape = self.0.shape.clone();
        self.out(&shape, false, Op::ToDType(self.clone()))
    }
    pub(super) fn matmul(&self, rhs: &Tensor) -> Tensor {
        let rank = self.0.shape.len();
        let mut shape = self.0.shape.clone();
        shape[rank - 1] = rhs.0.shape[rank - 1];
        self.out(&shape, false, Op::Matmul(self.clone(), rhs.clone()))
    }
    /// `conv2d` with candle's kernel scratch (see the module docs).
    pub(super) fn conv2d(&self, kernel: &Tensor, pad: u64, stride: u64, dilation: u64) -> Tensor {
        let (b, ci, h, w) = (self.dims()[0], self.dims()[1], self.dims()[2], self.dims()[3]);
        let (co, kh, kw) = (kernel.dims()[0], kernel.dims()[2], kernel.dims()[3]);
        let oh = (h + 2 * pad - dilation * (kh - 1) - 1) / stride + 1;
        let ow = (w + 2 * pad - dilation * (kw - 1) - 1) / stride + 1;
        let op = Op::Conv2d { arg: self.clone(), kernel: kernel.clone(), pad, stride, dilation };
        let out = self.out(&[b, co, oh, ow], false, op);
        let kernel_copy = if kernel.is_contiguous() { 0 } else { f32_bytes(&[co, ci]) };
        let scratch = if self.tracer().cuda {
            // `cuda_backend/mod.rs` (no cuDNN): a full im2col `[b·oh·ow, c_in·kh·kw]` and the
            // matmul result `[b·oh·ow, c_out]` are both alive while the result is copied to NCHW.
            f32_bytes(&[b, oh, ow, ci, kh, kw]).saturating_add(f32_bytes(&[b, oh, ow, co]))
        } else if kh == 1 && kw == 1 && stride == 1 && pad == 0 && dilation == 1 {
            // conv2d_1x1: kernel copy when strided, then per sample a [c_in, h·w] copy and a
            // [c_out, h·w] result (one sample at a time in the ledger).
            kernel_copy.saturating_add(f32_bytes(&[ci.saturating_add(co), oh, ow]))
        } else if kh == 1 && kw == 1 {
            // full im2col + matmul result before the NCHW copy
            kernel_copy.saturating_add(f32_bytes(&[b, oh, ow, ci])).saturating_add(f32_bytes(&[b, oh, ow, co]))
        } else {
            // tiled: NHWC input copy, flattened kernel, one im2col tile and its result
            let patch = product(&[ci, kh, kw]);
            let tile = CONV_TILE.min(oh * ow);
            f32_bytes(&[b, ci, h, w]).saturating_add(f32_bytes(&[co, patch])).saturating_add(f32_bytes(&[patch.saturating_add(co), tile]))
        };
        self.tracer().scratch(scratch);
        out
    }
    /// `conv_transpose2d` (conv2d's input gradient): output plus an NHWC copy of the input.
    pub(super) fn conv_transpose2d(&self, kernel: &Tensor, pad: u64, out_pad: u64, stride: u64, dilation: u64) -> Tensor {
        let (b, h, w) = (self.dims()[0], self.dims()[2], self.dims()[3]);
        let (co, kh, kw) = (kernel.dims()[1], kernel.dims()[2], kernel.dims()[3]);
        let oh = (h - 1) * stride + dilation * (kh - 1) + out_pad + 1 - 2 * pad;
        let ow = (w - 1) * stride + dilation * (kw - 1) + out_pad + 1 - 2 * pad;
        let out = self.out(&[b, co, oh, ow], false, Op::ConvTranspose2d { arg: self.clone(), kernel: kernel.clone() });
        // CPU: an NHWC copy of the input; CUDA runs a direct kernel with no scratch
        if !self.tracer().cuda {
            self.tracer().scratch(self.bytes());
        }
        out
    }
}
