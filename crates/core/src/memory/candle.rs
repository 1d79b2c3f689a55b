//! The candle framework profile: what a training step written with `candle-core`/`candle-nn` 0.11
//! keeps alive, simulated with a *shadow* of candle's tensor graph.
//!
//! candle keeps tensors alive very differently from PyTorch eager, so this profile does not reuse
//! the PyTorch op graph of [`crate::resolve`]. It re-traces the spec with the same calls a candle
//! program makes (the ones `vramcalc-verify` makes, which are candle-nn's modules), on shadow
//! tensors that carry only a shape, a layout and an `Rc` to a shadow storage whose `Drop` returns its
//! bytes. Ownership then behaves as in candle and the peak falls out of the drops. What was read:
//!
//! - `candle-core/src/op.rs`, `BackpropOp::new1/new2`: an op's output keeps an `Arc` clone of every
//!   input when any input is a variable or has an op itself (`track_op`). So the loss holds the whole
//!   forward graph (every intermediate, views included) until the loss is dropped, which in the usual
//!   loop (`opt.backward_step(&loss)`) is after the optimizer step. Nothing is saved selectively and
//!   nothing is in place: ReLU(inplace=True) is a new tensor, BatchNorm keeps six full-size tensors.
//! - `candle-core/src/backprop.rs`, `Tensor::backward`: nodes are visited in the reverse of a
//!   depth-first topological sort; each node's gradient is `remove`d from the `GradStore` (a
//!   `HashMap<TensorId, Tensor>`) and `detach`ed (same storage, no op), then each input's gradient is
//!   accumulated by `grads.or_insert(arg)` — a `zeros_like` the size of the input, even for
//!   broadcast views — followed by `*sum = sum.add(&g)`. Because gradients are computed with ordinary
//!   tensor ops, a gradient that involves a tracked tensor (a forward activation or a variable) is
//!   itself tracked and keeps its inputs alive: the zeros, the partial gradient and the incoming
//!   gradient's storage. Variables are never removed from the store, so a conv kernel's gradient
//!   (`arg.transpose(0,1).conv2d(grad.transpose(0,1))`, tracked through `arg`) keeps the conv output's
//!   gradient alive until the `GradStore` is dropped.
//! - `candle-core/src/cuda_backend/mod.rs` (device = cuda, no cuDNN): conv2d is a full im2col, a
//!   matmul and a copy to NCHW; `conv_transpose2d` is a direct kernel.
//! - `candle-core/src/cpu_backend/conv2d.rs`: the CPU conv2d (tiled im2col) allocates the output
//!   (zeroed), an NHWC copy of the input, a flattened copy of the kernel, and per tile of 512 output
//!   pixels an im2col tile and a matmul result; 1×1 stride-1 convs are one matmul per sample over
//!   a copy of that sample; other 1×1 convs use a full im2col. `ConvTranspose2D` (the input
//!   gradient of conv2d) allocates the output and an NHWC copy of its input. Matmul allocates its
//!   output only (gemm's packing buffers are thread-local and persist).
//! - `candle-nn` 0.11: `Linear` (`x.matmul(&w.t())` on a flattened view, `broadcast_add(bias)`),
//!   `Conv2d` (`conv2d` + `broadcast_add(bias.reshape((1,c,1,1)))`), `BatchNorm::forward_train`,
//!   `LayerNorm` (its non-fused path: the fused `ops::layer_norm` has no backward), `Embedding`
//!   (`index_select`), `ops::{softmax, log_softmax, dropout}` (dropout keeps an f32 mask),
//!   `loss::cross_entropy` (`log_softmax` + `gather`), `optim::{SGD, AdamW}`. The AdamW step
//!   computes `next_m`, `next_v`, `m_hat`, `v_hat`, `next_theta` and the adjusted gradient with out
//!   of place ops on tracked tensors, so each parameter's update holds about fifteen
//!   parameter-sized temporaries at its end; SGD holds two.
//!
//! Categories: storages made before the step are parameters, buffers (BatchNorm running stats,
//! which candle-nn keeps as variables), optimizer state or input; forward storages are
//! activations; backward storages (including what the `GradStore` keeps alive) are gradients;
//! kernel scratch and optimizer-step storages are temporaries. Only fp32 is modelled (candle-nn's
//! optimizers keep state in the parameter dtype). Small bookkeeping allocations (tensor structs,
//! hash maps) are not counted: they are below a kilobyte per tensor.

use crate::error::{Error, Result};
use crate::layer::attention::{FfnActivation, NormKind, TransformerLayer};
use crate::layer::activation::GeluApprox;
use crate::config::{Mode, OptimizerKind, Precision, TrainConfig};
use crate::memory::breakdown::Breakdown;
use crate::memory::simulate::{OptimizerCost, Phase, StepResult, TimelinePoint};
use crate::layer::args::{NamedPadding, Padding};
use crate::spec::{InputDType, Layer, Loss, ModelSpec};
use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet};
use std::rc::Rc;

/// Output pixels per im2col tile in candle's tiled CPU conv2d (`TILE_SIZE`).
const CONV_TILE: usize = 512;

/// A spec ready to be traced with candle's semantics at any batch size.
#[derive(Debug, Clone)]
pub struct CandlePlan {
    spec: ModelSpec,
    config: TrainConfig,
    seq_len: Option<u64>,
}

impl CandlePlan {
    /// Checks that every layer and setting has a candle equivalent (the same checks the verifier
    /// makes before building the model).
    pub fn new(spec: &ModelSpec, config: &TrainConfig) -> Result<CandlePlan> {
        if config.precision != Precision::Fp32 {
            return Err(Error::Config(format!("the candle profile models fp32 only, not {}", config.precision)));
        }
        if config.mode == Mode::Train && !matches!(config.optimizer, OptimizerKind::Sgd | OptimizerKind::Adam | OptimizerKind::Adamw) {
            return Err(Error::Config(format!(
                "candle-nn has no {} optimizer (sgd, adam and adamw are modelled)",
                config.optimizer
            )));
        }
        if config.checkpointing {
            return Err(Error::Config("candle has no activation checkpointing".into()));
        }
        if spec.loss != Loss::CrossEntropy {
            return Err(Error::Config("the candle profile models the cross-entropy loss only".into()));
        }
        if config.grad_accum != 1 {
            return Err(Error::Config("the candle profile models one micro-batch per step".into()));
        }
        unsupported(&spec.layers, "layers").map_or(Ok(()), |(kind, path)| {
            Err(Error::Layer { path, kind: kind.into(), message: "not supported by the candle profile".into() })
        })?;
        let plan = CandlePlan { spec: spec.clone(), config: *config, seq_len: config.seq_len };
        // trace once at batch 1 so shape problems surface here, not in `estimate`
        plan.trace(1, false)?;
        Ok(plan)
    }

    /// Optimizer state as candle-nn keeps it (AdamW: two moments per parameter, no step tensor).
    pub fn optimizer_cost(&self, param_bytes: u64) -> OptimizerCost {
        let state = match (self.config.mode, self.config.optimizer) {
            (Mode::Train, OptimizerKind::Adam | OptimizerKind::Adamw) => 2 * param_bytes,
            _ => 0,
        };
        OptimizerCost { state, step_temporaries: 0 }
    }

    /// Simulates one steady-state step at `batch`. `peak_op` is left to the caller (it indexes
    /// the PyTorch op graph); the layer row of the peak is in [`CandleStep::peak_layer`].
    pub fn simulate(&self, batch: u64, timeline: bool) -> CandleStep {
        // `new` traced the same spec successfully; shapes do not depend on the batch.
        self.trace(batch.max(1) as usize, timeline).unwrap_or_default()
    }

