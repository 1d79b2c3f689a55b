//! Element-wise activations, dropout and softmax, plus the element-wise helpers other layers use.

use super::LayerResult;
use crate::graph::{GradRule, Value, ValueId};
use crate::lower::{Builder, CastPolicy};
use crate::serde_util::is_false;
use crate::units::DType;
use serde::{Deserialize, Serialize};

/// Feed-forward activation of a transformer layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum FfnActivation {
    #[default]
    Relu,
    Gelu,
    /// `gelu(approximate='tanh')`.
    GeluTanh,
    /// Hugging Face's `gelu_new`, written in Python ops (GPT-2).
    GeluNew,
    Silu,
    /// `x * sigmoid(1.702 x)` (CLIP's `quick_gelu`): saves `x` and the sigmoid's output.
    QuickGelu,
    /// BLOOM's `BloomGelu` (`modeling_bloom.py`): the tanh GELU as a custom autograd function
    /// written in Python ops, saving `x`; its forward and backward build their polynomials from
    /// out-of-place temporaries ([`bloom_gelu`]).
    BloomGelu,
    /// transformers' `ReLUSquaredActivation` (`activations.py`, `hidden_act: relu2`, Nemotron):
    /// `torch.square(relu(x))` ([`relu2`]).
    Relu2,
}

/// `GeLUFunction.apply(x)` of `modeling_bloom.py`: saves `x`. `bloom_gelu_forward` evaluates
/// `x * 0.5 * (1.0 + tanh(0.79788456 * x * (1 + 0.044715 * x * x)))` left to right: at most four
/// `x`-sized temporaries live at once (`x * 0.5`, `0.79788456 * x`, `0.044715 * x` and its
/// product with `x`), three beyond the output. `bloom_gelu_back` holds `tanh_out`, `0.5 * x`,
/// `1 - tanh_out²`, `0.1070322243 * x` and its product with `x` at once: four beyond the
/// gradient it returns. Read from the source, not measured separately.
pub fn bloom_gelu(b: &mut Builder, x: ValueId) -> ValueId {
    let bytes = b.value(x).shape.numel().saturating_mul(b.dtype(x).size());
    let y = unary(b, "bloom_gelu", x, Saves::Input);
    b.last_fwd_scratch(crate::graph::Lin { fixed: 0, per_sample: bytes.saturating_mul(3) });
    b.last_bwd_scratch(crate::graph::Lin { fixed: 0, per_sample: bytes.saturating_mul(4) });
    y
}

/// What an element-wise op keeps for its backward.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Saves {
    Nothing,
    Input,
    Output,
}

/// An out-of-place unary op in the input's dtype.
pub fn unary(b: &mut Builder, name: &'static str, x: ValueId, saves: Saves) -> ValueId {
    let (shape, dt) = (b.shape(x).clone(), b.dtype(x));
    let save_in: &[ValueId] = if saves == Saves::Input { &[x] } else { &[] };
    b.op(name, &[x], &[(shape, dt)], save_in, saves == Saves::Output, &[], GradRule::Alloc)[0]
}

/// `x.clone()`: a copy; its gradient is the incoming one, passed on.
pub fn clone(b: &mut Builder, x: ValueId) -> ValueId {
    let (shape, dt) = (b.shape(x).clone(), b.dtype(x));
    b.op("clone", &[x], &[(shape, dt)], &[], false, &[], GradRule::Alias)[0]
}

/// `a * b` (both saved: each one's gradient needs the other).
pub fn mul(b: &mut Builder, x: ValueId, y: ValueId) -> ValueId {
    let (ins, dt) = b.autocast(CastPolicy::Promote, &[x, y]);
    let shape = broadcast(b, ins[0], ins[1]);
    let rg_x = b.value(ins[0]).requires_grad;
    let rg_y = b.value(ins[1]).requires_grad;
    // mul saves the other operand for each input that needs a gradient.
    let mut saved = vec![];
    if rg_x {
        saved.push(ins[1]);
    }
    if rg_y {
        saved.push(ins[0]);
    }
    b.op("mul", &ins, &[(shape, dt)], &saved, false, &[], GradRule::Alloc)[0]
}

