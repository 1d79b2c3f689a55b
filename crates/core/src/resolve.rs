//! Spec → resolved model: shape inference through every layer and lowering to the op graph.
//! Errors name the layer's path (`layers[3].body[1]`), its kind and what did not fit.

use crate::error::{Error, Result};
use crate::graph::{GradRule, Graph, ValueId};
use crate::lower::{Builder, LowerOptions};
use crate::path::{LayerPath, Slot};
use crate::spec::{InputDType, Join, Layer, Loss, ModelSpec};
use crate::units::{DType, Shape};
use serde::{Deserialize, Serialize};

/// Limits that keep an absurd spec from exhausting memory or time (a clear error instead).
pub const MAX_OPS: usize = 2_000_000;
pub const MAX_LAYERS: u64 = 200_000;
/// Per-sample output or parameter elements beyond which byte counts could overflow `u64`.
pub const MAX_ELEMENTS: u64 = 1 << 60;

/// One row of the per-layer table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LayerInfo {
    /// `layers[3].body[1]`.
    pub path: String,
    pub kind: String,
    /// Nesting depth (0 for top-level layers).
    pub depth: u32,
    /// Per-sample output shape (no batch dimension).
    pub output_shape: Shape,
    /// Parameters this layer owns (a block: its whole body).
    pub params: u64,
    /// Output elements per sample (the cs231n "memory" column).
    pub activation_values: u64,
    /// Whether this row is a block (its children follow it).
    pub block: bool,
}

/// The resolved model for one set of lowering options.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    pub graph: Graph,
    pub layers: Vec<LayerInfo>,
    /// The model's output value (before the loss).
    pub model_output: ValueId,
    pub input_shape: Shape,
}

/// Resolves `spec` with an optional sequence-length override for token/sequence inputs.
pub fn resolve(spec: &ModelSpec, seq_len: Option<u64>, opts: LowerOptions) -> Result<Resolved> {
    let mut shape = spec.input.shape.clone();
    if shape.is_empty() {
        return Err(Error::Input("`shape` needs at least one dimension (without the batch)".into()));
    }
    if shape.contains(&0) {
        return Err(Error::Input(format!("every dimension must be at least 1, got {:?}", shape)));
    }
    if let Some(s) = seq_len {
        if s == 0 {
            return Err(Error::Config("sequence length must be at least 1".into()));
        }
        if spec.is_sequence_input() {
            shape[0] = s;
        }
    }
    let input_shape = Shape(shape);
    if input_shape.numel() >= 1 << 40 {
        return Err(Error::TooLarge(format!("an input of {} values per sample", input_shape.numel())));
    }
    let mut b = Builder::new(opts);
    let dtype = match spec.input.dtype {
        InputDType::Int64 => DType::I64,
        InputDType::Float32 => b.float_dtype(),
    };
    let x = b.input(input_shape.clone(), dtype);
    if spec.layers.is_empty() {
        return Err(Error::Input("the model has no layers yet: add one".into()));
    }
    let mut r = Resolver { b, layers: Vec::new(), count: 0 };
    let out = match lm_head_keeps(spec, opts) {
        // `generate()`'s `logits_to_keep`: the LM head reads `hidden_states[:, -k:, :]`, a view
        // (`modeling_utils.slice_logits_to_keep`)
        Some(keep) => {
            let (head, body) = spec.layers.split_last().expect("layers checked non-empty above");
            let h = r.sequence(body, x, &LayerPath::default(), Slot::Layers, None, 0)?;
            let s = r.b.shape(h).clone();
            let h = match s.0.first() {
                Some(&n) if s.rank() == 2 && n > keep => r.b.view(h, Shape::new([keep, s.last()])),
                _ => h,
            };
            r.layer(head, h, &LayerPath::default().child_in_repetition(Slot::Layers, None, body.len()), 0)?
        }
        None => r.sequence(&spec.layers, x, &LayerPath::default(), Slot::Layers, None, 0)?,
    };
    let loss = if opts.training { r.loss(spec.loss, out, x)? } else { out };
    let mut graph = r.b.g;
    graph.output = loss;
    Ok(Resolved { graph, layers: r.layers, model_output: out, input_shape })
}

/// Positions the final `linear` (the LM head) computes in a generation forward, when limited.
fn lm_head_keeps(spec: &ModelSpec, opts: LowerOptions) -> Option<u64> {
    let keep = opts.generation?.logits_to_keep;
    (keep > 0 && matches!(spec.layers.last(), Some(Layer::Linear(_)))).then_some(keep)
}

struct Resolver {
    b: Builder,
    layers: Vec<LayerInfo>,
    count: u64,
}

impl Resolver {
    /// Lowers the list `slot` (repetition `repetition`) of the block at `parent`.
    fn sequence(&mut self, layers: &[Layer], mut x: ValueId, parent: &LayerPath, slot: Slot, repetition: Option<u64>, depth: u32) -> Result<ValueId> {
        for (i, layer) in layers.iter().enumerate() {
            x = self.layer(layer, x, &parent.child_in_repetition(slot.clone(), repetition, i), depth)?;
        }
        Ok(x)
    }