    fn trace(&self, batch: usize, record: bool) -> Result<CandleStep> {
        let mem = Rc::new(RefCell::new(MemState::new(record)));
        let cx = Cx { mem: mem.clone(), next_id: Rc::new(Cell::new(0)), layer: Rc::new(Cell::new(u32::MAX)), cuda: self.config.device == super::config::Device::Cuda };
        let train = self.config.mode == Mode::Train;
        // Persistent: the model's variables, the optimizer's state, the batch.
        cx.set_cat(Cat::Param);
        let mut shape: Vec<usize> = self.spec.input.shape.iter().map(|&d| d as usize).collect();
        let tokens = self.spec.input.dtype == InputDType::Int64;
        if let (Some(s), true) = (self.seq_len, tokens || shape.len() == 2) {
            shape[0] = s as usize;
        }
        let mut full = vec![batch];
        full.extend(&shape);
        let mut model = Model { cx: &cx, vars: Vec::new(), row: 0, train };
        // Build (variables are created as the layers are first met, like a VarBuilder does).
        let layers = model.build(&self.spec.layers)?;
        cx.set_cat(Cat::OptState);
        let opt_state: Vec<(T, T)> = if train && self.config.optimizer != OptimizerKind::Sgd {
            model.vars.iter().map(|v| (cx.var(&v.0.shape), cx.var(&v.0.shape))).collect()
        } else {
            Vec::new()
        };
        cx.set_cat(Cat::Input);
        let x = cx.zeros(&full, tokens);
        {
            let mut m = mem.borrow_mut();
            m.reset_peak();
            m.phase = Phase::Forward;
        }
        cx.set_cat(Cat::Act);
        let logits = layers.forward(&mut model, &x)?;
        let result = if train {
            let dims = logits.0.shape.clone();
            let rows: usize = dims[..dims.len() - 1].iter().product();
            let target = {
                cx.set_cat(Cat::Input);
                let t = cx.zeros(&[rows], true);
                cx.set_cat(Cat::Act);
                t
            };
            let loss = match self.spec.loss {
                Loss::CrossEntropy => {
                    let l2 = if dims.len() == 2 { logits.clone() } else { logits.reshape(&[rows, dims[dims.len() - 1]]) };
                    cross_entropy(&cx, &l2, &target)
                }
                Loss::Mse => return Err(Error::Config("the candle profile models the cross-entropy loss only".into())),
            };
            drop(logits);
            mem.borrow_mut().phase = Phase::Backward;
            cx.set_cat(Cat::Grad);
            let grads = backward(&cx, &loss);
            mem.borrow_mut().phase = Phase::Optimizer;
            cx.layer.set(u32::MAX);
            cx.set_cat(Cat::Temp);
            match self.config.optimizer {
                OptimizerKind::Sgd => {
                    for v in &model.vars {
                        if let Some(g) = grads.get(v) {
                            let upd = v.sub(&g.affine(0.01));
                            v.set(&upd);
                        }
                    }
                }
                _ => {
                    for (v, (m, s)) in model.vars.iter().zip(&opt_state) {
                        if let Some(g) = grads.get(v) {
                            adamw_update(v, m, s, g);
                        }
                    }
                }
            }
            drop(grads);
            drop(loss);
            Ok(())
        } else {
            drop(logits);
            Ok(())
        };
        result.map(|()| {
            drop(x);
            drop(opt_state);
            drop(layers);
            drop(model);
            let state = std::mem::replace(&mut *mem.borrow_mut(), MemState::new(false));
            state.finish()
        })
    }
}

/// The result of one simulated candle step.
#[derive(Debug, Clone, Default)]
pub struct CandleStep {
    pub peak: u64,
    pub peak_phase: Option<Phase>,
    /// Row of the per-layer table active at the peak (`u32::MAX`: loss or optimizer).
    pub peak_layer: u32,
    pub breakdown: Breakdown,
    pub phase_peaks: [u64; 3],
    pub peak_rounded512: u64,
    pub peak_reserved: u64,
    pub timeline: Vec<TimelinePoint>,
}

impl CandleStep {
    /// As the PyTorch simulation's result, with `peak_op` found by the caller.
    pub fn into_step_result(self, peak_op: Option<u32>, n_ops: usize) -> StepResult {
        StepResult {
            peak: self.peak,
            peak_phase: self.peak_phase.unwrap_or(Phase::Forward),
            peak_op,
            breakdown: self.breakdown,
            phase_peaks: self.phase_peaks,
            snapshot: Vec::new(),
            timeline: self.timeline,
            saved_by_op: vec![0; n_ops],
        }
    }
}

/// The first layer the candle profile (and the verifier) cannot run: `(kind, path)`.
pub fn unsupported(layers: &[Layer], path: &str) -> Option<(&'static str, String)> {
    for (i, l) in layers.iter().enumerate() {
        let p = format!("{path}[{i}]");
        let bad = match l {
            Layer::Linear(x) => x.tied_weight,
            Layer::Conv2d(c) => {
                c.groups != 1
                    || c.kernel_size.0[0] != c.kernel_size.0[1]
                    || c.stride.0[0] != c.stride.0[1]
                    || c.dilation.0[0] != c.dilation.0[1]
                    || match c.padding {
                        Padding::Explicit(pp) => pp.0[0] != pp.0[1],
                        Padding::Named(NamedPadding::Same) => c.kernel_size.0[0] % 2 == 0 || c.dilation.0[0] != 1,
                        Padding::Named(NamedPadding::Valid) => false,
                    }
            }
            Layer::BatchNorm2d(b) => !b.affine || !b.track_running_stats,
            Layer::LayerNorm(_) | Layer::Relu(_) | Layer::Tanh | Layer::Flatten(_) | Layer::Dropout(_) => false,
            Layer::Gelu(g) => g.approximate == GeluApprox::New,
            Layer::MaxPool2d(m) => {
                m.dilation.0 != [1, 1] || m.ceil_mode || m.kernel_size.0[0] != m.kernel_size.0[1]
                    || m.stride.unwrap_or(m.kernel_size).0[0] != m.stride.unwrap_or(m.kernel_size).0[1]
                    || m.padding.0[0] != m.padding.0[1]
            }
            Layer::AdaptiveAvgPool2d(a) => a.output_size.0[0] != a.output_size.0[1],
            Layer::Embedding(_) | Layer::PositionalEmbedding(_) | Layer::SelectToken(_) => false,
            Layer::TransformerEncoderLayer(t) => {
                t.gated_mlp || t.rotary || t.fused_qkv || t.num_kv_heads.is_some_and(|k| k != t.nhead) || t.norm != NormKind::LayerNorm
                    || t.activation == FfnActivation::GeluNew
                    || !t.bias
            }
            Layer::Sequential { layers, .. } => {
                if let Some(r) = unsupported(layers, &format!("{p}.layers")) {
                    return Some(r);
                }
                false
            }
            Layer::Residual { body, shortcut, .. } => {
                if let Some(r) = unsupported(body, &format!("{p}.body")) {
                    return Some(r);
                }
                if let Some(r) = shortcut.as_deref().and_then(|s| unsupported(s, &format!("{p}.shortcut"))) {
                    return Some(r);
                }
                false
            }
            Layer::Repeat { body, .. } => {
                if let Some(r) = unsupported(body, &format!("{p}.body#0")) {
                    return Some(r);
                }
                false
            }
            _ => true,
        };
        if bad {
            return Some((l.kind(), p));
        }
    }
    None
}

// ---------------------------------------------------------------------------------------------
// Memory accounting

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cat {
    Param,
    Buffer,
    OptState,
    Input,
    Act,
    Grad,
    Temp,
}

#[derive(Debug)]
struct MemState {
    cur: [u64; 7],
    cur_rounded: u64,
    cur_reserved: u64,
    peak: u64,
    peak_cur: [u64; 7],
    peak_phase: Option<Phase>,
    peak_layer: u32,
    peak_rounded: u64,
    peak_reserved: u64,
    phase_peaks: [u64; 3],
    phase: Phase,
    layer: u32,
    measuring: bool,
    record: bool,
    timeline: Vec<TimelinePoint>,
}

impl MemState {
    fn new(record: bool) -> MemState {
        MemState {
            cur: [0; 7],
            cur_rounded: 0,
            cur_reserved: 0,
            peak: 0,
            peak_cur: [0; 7],
            peak_phase: None,
            peak_layer: u32::MAX,
            peak_rounded: 0,
            peak_reserved: 0,
            phase_peaks: [0; 3],
            phase: Phase::Forward,
            layer: u32::MAX,
            measuring: false,
            record,
            timeline: Vec::new(),
        }
    }

    fn alloc(&mut self, b: u64, c: Cat) {
        self.cur[c as usize] = self.cur[c as usize].saturating_add(b);
        self.cur_rounded = self.cur_rounded.saturating_add(super::simulate::round512(b));
        self.cur_reserved = self.cur_reserved.saturating_add(super::simulate::round_reserved(b));
        if !self.measuring {
            return;
        }
        let total: u64 = self.cur.iter().fold(0, |a, &x| a.saturating_add(x));
        let pi = self.phase as usize;
        self.phase_peaks[pi] = self.phase_peaks[pi].max(total);
        if total > self.peak {
            self.peak = total;
            self.peak_cur = self.cur;
            self.peak_phase = Some(self.phase);
            self.peak_layer = self.layer;
        }
        self.peak_rounded = self.peak_rounded.max(self.cur_rounded);
        self.peak_reserved = self.peak_reserved.max(self.cur_reserved);
        if self.record {
            let layer = if self.phase == Phase::Optimizer { u32::MAX } else { self.layer };
            self.timeline.push(TimelinePoint { phase: self.phase, layer, op: u32::MAX, bytes: total });
        }
    }