/// transformers' `QuickGELUActivation` (`activations.py`): `input * torch.sigmoid(1.702 * input)`;
/// the scaled copy is transient, sigmoid saves its output, the product both operands.
pub fn quick_gelu(b: &mut Builder, x: ValueId) -> ValueId {
    let scaled = unary(b, "mul_scalar", x, Saves::Nothing);
    let sig = unary(b, "sigmoid", scaled, Saves::Output);
    mul(b, x, sig)
}

/// `ReLUSquaredActivation.forward` (transformers `activations.py`): `relu(input)` saves its
/// output, `torch.square` (`pow(x, 2)`) saves its input — that same tensor — and its own
/// `[.., I]` output is the one the down projection saves: two intermediate-sized tensors per
/// layer stay for the backward, and during the square the forward's `input` is alive too (read from the source; Nemotron's traces,
/// `tests/generate_dense2.rs`, measure them).
pub fn relu2(b: &mut Builder, x: ValueId) -> ValueId {
    let r = unary(b, "relu", x, Saves::Output);
    let y = unary(b, "square", r, Saves::Input);
    // `input` (the up projection's output) is the forward's argument: alive through the square
    b.hold(x);
    y
}

/// `a + b`, out of place: saves nothing, passes the gradient through.
pub fn add(b: &mut Builder, x: ValueId, y: ValueId) -> ValueId {
    let (ins, dt) = b.autocast(CastPolicy::Promote, &[x, y]);
    let shape = broadcast(b, ins[0], ins[1]);
    b.op("add", &ins, &[(shape, dt)], &[], false, &[], GradRule::Alias)[0]
}

/// The larger of two broadcastable shapes; of two as large, the one of higher rank (a `[D]`
/// weight times a one-token `[1, D]` input is `[1, D]`).
fn broadcast(b: &Builder, x: ValueId, y: ValueId) -> crate::units::Shape {
    let (sx, sy) = (b.shape(x), b.shape(y));
    if (sx.numel(), sx.rank()) >= (sy.numel(), sy.rank()) {
        sx.clone()
    } else {
        sy.clone()
    }
}

/// `nn.ReLU(inplace=False)`; the backward uses the output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Relu {
    #[serde(default, skip_serializing_if = "is_false")]
    pub inplace: bool,
}

impl Relu {
    pub fn lower(&self, b: &mut Builder, x: ValueId) -> LayerResult<ValueId> {
        let inplace = b.opts.inplace_relu.unwrap_or(self.inplace);
        Ok(if inplace && can_write(b, x) {
            b.inplace("relu_", x, None, true, GradRule::Alloc)
        } else {
            unary(b, "relu", x, Saves::Output)
        })
    }
}

/// In-place writes are only legal on activations (not on the input batch or a leaf).
fn can_write(b: &Builder, x: ValueId) -> bool {
    b.g.storages[b.g.storage_of(x) as usize].class == crate::graph::StorageClass::Activation
}

/// `nn.LeakyReLU(negative_slope=0.01)`; saves its input (its output when in place).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LeakyRelu {
    #[serde(default = "slope")]
    pub negative_slope: f64,
    #[serde(default, skip_serializing_if = "is_false")]
    pub inplace: bool,
}

fn slope() -> f64 {
    0.01
}

impl LeakyRelu {
    pub fn lower(&self, b: &mut Builder, x: ValueId) -> LayerResult<ValueId> {
        Ok(if self.inplace && can_write(b, x) {
            b.inplace("leaky_relu_", x, None, true, GradRule::Alloc)
        } else {
            unary(b, "leaky_relu", x, Saves::Input)
        })
    }
}

/// `nn.GELU(approximate='none'|'tanh')`; `"new"` is Hugging Face's `gelu_new`, written in
/// Python ops (GPT-2), which keeps four tensors for backward.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Gelu {
    #[serde(default)]
    pub approximate: GeluApprox,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum GeluApprox {
    #[default]
    None,
    Tanh,
    New,
}

impl Gelu {
    pub fn lower(&self, b: &mut Builder, x: ValueId) -> LayerResult<ValueId> {
        Ok(match self.approximate {
            GeluApprox::None | GeluApprox::Tanh => unary(b, "gelu", x, Saves::Input),
            GeluApprox::New => gelu_new(b, x),
        })
    }
}

