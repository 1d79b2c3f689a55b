//! The ops diffusers' modules run, written once over the core's op vocabulary (`lower.rs`) and
//! its layer families (`layer/*.rs`), so a denoiser's or a VAE's forward is simulated storage by
//! storage like any other model. Shapes are per sample: `[C, H, W]` (or `[C, F, H, W]`) for
//! feature maps, `[S, D]` for token sequences.

use crate::graph::{GradRule, ValueId};
use crate::layer::activation::{self, Saves};
use crate::layer::args::{Padding, Pair};
use crate::layer::conv::Conv2d;
use crate::layer::linear::Linear;
use crate::layer::norm::{GroupNorm, LayerNorm, RmsNorm};
use crate::layer::LayerResult;
use crate::lower::{Builder, CastPolicy};
use crate::units::{DType, Shape};

/// `nn.Conv2d(cin, cout, k, stride, padding)` with a bias (and kohya's `LoRAModule` where its
/// network wraps it: `layer/lora_kohya.rs`).
pub fn conv(b: &mut Builder, x: ValueId, cin: u64, cout: u64, k: u64, stride: u64, pad: u64) -> LayerResult<ValueId> {
    let out = plain_conv(b, x, cin, cout, k, stride, pad)?;
    if crate::layer::lora_kohya::is_targeted(b) {
        if let Some(y) = crate::layer::lora_kohya::adapt_conv(b, x, out, cin, cout, k) {
            return Ok(y);
        }
    }
    Ok(out)
}

fn plain_conv(b: &mut Builder, x: ValueId, cin: u64, cout: u64, k: u64, stride: u64, pad: u64) -> LayerResult<ValueId> {
    Conv2d {
        in_channels: cin,
        out_channels: cout,
        kernel_size: Pair::splat(k),
        stride: Pair::splat(stride),
        padding: Padding::Explicit(Pair::splat(pad)),
        dilation: Pair::splat(1),
        groups: 1,
        bias: true,
    }
    .lower(b, x)
}

/// `nn.Linear(i, o, bias)` over the last dimension.
pub fn linear(b: &mut Builder, x: ValueId, i: u64, o: u64, bias: bool) -> LayerResult<ValueId> {
    Linear { in_features: i, out_features: o, bias, tied_weight: false }.lower(b, x)
}

/// A linear diffusers names `role` (`to_q`, …: the LoRA targets).
pub fn linear_as(b: &mut Builder, x: ValueId, i: u64, o: u64, bias: bool, role: crate::finetune::LinearRole) -> LayerResult<ValueId> {
    b.role = Some(role);
    linear(b, x, i, o, bias)
}

/// `nn.GroupNorm(groups, c, eps, affine=True)` over `[C, ...]`.
pub fn group_norm(b: &mut Builder, x: ValueId, groups: u64, c: u64, eps: f64) -> LayerResult<ValueId> {
    GroupNorm { num_groups: groups, num_channels: c, eps, affine: true }.lower(b, x)
}

/// `nn.LayerNorm(d, elementwise_affine)` over the last dimension.
pub fn layer_norm(b: &mut Builder, x: ValueId, d: u64, affine: bool) -> LayerResult<ValueId> {
    LayerNorm { normalized_shape: d, eps: 1e-5, elementwise_affine: affine, bias: affine }.lower(b, x)
}

/// diffusers' `RMSNorm(d, eps, elementwise_affine=True)` (`normalization.py`): the variance in
/// fp32, the input scaled in its dtype's promotion, the weight applied after a cast back.
pub fn rms_norm(b: &mut Builder, x: ValueId, d: u64) -> LayerResult<ValueId> {
    RmsNorm { normalized_shape: d, eps: 1e-6, t5: false }.lower(b, x)
}

pub fn silu(b: &mut Builder, x: ValueId) -> ValueId {
    activation::unary(b, "silu", x, Saves::Input)
}

pub fn gelu(b: &mut Builder, x: ValueId) -> ValueId {
    activation::unary(b, "gelu", x, Saves::Input)
}

pub fn add(b: &mut Builder, x: ValueId, y: ValueId) -> ValueId {
    activation::add(b, x, y)
}

pub fn mul(b: &mut Builder, x: ValueId, y: ValueId) -> ValueId {
    activation::mul(b, x, y)
}

/// An element-wise op with a scalar (`x / factor`, `x * (1 + s)` against a per-sample vector
/// counts as [`mul`]): a new tensor of `x`'s shape.
pub fn scalar(b: &mut Builder, name: &'static str, x: ValueId) -> ValueId {
    activation::unary(b, name, x, Saves::Nothing)
}

/// A contiguous copy into `shape` (`permute(...).reshape(...)`, `.contiguous()`).
pub fn copy(b: &mut Builder, x: ValueId, shape: Shape) -> ValueId {
    let dt = b.dtype(x);
    b.op("clone", &[x], &[(shape, dt)], &[], false, &[], GradRule::Alias)[0]
}