    fn free(&mut self, b: u64, c: Cat) {
        self.cur[c as usize] = self.cur[c as usize].saturating_sub(b);
        self.cur_rounded = self.cur_rounded.saturating_sub(super::simulate::round512(b));
        self.cur_reserved = self.cur_reserved.saturating_sub(super::simulate::round_reserved(b));
    }

    fn reset_peak(&mut self) {
        self.measuring = true;
        self.peak = 0;
    }

    fn finish(mut self) -> CandleStep {
        let c = self.peak_cur;
        let breakdown = Breakdown {
            parameters: c[Cat::Param as usize],
            buffers: c[Cat::Buffer as usize],
            gradients: c[Cat::Grad as usize],
            optimizer_state: c[Cat::OptState as usize],
            activations: c[Cat::Act as usize],
            temporaries: c[Cat::Temp as usize],
            input: c[Cat::Input as usize],
        };
        let timeline = downsample(std::mem::take(&mut self.timeline), 4000);
        CandleStep {
            peak: self.peak,
            peak_phase: self.peak_phase,
            peak_layer: self.peak_layer,
            breakdown,
            phase_peaks: self.phase_peaks,
            peak_rounded512: self.peak_rounded,
            peak_reserved: self.peak_reserved,
            timeline,
        }
    }
}

fn downsample(points: Vec<TimelinePoint>, max: usize) -> Vec<TimelinePoint> {
    if points.len() <= max {
        return points;
    }
    let chunk = points.len().div_ceil(max);
    points.chunks(chunk).filter_map(|c| c.iter().copied().max_by_key(|p| p.bytes)).collect()
}

type Mem = Rc<RefCell<MemState>>;

/// A shadow storage: its bytes are live exactly as long as some tensor refers to it.
struct Storage {
    bytes: u64,
    cat: Cat,
    mem: Mem,
}

impl Drop for Storage {
    fn drop(&mut self) {
        self.mem.borrow_mut().free(self.bytes, self.cat);
    }
}

/// The tracer's context: the memory ledger, tensor ids, the category new storages get.
/// The tracing context: the memory ledger and counters, shared (cheaply cloned) by every
/// stand-in tensor.
#[derive(Clone)]
struct Cx {
    mem: Mem,
    next_id: Rc<Cell<usize>>,
    layer: Rc<Cell<u32>>,
    /// Kernel scratch of candle's CUDA backend instead of its CPU one.
    cuda: bool,
}

thread_local! {
    static CAT: RefCell<Cat> = const { RefCell::new(Cat::Act) };
}

impl Cx {
    fn set_cat(&self, c: Cat) {
        CAT.with(|x| *x.borrow_mut() = c);
    }
    fn storage(&self, bytes: u64) -> Rc<Storage> {
        let cat = CAT.with(|x| *x.borrow());
        self.mem.borrow_mut().layer = self.layer.get();
        self.mem.borrow_mut().alloc(bytes, cat);
        Rc::new(Storage { bytes, cat, mem: self.mem.clone() })
    }
    /// Kernel scratch: allocated and freed inside one op.
    fn scratch(&self, bytes: u64) {
        if bytes == 0 {
            return;
        }
        let mut m = self.mem.borrow_mut();
        m.layer = self.layer.get();
        m.alloc(bytes, Cat::Temp);
        m.free(bytes, Cat::Temp);
    }
    fn id(&self) -> usize {
        let n = self.next_id.get() + 1;
        self.next_id.set(n);
        n
    }
    /// A new contiguous untracked tensor (`Tensor::zeros`, `rand`, inputs).
    fn zeros(&self, shape: &[usize], int: bool) -> T {
        self.new_tensor(shape, int, None, false)
    }
    fn new_tensor(&self, shape: &[usize], int: bool, op: Option<Op>, var: bool) -> T {
        let n: usize = shape.iter().product();
        let st = self.storage(n as u64 * 4);
        T(Rc::new(TI {
            id: self.id(),
            st,
            shape: shape.to_vec(),
            stride: contiguous_stride(shape),
            offset: 0,
            op,
            var,
            int,
            cx: self.clone(),
        }))
    }
    fn var(&self, shape: &[usize]) -> T {
        self.new_tensor(shape, false, None, true)
    }
}

fn contiguous_stride(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![0; shape.len()];
    let mut acc = 1;
    for i in (0..shape.len()).rev() {
        s[i] = acc;
        acc *= shape[i];
    }
    s
}

// ---------------------------------------------------------------------------------------------
// Shadow tensors

#[derive(Clone)]
struct T(Rc<TI>);