/// `0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))`, op by op, in Python's order
/// (`0.5 * input` first, alive while the rest is computed: transformers `NewGELUActivation`).
fn gelu_new(b: &mut Builder, x: ValueId) -> ValueId {
    let half_x = unary(b, "mul_scalar", x, Saves::Nothing);
    let cube = unary(b, "pow", x, Saves::Input);
    let scaled = unary(b, "mul_scalar", cube, Saves::Nothing);
    let inner = add(b, x, scaled);
    let inner = unary(b, "mul_scalar", inner, Saves::Nothing);
    let th = unary(b, "tanh", inner, Saves::Output);
    let one_plus = unary(b, "add_scalar", th, Saves::Nothing);
    mul(b, half_x, one_plus)
}

/// `nn.SiLU`; saves its input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Silu {
    #[serde(default, skip_serializing_if = "is_false")]
    pub inplace: bool,
}

impl Silu {
    pub fn lower(&self, b: &mut Builder, x: ValueId) -> LayerResult<ValueId> {
        Ok(unary(b, "silu", x, Saves::Input))
    }
}

/// `nn.Softmax(dim)`; saves its output. Autocast on CUDA runs it in fp32.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Softmax {
    #[serde(default = "minus_one")]
    pub dim: i64,
}

fn minus_one() -> i64 {
    -1
}

impl Softmax {
    pub fn lower(&self, b: &mut Builder, x: ValueId) -> LayerResult<ValueId> {
        let rank = b.shape(x).rank() as i64 + 1;
        if self.dim < -rank || self.dim >= rank {
            return Err(format!("dim {} is out of range for a {rank}-d input (batch included)", self.dim));
        }
        Ok(softmax(b, x, None))
    }
}

/// Softmax over the last dimension, optionally forcing the output dtype (`dtype=torch.float32`).
pub fn softmax(b: &mut Builder, x: ValueId, out_dtype: Option<DType>) -> ValueId {
    let policy = b.norm_policy();
    let (ins, dt) = b.autocast(policy, &[x]);
    let dt = out_dtype.unwrap_or(dt);
    let shape = b.shape(x).clone();
    b.op("softmax", &ins, &[(shape, dt)], &[], true, &[], GradRule::Alloc)[0]
}

/// Multiplication by a constant (Gemma's embedding normaliser `hidden * sqrt(hidden_size)`):
/// a new output; nothing is saved (the constant needs no gradient).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scale {
    pub factor: f64,
    /// The scaled embeddings replace the base model's `inputs_embeds` local (Granite's
    /// `inputs_embeds = inputs_embeds * self.embedding_multiplier`, `modeling_granite.py`): in an
    /// inference forward the embedding's own output is freed here and this one is kept to the
    /// head (`memory::generate::hold_text_model_locals`); Gemma's `hidden_states =
    /// inputs_embeds * normalizer` keeps both (false).
    #[serde(default, skip_serializing_if = "is_false")]
    pub rebinds_embeds: bool,
}

impl Scale {
    pub fn lower(&self, b: &mut Builder, x: ValueId) -> LayerResult<ValueId> {
        if !self.factor.is_finite() {
            return Err(format!("factor must be a finite number, got {}", self.factor));
        }
        Ok(unary(b, if self.rebinds_embeds { "mul_scalar_embeds" } else { "mul_scalar" }, x, Saves::Nothing))
    }
}

/// Logit soft-capping `tanh(x / cap) · cap` (Gemma 2's `final_logit_softcapping`), op by op:
/// three outputs the size of the input, of which `tanh` keeps its own for backward.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogitSoftcap {
    pub cap: f64,
}

impl LogitSoftcap {
    pub fn lower(&self, b: &mut Builder, x: ValueId) -> LayerResult<ValueId> {
        if !(self.cap.is_finite() && self.cap > 0.0) {
            return Err(format!("cap must be a positive number, got {}", self.cap));
        }
        let y = unary(b, "div_scalar", x, Saves::Nothing);
        let y = unary(b, "tanh", y, Saves::Output);
        Ok(unary(b, "mul_scalar", y, Saves::Nothing))
    }
}

/// `nn.Dropout(p=0.5)`: in training, an output and a 1-byte mask (CUDA's `native_dropout`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dropout {
    #[serde(default = "half")]
    pub p: f64,
    #[serde(default, skip_serializing_if = "is_false")]
    pub inplace: bool,
}

fn half() -> f64 {
    0.5
}

impl Dropout {
    pub fn lower(&self, b: &mut Builder, x: ValueId) -> LayerResult<ValueId> {
        if !(0.0..=1.0).contains(&self.p) {
            return Err(format!("dropout probability must be between 0 and 1, got {}", self.p));
        }
        Ok(dropout(b, x, self.p))
    }
}