/// `torch.cat` of per-sample tensors into `shape`.
pub fn cat(b: &mut Builder, xs: &[ValueId], shape: Shape) -> ValueId {
    let (ins, dt) = b.autocast(CastPolicy::Promote, xs);
    // backward: each input's gradient a slice of the output's (measured: the skip connections'
    // gradients keep the whole concatenation's alive until the down path's backward)
    b.op("cat", &ins, &[(shape, dt)], &[], false, &[], GradRule::Slices)[0]
}

/// `F.interpolate(x, scale_factor=2.0, mode="nearest")` of `[C, H, W]`.
pub fn upsample2x(b: &mut Builder, x: ValueId) -> ValueId {
    let s = b.shape(x).0.clone();
    let out = Shape::new([s[0], s[1].saturating_mul(2), s[2].saturating_mul(2)]);
    let dt = b.dtype(x);
    b.op("upsample_nearest2d", &[x], &[(out, dt)], &[], false, &[], GradRule::Alloc)[0]
}

/// `F.pad` of `[C, H, W]` by `(0, 1, 0, 1)` (diffusers' `Downsample2D` with `padding=0`).
pub fn pad_right_bottom(b: &mut Builder, x: ValueId) -> ValueId {
    let s = b.shape(x).0.clone();
    let out = Shape::new([s[0], s[1].saturating_add(1), s[2].saturating_add(1)]);
    let dt = b.dtype(x);
    b.op("constant_pad_nd", &[x], &[(out, dt)], &[], false, &[], GradRule::Alloc)[0]
}

/// `F.scaled_dot_product_attention` of `[H, Sq, hd]` against `[H, Skv, hd]` keys and values
/// (no mask, no dropout): the fused kernels' output `[H, Sq, hd]` and a `[H, Sq]` fp32
/// log-sum-exp (an output outside autograd too, dropped at once). `q`, `k`, `v` are views of
/// their projections. Returns the output viewed as `[Sq, H·hd]` (the kernels write that layout,
/// so `transpose(1, 2).reshape(...)` is free).
pub fn sdpa(b: &mut Builder, q: ValueId, k: ValueId, v: ValueId) -> ValueId {
    let qs = b.shape(q).0.clone();
    let (h, sq, hd) = (qs[0], qs[1], qs[2]);
    let (ins, dt) = b.autocast(CastPolicy::Lower, &[q, k, v]);
    let lse = (Shape::new([h, sq]), true, DType::F32);
    let out = b.op("sdpa", &ins, &[(Shape::new([h, sq, hd]), dt)], &ins, true, &[lse], GradRule::Alloc)[0];
    if !b.training() {
        b.last_fwd_scratch(crate::graph::Lin { fixed: 0, per_sample: h.saturating_mul(sq).saturating_mul(4) });
    }
    b.view(out, Shape::new([sq, h.saturating_mul(hd)]))
}

/// `x.view(S, H, hd).transpose(0, 1)`: a view as `[H, S, hd]`.
pub fn heads(b: &mut Builder, x: ValueId, h: u64) -> ValueId {
    let s = b.shape(x).0.clone();
    let (seq, d) = (s[0], s[1]);
    b.view(x, Shape::new([h, seq, d / h.max(1)]))
}

/// Keeps `vs` alive to the last op so far: a Python local (or the caller's argument) that still
/// references them until the module's `forward` returns.
pub fn keep(b: &mut Builder, vs: &[ValueId]) {
    for &v in vs {
        b.hold(v);
    }
}

/// A per-sample vector input `[D]` (a timestep embedding's sinusoid, pooled text embeddings).
pub fn vector_input(b: &mut Builder, d: u64) -> ValueId {
    let dt = b.float_dtype();
    b.input(Shape::new([d]), dt)
}

/// diffusers' `TimestepEmbedding(in, out)`: `linear_2(silu(linear_1(x)))`.
pub fn timestep_embedding(b: &mut Builder, x: ValueId, i: u64, o: u64) -> LayerResult<ValueId> {
    let h = linear(b, x, i, o, true)?;
    let h = silu(b, h);
    linear(b, h, o, o, true)
}

/// `torch.nn.RMSNorm(d, elementwise_affine=True)` (Wan's and Flux's `norm_q` / `norm_k`): aten's
/// composite `rms_norm` (`aten/src/ATen/native/layer_norm.cpp`) upcasts the input, `pow(2)`,
/// `mean`, `add_(eps)` in place, `rsqrt`, multiplies in fp32 (the weight too), then
/// `type_as(input)`. Backward keeps the fp32 copy and the `rsqrt`, not the input itself
/// (measured: `tests/data/diffusion_lora.jsonl`).
pub fn torch_rms_norm(b: &mut Builder, x: ValueId, d: u64) -> ValueId {
    let w = b.param(Shape::new([d]));
    let dt = b.dtype(x);
    let xf = b.cast(x, DType::F32);
    let sq = activation::unary(b, "pow", xf, Saves::Input);
    let rows = b.shape(x).with_last(1);
    let mean = b.op("mean", &[sq], &[(rows, DType::F32)], &[], false, &[], GradRule::Alloc)[0];
    let var = b.inplace("add_", mean, None, false, GradRule::Alias);
    let inv = activation::unary(b, "rsqrt", var, Saves::Output);
    let normed = mul(b, xf, inv);
    let scaled = mul(b, normed, w);
    b.cast(scaled, dt)
}