struct TI {
    id: usize,
    st: Rc<Storage>,
    shape: Vec<usize>,
    stride: Vec<usize>,
    offset: usize,
    op: Option<Op>,
    var: bool,
    int: bool,
    /// The tracer outlives every tensor (they are all dropped inside `trace`).
    cx: Cx,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Bin {
    Add,
    Sub,
    Mul,
    Div,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Un {
    Relu,
    Sqr,
    Sqrt,
    Exp,
    Log,
    Tanh,
    GeluErf,
    Gelu,
    Neg,
    Erf,
}

#[derive(Clone)]
enum Op {
    Conv2d { arg: T, k: T, pad: usize, stride: usize, dil: usize },
    ConvT2d { arg: T, k: T },
    Matmul(T, T),
    Binary(T, T, Bin),
    Broadcast(T),
    Reshape(T),
    Transpose(T, usize, usize),
    Narrow(T, usize, usize, usize),
    Unary(T, Un),
    Affine(T, f64),
    Sum(T, Vec<usize>),
    Max(T, Vec<usize>),
    MaxPool(T),
    AvgPool(T),
    Upsample(T),
    IndexSelect(T, T),
    IndexAdd(T, T, T),
    Gather(T, T),
    Copy(T),
    Cmp(T),
    ToDType(T),
    /// The verifier's padded/overlapping max-pool: a custom op with its own backward.
    PoolCustom(T),
}

impl Op {
    fn args(&self) -> Vec<&T> {
        match self {
            Op::Conv2d { arg, k, .. } | Op::ConvT2d { arg, k } => vec![arg, k],
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

fn track(args: &[&T]) -> bool {
    args.iter().any(|a| a.0.var || a.0.op.is_some())
}

impl T {
    fn cx(&self) -> &Cx {
        &self.0.cx
    }
    fn dims(&self) -> &[usize] {
        &self.0.shape
    }
    fn numel(&self) -> usize {
        self.0.shape.iter().product()
    }
    fn bytes(&self) -> u64 {
        self.numel() as u64 * 4
    }
    fn id(&self) -> usize {
        self.0.id
    }
    fn is_contiguous(&self) -> bool {
        let mut acc = 1;
        for (&s, &d) in self.0.stride.iter().zip(&self.0.shape).rev() {
            if d > 1 && s != acc {
                return false;
            }
            acc *= d;
        }
        true
    }
    /// A new storage-owning output of `op` (tracked when an input is).
    fn out(&self, shape: &[usize], int: bool, op: Op) -> T {
        let tracked = track(&op.args());
        self.cx().new_tensor(shape, int, tracked.then_some(op), false)
    }
    /// A view sharing this tensor's storage.
    fn view(&self, shape: Vec<usize>, stride: Vec<usize>, offset: usize, op: Op) -> T {
        let tracked = track(&op.args());
        let cx = self.cx();
        T(Rc::new(TI {
            id: cx.id(),
            st: self.0.st.clone(),
            shape,
            stride,
            offset,
            op: tracked.then_some(op),
            var: false,
            int: self.0.int,
            cx: self.0.cx.clone(),
        }))
    }
    fn detach(&self) -> T {
        if self.0.op.is_none() && !self.0.var {
            return self.clone();
        }
        T(Rc::new(TI {
            id: self.cx().id(),
            st: self.0.st.clone(),
            shape: self.0.shape.clone(),
            stride: self.0.stride.clone(),
            offset: self.0.offset,
            op: None,
            var: false,
            int: self.0.int,
            cx: self.0.cx.clone(),
        }))
    }
    fn zeros_like(&self) -> T {
        self.cx().zeros(&self.0.shape, self.0.int)
    }
    /// `Var::set`: copies into the variable's storage.
    fn set(&self, _src: &T) {}

    fn reshape(&self, shape: &[usize]) -> T {
        if self.is_contiguous() {
            self.view(shape.to_vec(), contiguous_stride(shape), self.0.offset, Op::Reshape(self.clone()))
        } else {
            self.out(shape, self.0.int, Op::Reshape(self.clone()))
        }
    }
    fn squeeze(&self, dim: usize) -> T {
        let mut s = self.0.shape.clone();
        let mut st = self.0.stride.clone();
        s.remove(dim);
        st.remove(dim);
        self.view(s, st, self.0.offset, Op::Reshape(self.clone()))
    }
    fn transpose(&self, a: usize, b: usize) -> T {
        if a == b {
            return self.clone();
        }
        let mut s = self.0.shape.clone();
        let mut st = self.0.stride.clone();
        s.swap(a, b);
        st.swap(a, b);
        self.view(s, st, self.0.offset, Op::Transpose(self.clone(), a, b))
    }
    fn t(&self) -> T {
        let r = self.0.shape.len();
        self.transpose(r - 2, r - 1)
    }
    fn broadcast_as(&self, shape: &[usize]) -> T {
        let extra = shape.len() - self.0.shape.len();
        let mut st = vec![0; shape.len()];
        for i in 0..self.0.shape.len() {
            st[i + extra] = if self.0.shape[i] == shape[i + extra] { self.0.stride[i] } else { 0 };
        }
        self.view(shape.to_vec(), st, self.0.offset, Op::Broadcast(self.clone()))
    }
    fn narrow(&self, dim: usize, start: usize, len: usize) -> T {
        if start == 0 && len == self.0.shape[dim] {
            return self.clone();
        }
        let mut s = self.0.shape.clone();
        s[dim] = len;
        let off = self.0.offset + start * self.0.stride[dim];
        self.view(s, self.0.stride.clone(), off, Op::Narrow(self.clone(), dim, start, len))
    }
    fn contiguous(&self) -> T {
        if self.is_contiguous() {
            self.clone()
        } else {
            self.out(&self.0.shape.clone(), self.0.int, Op::Copy(self.clone()))
        }
    }
    fn binary(&self, rhs: &T, op: Bin) -> T {
        let shape = self.0.shape.clone();
        self.out(&shape, false, Op::Binary(self.clone(), rhs.clone(), op))
    }
    /// `broadcast_add` and friends: broadcast views of whichever side differs, then the op.
    fn bcast(&self, rhs: &T, op: Bin) -> T {
        let shape = broadcast_shape(self.dims(), rhs.dims());
        let l = if shape != self.dims() { self.broadcast_as(&shape) } else { self.clone() };
        let r = if shape != rhs.dims() { rhs.broadcast_as(&shape) } else { rhs.clone() };
        l.binary(&r, op)
    }
    fn add(&self, rhs: &T) -> T {
        self.binary(rhs, Bin::Add)
    }
    fn sub(&self, rhs: &T) -> T {
        self.binary(rhs, Bin::Sub)
    }
    fn mul(&self, rhs: &T) -> T {
        self.binary(rhs, Bin::Mul)
    }
    fn div(&self, rhs: &T) -> T {
        self.binary(rhs, Bin::Div)
    }
    fn unary(&self, u: Un) -> T {
        let shape = self.0.shape.clone();
        self.out(&shape, false, Op::Unary(self.clone(), u))
    }
    /// `x * f`, `x + f`, `affine(m, a)`: one op.
    fn affine(&self, mul: f64) -> T {
        let shape = self.0.shape.clone();
        self.out(&shape, false, Op::Affine(self.clone(), mul))
    }
    fn sum_keepdim(&self, dims: &[usize]) -> T {
        let mut s = self.0.shape.clone();
        for &d in dims {
            s[d] = 1;
        }
        self.out(&s.clone(), false, Op::Sum(self.clone(), s))
    }
    fn max_keepdim(&self, dim: usize) -> T {
        let mut s = self.0.shape.clone();
        s[dim] = 1;
        self.out(&s.clone(), false, Op::Max(self.clone(), s))
    }
    fn mean_keepdim(&self, dims: &[usize]) -> T {
        self.sum_keepdim(dims).affine(1.0)
    }
    /// `sum_all`: a keepdim sum then a squeeze to a scalar.
    fn sum_all(&self) -> T {
        let dims: Vec<usize> = (0..self.0.shape.len()).collect();
        let s = self.sum_keepdim(&dims);
        s.view(vec![], vec![], 0, Op::Reshape(s.clone()))
    }
    fn cmp(&self) -> T {
        let shape = self.0.shape.clone();
        // u8 output: a quarter of an f32's bytes
        let tracked = track(&[self]);
        let cx = self.cx();
        let n: usize = shape.iter().product();
        let st = cx.storage(n as u64);
        T(Rc::new(TI {
            id: cx.id(),
            st,
            stride: contiguous_stride(&shape),
            shape,
            offset: 0,
            op: tracked.then_some(Op::Cmp(self.clone())),
            var: false,
            int: true,
            cx: self.0.cx.clone(),
        }))
    }
    fn to_f32(&self) -> T {
        let shape = self.0.shape.clone();
        self.out(&shape, false, Op::ToDType(self.clone()))
    }
    fn matmul(&self, rhs: &T) -> T {
        let r = self.0.shape.len();
        let mut s = self.0.shape.clone();
        s[r - 1] = rhs.0.shape[r - 1];
        self.out(&s, false, Op::Matmul(self.clone(), rhs.clone()))
    }
    /// `conv2d` with candle's CPU kernel scratch (see the module docs).
    fn conv2d(&self, k: &T, pad: usize, stride: usize, dil: usize) -> T {
        let (b, ci, h, w) = (self.dims()[0], self.dims()[1], self.dims()[2], self.dims()[3]);
        let (co, kh, kw) = (k.dims()[0], k.dims()[2], k.dims()[3]);
        let oh = (h + 2 * pad - dil * (kh - 1) - 1) / stride + 1;
        let ow = (w + 2 * pad - dil * (kw - 1) - 1) / stride + 1;
        let cx = self.cx();
        let out = self.out(&[b, co, oh, ow], false, Op::Conv2d { arg: self.clone(), k: k.clone(), pad, stride, dil });
        let f = 4u64;
        if cx.cuda {
            // `cuda_backend/mod.rs` (no cuDNN): a full im2col `[b·oh·ow, c_in·kh·kw]` and the
            // matmul result `[b·oh·ow, c_out]` are both alive while the result is copied to NCHW.
            let col = (b * oh * ow * ci * kh * kw) as u64 * f;
            cx.scratch(col + (b * oh * ow * co) as u64 * f);
        } else if kh == 1 && kw == 1 && stride == 1 && pad == 0 && dil == 1 {
            // conv2d_1x1: kernel copy when strided, then per sample a [c_in, h·w] copy and a
            // [c_out, h·w] result (one sample at a time in the ledger).
            let kcopy = if k.is_contiguous() { 0 } else { (co * ci) as u64 * f };
            cx.scratch(kcopy + ((ci + co) * oh * ow) as u64 * f);
        } else if kh == 1 && kw == 1 {
            // full im2col + matmul result before the NCHW copy
            let kcopy = if k.is_contiguous() { 0 } else { (co * ci) as u64 * f };
            cx.scratch(kcopy + (b * oh * ow * ci) as u64 * f + (b * oh * ow * co) as u64 * f);
        } else {
            // tiled: NHWC input copy, flattened kernel, one im2col tile and its result
            let ks = ci * kh * kw;
            let tile = CONV_TILE.min(oh * ow);
            cx.scratch((b * ci * h * w) as u64 * f + (co * ks) as u64 * f + ((ks + co) * tile) as u64 * f);
        }
        out
    }
    /// `conv_transpose2d` (conv2d's input gradient): output plus an NHWC copy of the input.
    fn conv_transpose2d(&self, k: &T, pad: usize, out_pad: usize, stride: usize, dil: usize) -> T {
        let (b, _ci, h, w) = (self.dims()[0], self.dims()[1], self.dims()[2], self.dims()[3]);
        let (co, kh, kw) = (k.dims()[1], k.dims()[2], k.dims()[3]);
        let oh = (h - 1) * stride + dil * (kh - 1) + out_pad + 1 - 2 * pad;
        let ow = (w - 1) * stride + dil * (kw - 1) + out_pad + 1 - 2 * pad;
        let out = self.out(&[b, co, oh, ow], false, Op::ConvT2d { arg: self.clone(), k: k.clone() });
        // CPU: an NHWC copy of the input; CUDA runs a direct kernel with no scratch
        if !self.cx().cuda {
            self.cx().scratch(self.bytes());
        }
        out
    }
}

fn broadcast_shape(a: &[usize], b: &[usize]) -> Vec<usize> {
    let n = a.len().max(b.len());
    (0..n)
        .map(|i| {
            let x = if i + a.len() >= n { a[i + a.len() - n] } else { 1 };
            let y = if i + b.len() >= n { b[i + b.len() - n] } else { 1 };
            x.max(y)
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// candle-nn modules, as the verifier calls them

struct Model<'a> {
    cx: &'a Cx,
    vars: Vec<T>,
    row: u32,
    train: bool,
}

enum Built {
    Linear { w: T, b: Option<T>, row: u32 },
    Conv { w: T, b: Option<T>, pad: usize, stride: usize, dil: usize, row: u32 },
    BatchNorm { w: T, b: T, row: u32 },
    LayerNorm { w: T, b: T, row: u32 },
    Act(Un, u32),
    Dropout(f64, u32),
    MaxPool { k: usize, s: usize, pad: usize, row: u32 },
    AdaptiveAvg { out: usize, row: u32 },
    Flatten(u32),
    Embedding { w: T, row: u32 },
    Positional { w: T, per_sample: bool, row: u32 },
    Select(usize, u32),
    Seq(Vec<Built>, u32),
    Residual { body: Vec<Built>, shortcut: Option<Vec<Built>>, row: u32 },
    Transformer(Box<Tf>, u32),
}

struct Tf {
    q: Built,
    k: Built,
    v: Built,
    o: Built,
    ln1: Built,
    ln2: Built,
    fc1: Built,
    fc2: Built,
    heads: usize,
    act: Un,
    drop: f64,
    attn_drop: f64,
    norm_first: bool,
}

impl Model<'_> {
    fn next_row(&mut self) -> u32 {
        let r = self.row;
        self.row += 1;
        r
    }
    fn var(&mut self, shape: &[usize]) -> T {
        let v = self.cx.var(shape);
        self.vars.push(v.clone());
        v
    }
    fn buffer(&mut self, shape: &[usize]) -> T {
        self.cx.set_cat(Cat::Buffer);
        let v = self.cx.var(shape);
        self.cx.set_cat(Cat::Param);
        v
    }
    fn linear(&mut self, i: usize, o: usize, bias: bool, row: u32) -> Built {
        let w = self.var(&[o, i]);
        let b = bias.then(|| self.var(&[o]));
        Built::Linear { w, b, row }
    }
    fn layer_norm(&mut self, d: usize, row: u32) -> Built {
        let w = self.var(&[d]);
        let b = self.var(&[d]);
        Built::LayerNorm { w, b, row }
    }

    fn build(&mut self, layers: &[Layer]) -> Result<Built> {
        let row = u32::MAX;
        let mut out = Vec::new();
        for l in layers {
            out.push(self.layer(l)?);
        }
        Ok(Built::Seq(out, row))
    }

    fn layer(&mut self, l: &Layer) -> Result<Built> {
        let row = self.next_row();
        let u = |v: u64| v as usize;
        Ok(match l {
            Layer::Linear(x) => self.linear(u(x.in_features), u(x.out_features), x.bias, row),
            Layer::Conv2d(c) => {
                let k = u(c.kernel_size.0[0]);
                let w = self.var(&[u(c.out_channels), u(c.in_channels), k, u(c.kernel_size.0[1])]);
                let b = c.bias.then(|| self.var(&[u(c.out_channels)]));
                let dil = u(c.dilation.0[0]);
                let pad = match c.padding {
                    Padding::Explicit(p) => u(p.0[0]),
                    Padding::Named(NamedPadding::Valid) => 0,
                    Padding::Named(NamedPadding::Same) => dil * (k - 1) / 2,
                };
                Built::Conv { w, b, pad, stride: u(c.stride.0[0]), dil, row }
            }
            Layer::BatchNorm2d(b) => {
                let c = u(b.num_features);
                let w = self.var(&[c]);
                let bias = self.var(&[c]);
                // running mean and variance: variables in candle-nn, not trained
                let rm = self.buffer(&[c]);
                let rv = self.buffer(&[c]);
                self.keep(rm);
                self.keep(rv);
                Built::BatchNorm { w, b: bias, row }
            }
            Layer::LayerNorm(n) => self.layer_norm(u(n.normalized_shape), row),
            Layer::Relu(_) => Built::Act(Un::Relu, row),
            Layer::Tanh => Built::Act(Un::Tanh, row),
            Layer::Gelu(g) => Built::Act(if g.approximate == GeluApprox::Tanh { Un::Gelu } else { Un::GeluErf }, row),
            Layer::Dropout(d) => Built::Dropout(d.p, row),
            Layer::MaxPool2d(m) => {
                Built::MaxPool { k: u(m.kernel_size.0[0]), s: u(m.stride.unwrap_or(m.kernel_size).0[0]), pad: u(m.padding.0[0]), row }
            }
            Layer::AdaptiveAvgPool2d(a) => Built::AdaptiveAvg { out: u(a.output_size.0[0]), row },
            Layer::Flatten(_) => Built::Flatten(row),
            Layer::Embedding(e) => Built::Embedding { w: self.var(&[u(e.num_embeddings), u(e.embedding_dim)]), row },
            Layer::PositionalEmbedding(p) => {
                Built::Positional { w: self.var(&[u(p.num_embeddings), u(p.embedding_dim)]), per_sample: p.per_sample, row }
            }
            Layer::SelectToken(s) => Built::Select(s.index.max(0) as usize, row),
            Layer::Sequential { layers, .. } => {
                let mut v = Vec::new();
                for l in layers {
                    v.push(self.layer(l)?);
                }
                Built::Seq(v, row)
            }
            Layer::Residual { body, shortcut, .. } => {
                let mut b = Vec::new();
                for l in body {
                    b.push(self.layer(l)?);
                }
                let sc = match shortcut {
                    Some(s) => {
                        let mut v = Vec::new();
                        for l in s {
                            v.push(self.layer(l)?);
                        }
                        Some(v)
                    }
                    None => None,
                };
                Built::Residual { body: b, shortcut: sc, row }
            }
            Layer::Repeat { times, body } => {
                let mut v = Vec::new();
                for _ in 0..*times {
                    let r = u32::MAX;
                    let mut inner = Vec::new();
                    for l in body {
                        inner.push(self.layer(l)?);
                    }
                    v.push(Built::Seq(inner, r));
                }
                Built::Seq(v, row)
            }
            Layer::TransformerEncoderLayer(t) => Built::Transformer(Box::new(self.transformer(t, row)), row),
            other => {
                return Err(Error::Layer { path: String::new(), kind: other.kind().into(), message: "not supported by the candle profile".into() })
            }
        })
    }

    /// Keeps a buffer variable alive for the whole trace.
    fn keep(&mut self, v: T) {
        // Buffers live in the VarMap with the parameters but are not optimised: hold them in a
        // side list that is dropped with the model.
        KEEP.with(|k| k.borrow_mut().push(v));
    }

    fn transformer(&mut self, t: &TransformerLayer, row: u32) -> Tf {
        let d = t.d_model as usize;
        let f = t.dim_feedforward as usize;
        let q = self.linear(d, d, true, row);
        let k = self.linear(d, d, true, row);
        let v = self.linear(d, d, true, row);
        let o = self.linear(d, d, true, row);
        let ln1 = self.layer_norm(d, row);
        let fc1 = self.linear(d, f, true, row);
        let fc2 = self.linear(f, d, true, row);
        let ln2 = self.layer_norm(d, row);
        let act = match t.activation {
            FfnActivation::Relu => Un::Relu,
            FfnActivation::GeluTanh => Un::Gelu,
            _ => Un::GeluErf,
        };
        Tf {
            q,
            k,
            v,
            o,
            ln1,
            ln2,
            fc1,
            fc2,
            heads: t.nhead as usize,
            act,
            drop: t.dropout,
            attn_drop: t.attention_dropout.unwrap_or(t.dropout),
            norm_first: t.norm_first,
        }
    }
}

impl Drop for Model<'_> {
    fn drop(&mut self) {
        KEEP.with(|k| k.borrow_mut().clear());
    }
}

thread_local! {
    static KEEP: RefCell<Vec<T>> = const { RefCell::new(Vec::new()) };
}

impl Built {
    fn forward(&self, m: &mut Model, x: &T) -> Result<T> {
        let set_row = |r: u32| {
            if r != u32::MAX {
                m.cx.layer.set(r);
            }
        };
        Ok(match self {
            Built::Linear { w, b, row } => {
                set_row(*row);
                linear(x, w, b.as_ref())
            }
            Built::Conv { w, b, pad, stride, dil, row } => {
                set_row(*row);
                let y = x.conv2d(w, *pad, *stride, *dil);
                match b {
                    None => y,
                    Some(b) => y.bcast(&b.reshape(&[1, b.dims()[0], 1, 1]), Bin::Add),
                }
            }
            Built::BatchNorm { w, b, row } => {
                set_row(*row);
                batch_norm_train(x, w, b)
            }
            Built::LayerNorm { w, b, row } => {
                set_row(*row);
                layer_norm(x, w, b)
            }
            Built::Act(u, row) => {
                set_row(*row);
                x.unary(*u)
            }
            Built::Dropout(p, row) => {
                set_row(*row);
                if m.train && *p > 0.0 {
                    dropout(x)
                } else {
                    x.clone()
                }
            }
            Built::MaxPool { k, s, pad, row } => {
                set_row(*row);
                max_pool(x, *k, *s, *pad)
            }
            Built::AdaptiveAvg { out, row } => {
                set_row(*row);
                adaptive_avg(x, *out)?
            }
            Built::Flatten(row) => {
                set_row(*row);
                let d = x.dims();
                let rest: usize = d[1..].iter().product();
                x.reshape(&[d[0], rest])
            }
            Built::Embedding { w, row } => {
                set_row(*row);
                embedding(x, w)
            }
            Built::Positional { w, per_sample, row } => {
                set_row(*row);
                let (b, s, _) = (x.dims()[0], x.dims()[1], x.dims()[2]);
                let cx = x.cx();
                let prev = CAT.with(|c| *c.borrow());
                let e = if *per_sample {
                    // token type ids: zeros (B, S) made in the forward
                    let ids = cx.zeros(&[b, s], true);
                    let e = embedding(&ids, w);
                    drop(ids);
                    e
                } else {
                    let ids = cx.zeros(&[s], true);
                    let e = embedding(&ids, w);
                    drop(ids);
                    e
                };
                let _ = prev;
                x.bcast(&e, Bin::Add)
            }
            Built::Select(i, row) => {
                set_row(*row);
                x.narrow(1, *i, 1).squeeze(1)
            }
            Built::Seq(v, row) => {
                set_row(*row);
                let mut y = x.clone();
                for l in v {
                    y = l.forward(m, &y)?;
                }
                y
            }
            Built::Residual { body, shortcut, row } => {
                set_row(*row);
                let mut y = x.clone();
                for l in body {
                    y = l.forward(m, &y)?;
                }
                let s = match shortcut {
                    None => x.clone(),
                    Some(sc) => {
                        let mut s = x.clone();
                        for l in sc {
                            s = l.forward(m, &s)?;
                        }
                        s
                    }
                };
                set_row(*row);
                y.add(&s)
            }
            Built::Transformer(t, row) => {
                set_row(*row);
                transformer(m, t, x)?
            }
        })
    }
}

fn lin(b: &Built) -> (&T, Option<&T>) {
    match b {
        Built::Linear { w, b, .. } => (w, b.as_ref()),
        // transformer parts are always linears / layer norms
        _ => unreachable_linear(),
    }
}

fn unreachable_linear() -> (&'static T, Option<&'static T>) {
    panic!("transformer projection is not a linear layer")
}

fn ln(b: &Built) -> (&T, &T) {
    match b {
        Built::LayerNorm { w, b, .. } => (w, b),
        _ => panic!("transformer norm is not a layer norm"),
    }
}

/// `candle_nn::Linear::forward`.
fn linear(x: &T, w: &T, b: Option<&T>) -> T {
    let d = x.dims().to_vec();
    let y = match d.len() {
        3 if x.is_contiguous() => {
            let wt = w.t();
            x.reshape(&[d[0] * d[1], d[2]]).matmul(&wt).reshape(&[d[0], d[1], w.dims()[0]])
        }
        3 => {
            let wt = w.broadcast_as(&[d[0], w.dims()[0], w.dims()[1]]).t();
            x.matmul(&wt)
        }
        _ => x.matmul(&w.t()),
    };
    match b {
        None => y,
        Some(b) => y.bcast(b, Bin::Add),
    }
}

/// `candle_nn::BatchNorm::forward_train` (fp32: `to_dtype` is a clone).
fn batch_norm_train(x: &T, w: &T, b: &T) -> T {
    let dims = x.dims().to_vec();
    let xt = x.transpose(0, 1);
    let post = xt.dims().to_vec();
    let rest: usize = post[1..].iter().product();
    let xf = xt.reshape(&[post[0], rest]).contiguous();
    let mean = xf.mean_keepdim(&[1]);
    {
        // running mean update: `(rm * (1 - m)) + (mean.flatten_all() * m)`, then `set`
        let a = mean.reshape(&[post[0]]).affine(0.1);
        let r = a.affine(1.0);
        drop(r);
    }
    let xc = xf.bcast(&mean, Bin::Sub);
    let norm = xc.unary(Un::Sqr).mean_keepdim(&[1]);
    {
        let a = norm.reshape(&[post[0]]).affine(0.1);
        let r = a.affine(1.0);
        drop(r);
    }
    let xn = xc.bcast(&norm.affine(1.0).unary(Un::Sqrt), Bin::Div);
    let y = xn.bcast(&w.reshape(&[post[0], 1]), Bin::Mul).bcast(&b.reshape(&[post[0], 1]), Bin::Add);
    let _ = dims;
    y.reshape(&post).transpose(0, 1)
}

/// `candle_nn::LayerNorm::forward`'s non-fused path (the fused op has no backward).
fn layer_norm(x: &T, w: &T, b: &T) -> T {
    let r = x.dims().len() - 1;
    let mean = x.sum_keepdim(&[r]).affine(1.0);
    let xc = x.bcast(&mean, Bin::Sub);
    let norm = xc.unary(Un::Sqr).sum_keepdim(&[r]).affine(1.0);
    let xn = xc.bcast(&norm.affine(1.0).unary(Un::Sqrt), Bin::Div);
    xn.bcast(w, Bin::Mul).bcast(b, Bin::Add)
}

/// `candle_nn::ops::dropout`: uniform noise, a comparison, an f32 mask scaled, a product.
fn dropout(x: &T) -> T {
    let cx = x.cx();
    let rand = cx.zeros(x.dims(), false);
    let scalar = cx.zeros(&[], false);
    let thr = scalar.broadcast_as(x.dims());
    let mask = rand.cmp().to_f32().affine(2.0);
    let y = x.mul(&mask);
    drop((rand, thr));
    y
}

/// `candle_nn::ops::softmax` over the last dimension.
fn softmax(x: &T) -> T {
    let d = x.dims().len() - 1;
    let max = x.max_keepdim(d);
    let diff = x.bcast(&max, Bin::Sub);
    let num = diff.unary(Un::Exp);
    let den = num.sum_keepdim(&[d]);
    num.bcast(&den, Bin::Div)
}

/// `candle_nn::loss::cross_entropy` = `log_softmax(inp, 1)` + `nll`.
fn cross_entropy(_cx: &Cx, inp: &T, target: &T) -> T {
    let max = inp.max_keepdim(1);
    let diff = inp.bcast(&max, Bin::Sub);
    let sum_exp = diff.unary(Un::Exp).sum_keepdim(&[1]);
    let log_sm = diff.bcast(&sum_exp.unary(Un::Log), Bin::Sub);
    let idx = target.reshape(&[target.dims()[0], 1]);
    let g = log_sm.out(&[inp.dims()[0], 1], false, Op::Gather(log_sm.clone(), idx.clone()));
    g.sum_all().affine(1.0)
}

/// `candle_nn::Embedding::forward`: `index_select` on the flattened ids, reshaped.
fn embedding(ids: &T, w: &T) -> T {
    let mut dims = ids.dims().to_vec();
    dims.push(w.dims()[1]);
    let flat = ids.reshape(&[ids.numel()]);
    let v = w.out(&[ids.numel(), w.dims()[1]], false, Op::IndexSelect(w.clone(), flat.clone()));
    v.reshape(&dims)
}

/// Max pooling: candle's native kernel when windows tile the input, else the verifier's
/// custom op (output only; its backward allocates the input gradient).
fn max_pool(x: &T, k: usize, s: usize, pad: usize) -> T {
    let d = x.dims();
    let oh = (d[2] + 2 * pad - k) / s + 1;
    let ow = (d[3] + 2 * pad - k) / s + 1;
    let op = if k == s && pad == 0 { Op::MaxPool(x.clone()) } else { Op::PoolCustom(x.clone()) };
    x.out(&[d[0], d[1], oh, ow], false, op)
}

fn adaptive_avg(x: &T, out: usize) -> Result<T> {
    let d = x.dims().to_vec();
    let h = d[2];
    Ok(if out == 1 {
        x.mean_keepdim(&[2, 3])
    } else if h == out {
        x.clone()
    } else if h.is_multiple_of(out) {
        x.out(&[d[0], d[1], out, out], false, Op::AvgPool(x.clone()))
    } else if out.is_multiple_of(h) {
        x.out(&[d[0], d[1], out, out], false, Op::Upsample(x.clone()))
    } else {
        return Err(Error::Config(format!("adaptive_avg_pool2d from {h} to {out} has no candle equivalent")));
    })
}

fn transformer(m: &mut Model, t: &Tf, x: &T) -> Result<T> {
    let train = m.train;
    let drop_if = |y: T, p: f64| if train && p > 0.0 { dropout(&y) } else { y };
    let attn = |x: &T| -> T {
        let (b, s, d) = (x.dims()[0], x.dims()[1], x.dims()[2]);
        let h = t.heads;
        let hd = d / h;
        let split = |p: &Built| {
            let (w, bias) = lin(p);
            linear(x, w, bias).reshape(&[b, s, h, hd]).transpose(1, 2).contiguous()
        };
        let q = split(&t.q);
        let k = split(&t.k);
        let v = split(&t.v);
        let scores = q.matmul(&k.t()).affine(1.0);
        let probs = drop_if(softmax(&scores), t.attn_drop);
        let ctx = probs.matmul(&v).transpose(1, 2).reshape(&[b, s, d]);
        let (w, bias) = lin(&t.o);
        drop_if(linear(&ctx, w, bias), t.drop)
    };
    let mlp = |x: &T| -> T {
        let (w1, b1) = lin(&t.fc1);
        let (w2, b2) = lin(&t.fc2);
        let h = linear(x, w1, b1).unary(t.act);
        drop_if(linear(&h, w2, b2), t.drop)
    };
    let (g1, be1) = ln(&t.ln1);
    let (g2, be2) = ln(&t.ln2);
    Ok(if t.norm_first {
        let h = x.add(&attn(&layer_norm(x, g1, be1)));
        h.add(&mlp(&layer_norm(&h, g2, be2)))
    } else {
        let h = layer_norm(&attn(x).add(x), g1, be1);
        layer_norm(&mlp(&h).add(&h), g2, be2)
    })
}

/// candle-nn's `AdamW::step` for one variable, statement by statement.
fn adamw_update(theta: &T, m: &T, v: &T, g: &T) {
    let next_m = m.affine(0.9).add(&g.affine(0.1));
    let next_v = v.affine(0.999).add(&g.unary(Un::Sqr).affine(0.001));
    let m_hat = next_m.affine(1.0);
    let v_hat = next_v.affine(1.0);
    let next_theta = theta.affine(1.0);
    let adjusted = m_hat.div(&v_hat.unary(Un::Sqrt).affine(1.0));
    let next_theta = next_theta.sub(&adjusted.affine(1e-3));
    m.set(&next_m);
    v.set(&next_v);
    theta.set(&next_theta);
}

// ---------------------------------------------------------------------------------------------
// backward, mirroring candle-core/src/backprop.rs

struct Grads(HashMap<usize, T>);

impl Grads {
    fn get(&self, t: &T) -> Option<&T> {
        self.0.get(&t.id())
    }
    /// `or_insert`: a zeros tensor the size of `t` on first touch.
    fn take_or_zeros(&mut self, t: &T) -> T {
        match self.0.remove(&t.id()) {
            Some(g) => g,
            None => t.zeros_like(),
        }
    }
    /// `*sum = sum.op(&g)`: the new sum is made while the old one is alive, then replaces it.
    fn acc(&mut self, t: &T, g: &T, op: Bin) {
        let sum = self.take_or_zeros(t);
        let new = sum.binary(g, op);
        self.0.insert(t.id(), new);
        drop(sum);
    }
}

fn sorted_nodes(root: &T) -> Vec<T> {
    fn walk(n: &T, nodes: &mut Vec<T>, seen: &mut HashMap<usize, bool>) -> bool {
        if let Some(&tg) = seen.get(&n.id()) {
            return tg;
        }
        let mut tg = false;
        if n.0.var {
            tg = true;
        } else if n.0.int {
        } else if let Some(op) = &n.0.op {
            let skip = matches!(op, Op::Affine(_, m) if *m == 0.0) || matches!(op, Op::Cmp(_));
            if !skip {
                for a in op.args() {
                    tg |= walk(a, nodes, seen);
                }
            }
        }
        seen.insert(n.id(), tg);
        if tg {
            nodes.push(n.clone());
        }
        tg
    }
    let mut nodes = Vec::new();
    walk(root, &mut nodes, &mut HashMap::new());
    nodes.reverse();
    nodes
}

fn backward(cx: &Cx, loss: &T) -> Grads {
    let nodes = sorted_nodes(loss);
    let mut grads = Grads(HashMap::new());
    grads.0.insert(loss.id(), loss.zeros_like());
    let _ = cx;
    let mut row_of: HashSet<usize> = HashSet::new();
    for node in &nodes {
        if node.0.var {
            continue;
        }
        let Some(orig) = grads.0.remove(&node.id()) else { continue };
        let grad = orig.detach();
        let Some(op) = &node.0.op else { continue };
        let _ = row_of.insert(node.id());
        match op {
            Op::Binary(l, r, Bin::Add) => {
                grads.acc(l, &grad, Bin::Add);
                grads.acc(r, &grad, Bin::Add);
            }
            Op::Binary(l, r, Bin::Sub) => {
                grads.acc(l, &grad, Bin::Add);
                grads.acc(r, &grad, Bin::Sub);
            }
            Op::Binary(l, r, Bin::Mul) => {
                let lg = grad.mul(r);
                grads.acc(l, &lg, Bin::Add);
                let rg = grad.mul(l);
                grads.acc(r, &rg, Bin::Add);
            }
            Op::Binary(l, r, Bin::Div) => {
                let lg = grad.div(r);
                grads.acc(l, &lg, Bin::Add);
                let rg = grad.mul(l).div(&r.unary(Un::Sqr));
                grads.acc(r, &rg, Bin::Sub);
            }
            Op::Conv2d { arg, k, pad, stride, dil } => {
                let gh = grad.dims()[2];
                let kh = k.dims()[2];
                let out_size = (gh - 1) * stride + dil * (kh - 1) + 1 - 2 * pad;
                let out_pad = arg.dims()[2] - out_size;
                let ga = grad.conv_transpose2d(k, *pad, out_pad, *stride, *dil);
                grads.acc(arg, &ga, Bin::Add);
                let gk = arg.transpose(0, 1).conv2d(&grad.transpose(0, 1), *pad, *dil, *stride).transpose(0, 1);
                let (k0, k1) = (k.dims()[2], k.dims()[3]);
                let gk = if gk.dims()[2] != k0 || gk.dims()[3] != k1 { gk.narrow(2, 0, k0).narrow(3, 0, k1) } else { gk };
                grads.acc(k, &gk, Bin::Add);
            }
            Op::ConvT2d { .. } => {}
            Op::Matmul(l, r) => {
                let lg = grad.matmul(&r.t());
                grads.acc(l, &lg, Bin::Add);
                let rg = l.t().matmul(&grad);
                grads.acc(r, &rg, Bin::Add);
            }
            Op::Broadcast(arg) => {
                let ad = arg.dims().to_vec();
                let nd = node.dims().to_vec();
                let left = nd.len() - ad.len();
                let mut sum_dims: Vec<usize> = (0..left).collect();
                for (i, (n, a)) in nd[left..].iter().zip(&ad).enumerate() {
                    if n != a {
                        sum_dims.push(i + left);
                    }
                }
                let mut ag = grad.sum_keepdim(&sum_dims);
                for _ in 0..left {
                    ag = ag.squeeze(0);
                }
                let sum = grads.take_or_zeros(arg);
                let b = ag.broadcast_as(sum.dims());
                let new = sum.add(&b);
                grads.0.insert(arg.id(), new);
            }
            Op::Sum(arg, reduced) => {
                let g = broadcast_back(arg, &grad, reduced);
                grads.acc(arg, &g, Bin::Add);
            }
            Op::Max(arg, reduced) => {
                let n = broadcast_back(arg, node, reduced);
                let g = broadcast_back(arg, &grad, reduced);
                let g = n.cmp().to_f32().mul(&g);
                let sum = grads.take_or_zeros(arg);
                let b = g.broadcast_as(sum.dims());
                let new = sum.add(&b);
                grads.0.insert(arg.id(), new);
            }
            Op::Copy(arg) => grads.acc(arg, &grad, Bin::Add),
            Op::ToDType(arg) => {
                let g = grad.to_f32();
                grads.acc(arg, &g, Bin::Add);
            }
            Op::Affine(arg, mul) => {
                let g = grad.affine(*mul);
                grads.acc(arg, &g, Bin::Add);
            }
            Op::Unary(arg, Un::Log) => {
                let g = grad.div(arg);
                grads.acc(arg, &g, Bin::Add);
            }
            Op::Unary(arg, Un::Exp) => {
                let g = grad.mul(node);
                grads.acc(arg, &g, Bin::Add);
            }
            Op::Unary(arg, Un::Tanh) => {
                let sum = grads.take_or_zeros(arg);
                let minus = node.unary(Un::Sqr).affine(1.0);
                let g = grad.mul(&minus);
                let new = sum.sub(&g);
                grads.0.insert(arg.id(), new);
            }
            Op::Unary(arg, Un::Relu) => {
                let sum = grads.take_or_zeros(arg);
                let z = arg.zeros_like();
                let rg = arg.cmp().to_f32();
                drop(z);
                let g = grad.mul(&rg);
                let new = sum.add(&g);
                grads.0.insert(arg.id(), new);
            }
            Op::Unary(arg, Un::Neg) => grads.acc(arg, &grad, Bin::Sub),
            Op::Unary(arg, Un::Erf) => {
                let e = arg.unary(Un::Sqr).unary(Un::Neg).unary(Un::Exp).affine(1.0);
                let g = grad.mul(&e);
                grads.acc(arg, &g, Bin::Add);
            }
            Op::Unary(arg, Un::Sqr) => {
                let g = arg.mul(&grad).affine(2.0);
                grads.acc(arg, &g, Bin::Add);
            }
            Op::Unary(arg, Un::Sqrt) => {
                let g = grad.div(node).affine(0.5);
                grads.acc(arg, &g, Bin::Add);
            }
            Op::Unary(arg, Un::Gelu) => {
                let sum = grads.take_or_zeros(arg);
                let cube = arg.unary(Un::Sqr); // powf(3)
                let tanh = cube.affine(1.0).add(&arg.affine(1.0)).unary(Un::Tanh);
                let a = tanh.affine(0.5);
                let b = cube.affine(1.0).add(&arg.affine(1.0));
                let c = tanh.unary(Un::Sqr).affine(-1.0);
                let gg = a.add(&b.mul(&c)).affine(1.0);
                let g = grad.mul(&gg);
                let new = sum.add(&g);
                grads.0.insert(arg.id(), new);
            }
            Op::Unary(arg, Un::GeluErf) => {
                let sum = grads.take_or_zeros(arg);
                let nhs = arg.unary(Un::Sqr).unary(Un::Neg).affine(0.5);
                let sea = nhs.unary(Un::Exp).affine(1.0).mul(arg);
                let ass = arg.affine(1.0);
                let ess = ass.unary(Un::Erf).affine(0.5);
                let gg = sea.affine(1.0).add(&ess);
                let g = grad.mul(&gg);
                let new = sum.add(&g);
                grads.0.insert(arg.id(), new);
            }
            Op::Transpose(arg, a, b) => {
                let g = grad.transpose(*a, *b);
                grads.acc(arg, &g, Bin::Add);
            }
            Op::Reshape(arg) => {
                let g = grad.reshape(arg.dims());
                grads.acc(arg, &g, Bin::Add);
            }
            Op::Narrow(arg, dim, start, len) => {
                let ad = arg.dims().to_vec();
                let lp = (*start > 0).then(|| {
                    let mut d = ad.clone();
                    d[*dim] = *start;
                    cx.zeros(&d, false)
                });
                let right = ad[*dim] - start - len;
                let rp = (right > 0).then(|| {
                    let mut d = ad.clone();
                    d[*dim] = right;
                    cx.zeros(&d, false)
                });
                let g = if lp.is_none() && rp.is_none() { grad.clone() } else { grad.out(&ad, false, Op::Copy(grad.clone())) };
                drop((lp, rp));
                grads.acc(arg, &g, Bin::Add);
            }
            Op::MaxPool(arg) => {
                let (h, w) = (arg.dims()[2], arg.dims()[3]);
                let up = node.out(&[arg.dims()[0], arg.dims()[1], h, w], false, Op::Upsample(node.clone()));
                let mask = arg.cmp().to_f32();
                let _ = up;
                let avg = mask.out(node.dims(), false, Op::AvgPool(mask.clone()));
                let ga = grad.mul(&avg);
                let gu = ga.out(&[arg.dims()[0], arg.dims()[1], h, w], false, Op::Upsample(ga.clone()));
                let g = gu.mul(&mask);
                grads.acc(arg, &g, Bin::Add);
            }
            Op::AvgPool(arg) => {
                let (h, w) = (arg.dims()[2], arg.dims()[3]);
                let gu = grad.out(&[arg.dims()[0], arg.dims()[1], h, w], false, Op::Upsample(grad.clone()));
                let g = gu.affine(1.0);
                grads.acc(arg, &g, Bin::Add);
            }
            Op::Upsample(arg) => {
                // `grad.conv2d(ones(c,1,s,s), groups = c)`: per channel a chunk conv, then a cat
                let g = arg.zeros_like();
                let sum = grads.take_or_zeros(arg);
                drop(sum);
                grads.0.insert(arg.id(), g);
            }
            Op::PoolCustom(arg) => {
                let g = arg.zeros_like();
                grads.acc(arg, &g, Bin::Add);
            }
            Op::IndexSelect(arg, ids) => {
                let sum = grads.take_or_zeros(arg);
                let ids = ids.contiguous();
                let new = sum.out(sum.dims(), false, Op::IndexAdd(sum.clone(), ids.clone(), grad.clone()));
                grads.0.insert(arg.id(), new);
                drop(sum);
            }
            Op::Gather(arg, _) => {
                let sum = grads.take_or_zeros(arg);
                let new = sum.out(sum.dims(), false, Op::Copy(sum.clone()));
                grads.0.insert(arg.id(), new);
                drop(sum);
            }
            Op::IndexAdd(..) | Op::Cmp(_) => {}
        }
        drop(grad);
        drop(orig);
    }
    grads
}

fn broadcast_back(arg: &T, node: &T, reduced: &[usize]) -> T {
    if arg.dims().len() == node.dims().len() {
        node.broadcast_as(arg.dims())
    } else {
        node.reshape(reduced).broadcast_as(arg.dims())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mlp() -> ModelSpec {
        ModelSpec::from_json(
            r#"{"input":{"shape":[64]},"layers":[{"kind":"linear","in_features":64,"out_features":128},
            {"kind":"relu"},{"kind":"linear","in_features":128,"out_features":10}]}"#,
        )
        .unwrap()
    }

    #[test]
    fn whole_forward_graph_stays_alive_until_the_step_ends() {
        let cfg = TrainConfig { batch: 32, optimizer: OptimizerKind::Sgd, framework: crate::Framework::Candle, ..Default::default() };
        let p = CandlePlan::new(&mlp(), &cfg).unwrap();
        let s = p.simulate(32, false);
        // forward retained: x@w.t() (32×128), +bias, relu, (32×10) twice, log-softmax pieces
        assert!(s.breakdown.activations >= 32 * 128 * 4 * 3, "{:?}", s.breakdown);
        let s2 = p.simulate(64, false);
        assert!(s2.peak > s.peak);
    }

    #[test]
    fn adamw_adds_two_moments_and_step_temporaries() {
        let sgd = TrainConfig { batch: 8, optimizer: OptimizerKind::Sgd, framework: crate::Framework::Candle, ..Default::default() };
        let adam = TrainConfig { optimizer: OptimizerKind::Adamw, ..sgd };
        let a = CandlePlan::new(&mlp(), &sgd).unwrap().simulate(8, false);
        let b = CandlePlan::new(&mlp(), &adam).unwrap().simulate(8, false);
        let params = (64 * 128 + 128 + 128 * 10 + 10) * 4;
        assert!(b.peak >= a.peak + 2 * params, "{} vs {}", b.peak, a.peak);
        assert_eq!(b.peak_phase, Some(Phase::Optimizer));
    }

    #[test]
    fn unsupported_kinds_are_named_with_their_path() {
        let spec = ModelSpec::from_json(r#"{"input":{"shape":[8, 16]},"layers":[{"kind":"lstm","input_size":16,"hidden_size":8}]}"#).unwrap();
        assert_eq!(unsupported(&spec.layers, "layers"), Some(("lstm", "layers[0]".to_string())));
    }
}
