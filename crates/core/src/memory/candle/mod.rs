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
//!
//! The files follow candle-core's own split: `ledger` counts bytes (what the allocator sees),
//! `tensor` holds the shadow tensors, their layouts and ops (candle's `tensor.rs`, `layout.rs`,
//! `op.rs`), `nn` the candle-nn functions, `model` the modules the verifier builds, and
//! `backward` mirrors `backprop.rs`. The tracing state (ledger, current layer row, category of
//! new storages) lives in one `Tracer` per trace, so traces share nothing.

mod backward;
mod ledger;
mod model;
mod nn;
mod step;
mod tensor;

use crate::error::{Error, Result};
use crate::layer::activation::GeluApprox;
use crate::layer::transformer::{FfnActivation, NormKind};
use crate::config::{Device, Mode, OptimizerKind, Precision, TrainConfig};
use crate::memory::breakdown::Category;
use crate::memory::simulate::{OptimizerCost, Phase};
use crate::layer::args::{NamedPadding, Padding};
use crate::spec::{Layer, Loss, ModelSpec};
use model::Model;
use std::rc::Rc;
use tensor::{product, Tensor, Tracer};
pub use step::CandleStep;

/// A spec ready to be traced with candle's semantics at any batch size.
#[derive(Debug, Clone)]
pub struct CandlePlan {
    spec: ModelSpec,
    config: TrainConfig,
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
        // fp32 only: the causal-LM loss's upcast is a no-op there (its shifted labels are ignored)
        if !matches!(spec.loss, Loss::CrossEntropy | Loss::CausalLm) {
            return Err(Error::Config("the candle profile models the cross-entropy loss only".into()));
        }
        if config.grad_accum != 1 {
            return Err(Error::Config("the candle profile models one micro-batch per step".into()));
        }
        unsupported(&spec.layers, "layers").map_or(Ok(()), |(kind, path)| {
            Err(Error::Layer { path, kind: kind.into(), message: "not supported by the candle profile".into() })
        })?;
        let plan = CandlePlan { spec: spec.clone(), config: *config };
        // trace once at batch 1 so shape problems surface here, not in `estimate`
        plan.trace(1, false)?;
        Ok(plan)
    }

    /// Optimizer state as candle-nn keeps it (AdamW: two moments per parameter, no step tensor).
    pub fn optimizer_cost(&self, param_bytes: u64) -> OptimizerCost {
        let state = match (self.config.mode, self.config.optimizer) {
            (Mode::Train, OptimizerKind::Adam | OptimizerKind::Adamw) => param_bytes.saturating_mul(2),
            _ => 0,
        };
        OptimizerCost { state, step_temporaries: 0 }
    }

    /// Simulates one steady-state step at `batch`. `peak_op` is left to the caller (it indexes
    /// the PyTorch op graph); the layer row of the peak is in [`CandleStep::peak_layer`].
    pub fn simulate(&self, batch: u64, timeline: bool) -> CandleStep {
        // `new` traced the same spec successfully; shapes do not depend on the batch.
        self.trace(batch.max(1), timeline).unwrap_or_default()
    }

    fn trace(&self, batch: u64, record: bool) -> Result<CandleStep> {
        let tracer = Tracer::new(record, self.config.device == Device::Cuda);
        let train = self.config.mode == Mode::Train;
        // Persistent: the model's variables, the optimizer's state, the batch.
        tracer.set_category(Category::Parameters);
        let mut shape = self.spec.input.shape.clone();
        let tokens = self.spec.is_token_input();
        if let (Some(s), true) = (self.config.seq_len, self.spec.is_sequence_input()) {
            shape[0] = s;
        }
        let mut model = Model::new(&tracer, train);
        let layers = model.build(&self.spec.layers)?;
        tracer.set_category(Category::OptimizerState);
        let moments: Vec<(Tensor, Tensor)> = if train && self.config.optimizer != OptimizerKind::Sgd {
            model.vars.iter().map(|v| (tracer.var(v.dims()), tracer.var(v.dims()))).collect()
        } else {
            Vec::new()
        };
        tracer.set_category(Category::Input);
        let x = tracer.zeros(&[&[batch], shape.as_slice()].concat(), tokens);
        tracer.start_step();
        tracer.set_category(Category::Activations);
        let logits = model.forward(&layers, &x)?;
        if train {
            self.train_step(&tracer, &model, &moments, logits)?;
        } else {
            drop(logits);
        }
        drop((x, moments, layers, model));
        Ok(tracer.take_step())
    }

    /// Loss, backward and the optimizer step, as `opt.backward_step(&loss)` runs them.
    fn train_step(&self, tracer: &Rc<Tracer>, model: &Model, moments: &[(Tensor, Tensor)], logits: Tensor) -> Result<()> {
        let dims = logits.dims().to_vec();
        let rows = product(&dims[..dims.len() - 1]);
        tracer.set_category(Category::Input);
        let target = tracer.zeros(&[rows], true);
        tracer.set_category(Category::Activations);
        let loss = match self.spec.loss {
            Loss::CrossEntropy | Loss::CausalLm => {
                let logits_2d = if dims.len() == 2 { logits.clone() } else { logits.reshape(&[rows, dims[dims.len() - 1]]) };
                nn::cross_entropy(&logits_2d, &target)
            }
            Loss::Mse => return Err(Error::Config("the candle profile models the cross-entropy loss only".into())),
        };
        drop(logits);
        tracer.set_phase(Phase::Backward);
        tracer.set_category(Category::Gradients);
        let grads = backward::backward(tracer, &loss);
        tracer.set_phase(Phase::Optimizer);
        tracer.set_layer(u32::MAX);
        tracer.set_category(Category::Temporaries);
        match self.config.optimizer {
            OptimizerKind::Sgd => {
                for v in &model.vars {
                    if let Some(g) = grads.get(v) {
                        nn::sgd_update(v, g);
                    }
                }
            }
            _ => {
                for (v, (m, s)) in model.vars.iter().zip(moments) {
                    if let Some(g) = grads.get(v) {
                        nn::adamw_update(v, m, s, g);
                    }
                }
            }
        }
        drop((grads, loss, target));
        Ok(())
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
            Layer::Embedding(e) => e.tied_weight,
            Layer::PositionalEmbedding(_) | Layer::SelectToken(_) => false,
            Layer::TransformerEncoderLayer(t) => {
                t.gated_mlp || t.rotary || t.fused_qkv || t.num_kv_heads.is_some_and(|k| k != t.nhead) || t.norm != NormKind::LayerNorm
                    || matches!(t.activation, FfnActivation::GeluNew | FfnActivation::QuickGelu)
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
    fn steps_beyond_64_bits_are_too_large_not_wrapped() {
        use crate::memory::MAX_BATCH;
        let cfg = TrainConfig { batch: MAX_BATCH, framework: crate::Framework::Candle, ..Default::default() };
        // VGG-16's activations at the largest batch; an input of 2^40 × 2^24 = 2^64 values, whose
        // element count alone would wrap to 0
        let wide = r#"{"input":{"shape":[16777216]},"layers":[{"kind":"linear","in_features":16777216,"out_features":2}]}"#;
        for spec in [crate::presets::build("vgg16").unwrap(), ModelSpec::from_json(wide).unwrap()] {
            let step = CandlePlan::new(&spec, &TrainConfig { batch: 1, ..cfg }).unwrap().simulate(MAX_BATCH, false);
            assert_eq!((step.peak, step.peak_reserved), (u64::MAX, u64::MAX));
            match crate::estimate(&spec, &cfg) {
                Err(Error::TooLarge(m)) => assert!(m.contains("more than 2^64 bytes"), "{m}"),
                other => panic!("expected TooLarge, got {other:?}"),
            }
        }
        // a small model at the same batch still fits, and its peak grows exactly linearly there
        let plan = CandlePlan::new(&mlp(), &cfg).unwrap();
        let peak = |b: u64| plan.simulate(b, false).peak;
        let per_sample = (peak(1 << 21) - peak(1 << 20)) >> 20;
        assert_eq!(peak(MAX_BATCH), peak(1 << 20) + (MAX_BATCH - (1 << 20)) * per_sample);
    }

    #[test]
    fn unsupported_kinds_are_named_with_their_path() {
        let spec = ModelSpec::from_json(r#"{"input":{"shape":[8, 16]},"layers":[{"kind":"lstm","input_size":16,"hidden_size":8}]}"#).unwrap();
        assert_eq!(unsupported(&spec.layers, "layers"), Some(("lstm", "layers[0]".to_string())));
    }
}