    fn layer(&mut self, layer: &Layer, x: ValueId, at: &LayerPath, depth: u32) -> Result<ValueId> {
        let path = &at.to_string();
        self.count += 1;
        if self.count > MAX_LAYERS || self.b.g.ops.len() > MAX_OPS {
            return Err(Error::TooLarge(format!(
                "the model has more than {MAX_LAYERS} layers or {MAX_OPS} ops (at {path})"
            )));
        }
        let row = self.layers.len();
        self.layers.push(LayerInfo {
            path: path.to_string(),
            kind: layer.kind().to_string(),
            depth,
            output_shape: Shape::default(),
            params: 0,
            activation_values: 0,
            block: false,
        });
        let params_before = self.b.param_numel;
        self.b.set_layer(row as u32);
        let err = |message: String| Error::Layer { path: path.to_string(), kind: layer.kind().to_string(), message };
        let out = match layer {
            Layer::Sequential { layers, checkpoint } => {
                self.layers[row].block = true;
                let opened = *checkpoint && self.b.begin_unit();
                let out = self.sequence(layers, x, at, Slot::Layers, None, depth + 1);
                if opened {
                    self.b.end_unit();
                }
                out?
            }
            Layer::Residual { body, shortcut, inplace } => {
                self.layers[row].block = true;
                let y = self.sequence(body, x, at, Slot::Body, None, depth + 1)?;
                let s = match shortcut {
                    Some(sc) => self.sequence(sc, x, at, Slot::Shortcut, None, depth + 1)?,
                    None => x,
                };
                let (ys, ss) = (self.b.shape(y).clone(), self.b.shape(s).clone());
                if ys != ss {
                    return Err(err(format!("body output {ys} does not match shortcut output {ss}")));
                }
                self.b.set_layer(row as u32);
                if *inplace && self.b.g.storages[self.b.g.storage_of(y) as usize].class == crate::graph::StorageClass::Activation {
                    self.b.inplace("add_", y, Some(s), false, crate::graph::GradRule::Alias)
                } else {
                    crate::layer::activation::add(&mut self.b, y, s)
                }
            }
            Layer::Repeat { times, body } => {
                self.layers[row].block = true;
                if *times == 0 {
                    return Err(err("`times` must be at least 1".into()));
                }
                if times.saturating_mul(body.len().max(1) as u64) > MAX_LAYERS {
                    return Err(Error::TooLarge(format!("{path} repeats {} layers {times} times", body.len())));
                }
                let mut y = x;
                for i in 0..*times {
                    let opened = self.b.begin_unit();
                    let r = self.sequence(body, y, at, Slot::Body, Some(i), depth + 1);
                    if opened {
                        self.b.end_unit();
                    }
                    y = r?;
                }
                y
            }
            Layer::Parallel { branches, join } => {
                self.layers[row].block = true;
                if branches.is_empty() {
                    return Err(err("needs at least one branch".into()));
                }
                let mut outs = Vec::new();
                for (i, br) in branches.iter().enumerate() {
                    outs.push(self.sequence(br, x, at, Slot::Branch(i), None, depth + 1)?);
                }
                self.b.set_layer(row as u32);
                self.join(&outs, *join).map_err(err)?
            }
            leaf => leaf.lower_leaf(&mut self.b, x).map_err(err)?,
        };
        // the caller holds the module's input until the module returns
        self.b.hold(x);
        let shape = self.b.shape(out).clone();
        if shape.numel() > MAX_ELEMENTS || self.b.param_numel > MAX_ELEMENTS {
            return Err(Error::TooLarge(format!(
                "{path} ({}): more than 2^60 values in its output or parameters; bytes would not fit in 64 bits",
                layer.kind()
            )));
        }
        let params = self.b.param_numel - params_before;
        let info = &mut self.layers[row];
        info.activation_values = shape.numel();
        info.output_shape = shape;
        info.params = params;
        Ok(out)
    }

    fn join(&mut self, outs: &[ValueId], join: Join) -> std::result::Result<ValueId, String> {
        let first = self.b.shape(outs[0]).clone();
        match join {
            Join::Add => {
                let mut acc = outs[0];
                for &o in &outs[1..] {
                    if self.b.shape(o) != &first {
                        return Err(format!("branch outputs {} and {} cannot be added", first, self.b.shape(o)));
                    }
                    acc = crate::layer::activation::add(&mut self.b, acc, o);
                }
                Ok(acc)
            }
            Join::Concat => {
                let mut channels = 0u64;
                for &o in outs {
                    let s = self.b.shape(o);
                    if s.rank() != first.rank() || s.0[1..] != first.0[1..] {
                        return Err(format!("branch outputs {} and {} differ beyond the channel dimension", first, s));
                    }
                    channels = channels.saturating_add(s.0[0]);
                }
                let mut shape = first.0.clone();
                shape[0] = channels;
                let (ins, dt) = self.b.autocast(crate::lower::CastPolicy::Promote, outs);
                Ok(self.b.op("cat", &ins, &[(Shape(shape), dt)], &[], false, &[], crate::graph::GradRule::Alloc)[0])
            }
        }
    }