pub fn dropout(b: &mut Builder, x: ValueId, p: f64) -> ValueId {
    if !b.training() || p == 0.0 {
        return x;
    }
    let (shape, dt, batched) = (b.shape(x).clone(), b.dtype(x), b.value(x).batched);
    // CUDA's native_dropout keeps a bool mask; CPU eager keeps the scaled float noise tensor.
    let mask = match b.opts.device {
        crate::config::Device::Cuda => DType::Bool,
        crate::config::Device::Cpu => dt,
    };
    let recorded = b.value(x).requires_grad;
    let out = b.op("native_dropout", &[x], &[(shape.clone(), dt)], &[], false, &[(shape.clone(), batched, mask)], GradRule::Alloc)[0];
    if !recorded {
        // outside autograd the mask (CUDA) or noise tensor (CPU `_dropout_impl`) still exists
        // while the op runs, and dies with it (a frozen backbone's forward)
        let bytes = Value { storage: 0, shape, batched, dtype: mask, requires_grad: false }.bytes();
        b.last_fwd_scratch(bytes);
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::layer::test_util::{error, one};
    use crate::units::DType;
    use serde_json::json;

    #[test]
    fn element_wise_layers_keep_the_shape_and_have_no_parameters() {
        for layer in [
            json!({"kind": "relu"}),
            json!({"kind": "leaky_relu", "negative_slope": 0.2}),
            json!({"kind": "gelu"}),
            json!({"kind": "gelu", "approximate": "tanh"}),
            json!({"kind": "gelu", "approximate": "new"}),
            json!({"kind": "silu"}),
            json!({"kind": "tanh"}),
            json!({"kind": "sigmoid"}),
            json!({"kind": "softmax", "dim": -1}),
            json!({"kind": "dropout", "p": 0.1}),
        ] {
            let a = one(layer.clone(), &[3, 5, 7]);
            assert_eq!((a.shape, a.params), (vec![3, 5, 7], 0), "{layer}");
        }
    }

    #[test]
    fn softmax_and_dropout_arguments() {
        // dims count the batch, as in PyTorch: a [N, 5, 7] tensor has dims −3..=2
        assert_eq!(one(json!({"kind": "softmax", "dim": -3}), &[5, 7]).shape, [5, 7]);
        let e = error(json!({"kind": "softmax", "dim": 3}), &[5, 7]);
        assert!(e.contains("dim 3 is out of range"), "{e}");
        // nn.Dropout(p=1.5): "dropout probability has to be between 0 and 1"
        let e = error(json!({"kind": "dropout", "p": 1.5}), &[5, 7]);
        assert!(e.contains("between 0 and 1"), "{e}");
    }

    /// The storages a `linear` followed by `layer` allocates per sample, in the layer's ops (the
    /// loss, which the last row also owns, left out).
    fn allocs_after_linear(layer: serde_json::Value) -> Vec<u64> {
        let a = one(json!({"kind": "sequential", "layers": [{"kind": "linear", "in_features": 8, "out_features": 8}, layer]}), &[4, 8]);
        let g = &a.resolved.graph;
        g.ops
            .iter()
            .filter(|o| o.layer == 2 && !matches!(o.name, "log_softmax" | "nll_loss"))
            .flat_map(|o| o.allocs.iter().map(|&s| g.storages[s as usize].bytes.per_sample))
            .collect()
    }

    #[test]
    fn dropout_keeps_a_one_byte_mask_and_relu_inplace_allocates_nothing() {
        // CUDA's native_dropout: a float32 output (4·8·4 bytes) and a bool mask (4·8 bytes)
        assert_eq!(allocs_after_linear(json!({"kind": "dropout", "p": 0.1})), [128, 32]);
        // p = 0: PyTorch's F.dropout still runs, but the core treats it as the identity
        assert_eq!(allocs_after_linear(json!({"kind": "dropout", "p": 0.0})), Vec::<u64>::new());
        // nn.ReLU(inplace=True) writes into its input's storage; out of place it allocates one output
        assert_eq!(allocs_after_linear(json!({"kind": "relu", "inplace": true})), Vec::<u64>::new());
        assert_eq!(allocs_after_linear(json!({"kind": "relu"})), [128]);
        assert_eq!(DType::Bool.size(), 1);
    }
}