    /// The loss: `cross_entropy` = `log_softmax` (saved, N×C) + `nll_loss`; or `mse_loss`.
    /// `input` is the model's input (the labels of a causal LM).
    fn loss(&mut self, loss: Loss, out: ValueId, input: ValueId) -> Result<ValueId> {
        let b = &mut self.b;
        b.set_layer(self.layers.len().saturating_sub(1) as u32);
        let shape = b.shape(out).clone();
        let scalar = Shape::new([]);
        Ok(match loss {
            Loss::CrossEntropy => {
                let rows = Shape::new([shape.numel() / shape.last().max(1)]);
                let target = b.input(rows, DType::I64);
                let (ins, dt) = b.autocast(crate::lower::CastPolicy::Fp32, &[out]);
                let logp = b.op("log_softmax", &ins, &[(shape, dt)], &[], true, &[], crate::graph::GradRule::Alloc)[0];
                let l = b.op("nll_loss", &[logp, target], &[(scalar, DType::F32)], &[logp], false, &[], crate::graph::GradRule::Alloc)[0];
                unbatch(b, l)
            }
            Loss::CausalLm => causal_lm_loss(b, out, input),
            Loss::Mse => {
                let target = b.input(shape, b.dtype(out));
                let (ins, _) = b.autocast(crate::lower::CastPolicy::Fp32, &[out, target]);
                let l = b.op("mse_loss", &ins, &[(scalar, DType::F32)], &ins, false, &[], crate::graph::GradRule::Alloc)[0];
                unbatch(b, l)
            }
        })
    }
}

/// transformers 5.24 `loss/loss_utils.py`, `ForCausalLMLoss`, called by `LlamaForCausalLM.forward`
/// (and every `…ForCausalLM`) with `labels=input_ids`:
/// `logits = logits.float()` (a new fp32 copy under half weights, nothing saved; its backward casts
/// the gradient back to the logits' dtype), `labels = pad(labels, (0, 1), value=-100)` and
/// `shift_labels = labels[..., 1:].contiguous()` (int64; the contiguous copy is `nll_loss`'s saved
/// target), then `cross_entropy` in fp32: `log_softmax` (output saved) and `nll_loss`. The model's
/// `logits` stay referenced by the forward (and its output) until the loss is computed.
fn causal_lm_loss(b: &mut Builder, logits: ValueId, input: ValueId) -> ValueId {
    let shape = b.shape(logits).clone();
    let rows = Shape::new([shape.numel() / shape.last().max(1)]);
    let target = if b.dtype(input) == DType::I64 && b.shape(input).numel() == rows.numel() {
        let padded = Shape::new([rows.numel().saturating_add(1)]);
        let padded = b.op("constant_pad_nd", &[input], &[(padded, DType::I64)], &[], false, &[], GradRule::Alloc)[0];
        b.op("contiguous", &[padded], &[(rows, DType::I64)], &[], false, &[], GradRule::Alloc)[0]
    } else {
        b.input(rows, DType::I64)
    };
    let upcast = b.cast(logits, DType::F32);
    let logp = b.op("log_softmax", &[upcast], &[(shape, DType::F32)], &[], true, &[], GradRule::Alloc)[0];
    let l = b.op("nll_loss", &[logp, target], &[(Shape::new([]), DType::F32)], &[logp, target], false, &[], GradRule::Alloc)[0];
    b.hold(logits);
    unbatch(b, l)
}

/// A reduced loss is one scalar for the whole batch, not one per sample.
fn unbatch(b: &mut Builder, v: ValueId) -> ValueId {
    let s = b.g.storage_of(v) as usize;
    b.g.values[v as usize].batched = false;
    b.g.storages[s].bytes = b.g.values[v as usize].bytes();
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::InputSpec;

    /// Every kind's example lowers on one of a few typical inputs: a kind whose row lacks an
    /// example or whose lowering does not handle it fails here.
    #[test]
    fn every_kind_has_an_example_that_lowers() {
        let inputs = [
            (vec![128], InputDType::Float32),
            (vec![16, 8, 8], InputDType::Float32),
            (vec![16, 8], InputDType::Float32),
            (vec![8, 128], InputDType::Float32),
            (vec![8], InputDType::Int64),
        ];
        for kind in Layer::KINDS {
            let layer = Layer::example(kind).unwrap_or_else(|| panic!("{kind} has no example"));
            let lowers = inputs.iter().any(|(shape, dtype)| {
                let input = InputSpec { shape: shape.clone(), dtype: *dtype, vocab_size: None };
                let spec = ModelSpec { version: 1, name: None, input, layers: vec![layer.clone()], loss: Loss::Mse };
                resolve(&spec, None, LowerOptions::default()).is_ok()
            });
            assert!(lowers, "{kind}: its example lowers on none of the test inputs");
        }
        assert!(Layer::LEAF_KINDS.iter().all(|k| Layer::KINDS.contains(k)));
    }
}
