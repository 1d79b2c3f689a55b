//! Swin's windowed attention blocks (`modeling_swin.py`, transformers 5.24): `swin_block` (one
//! `SwinLayer`: LayerNorm, (shifted) window attention with its relative position bias,
//! residual, LayerNorm, MLP, residual), `patch_merging` (`SwinPatchMerging`) and `token_mean`
//! (`SwinModel`'s `AdaptiveAvgPool1d(1)` over the tokens).
//!
//! A block's input is the `[H·W, C]` token map of its stage (`resolution` = `[H, W]`). Read from
//! `SwinLayer.forward`: `layernorm_before`, `view` to `[H, W, C]`, padding to whole windows (a
//! copy when needed), `torch.roll` by `-shift` (a copy, shifted blocks only), `window_partition`
//! (`transpose(2, 3).contiguous()`: a copy) to `[nW·T, C]` with `T = window²`; `SwinAttention`:
//! `q_proj`, `k_proj`, `v_proj` (biases per `qkv_bias`) and `o_proj` (biased), heads of `C /
//! heads`, the bias `relative_position_bias_table[(2w−1)², heads]` gathered by a `[T·T]` index
//! buffer and made contiguous as `[heads, T, T]` (once per block, not per sample); a shifted
//! block adds its `[nW, T, T]` mask, `expand(…).reshape(…)` copying it per sample, and the sum
//! with the bias is a `[nW, heads, T, T]` tensor per sample. Eager: `q kᵀ` (the matmul copies
//! and saves both), `* scaling`, `+ mask`, fp32 softmax (saved), dropout, `@ v`, the transposed
//! copy; SDPA: the kernel with that float mask (saved, and its gradient made when the bias
//! trains), its output already in the token-major layout. Then dropout, `window_reverse` (a copy), the reverse roll (a copy), cropping the
//! padding (a copy), `drop_path` (`x.div(keep) * random`: two new tensors), the residual, and
//! the MLP (`fc1`, activation, `fc2`, dropout, residual: no `drop_path`).

use super::activation::{add, dropout, mul, softmax, unary, Saves};
use super::attention::{bmm, copy};
use super::linear::Linear;
use super::norm::LayerNorm;
use super::sdpa::sdpa_backend;
use super::ssm::{seq_of, tensor};
use super::transformer::FfnActivation;
use super::{positive, LayerResult};
use crate::config::AttentionImpl;
use crate::graph::{GradRule, ValueId};
use crate::lower::Builder;
use crate::units::{DType, Shape};
use serde::{Deserialize, Serialize};

/// `SwinLayer(config, dim, input_resolution, num_heads, drop_path_rate, shift_size)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwinBlock {
    pub dim: u64,
    pub num_heads: u64,
    /// The stage's token grid `[H, W]` (the input is `[H·W, dim]`).
    pub resolution: [u64; 2],
    pub window_size: u64,
    /// A shifted window block (`shift_size = window_size // 2`).
    #[serde(default)]
    pub shift: bool,
    /// `int(mlp_ratio * dim)`
    pub intermediate_size: u64,
    #[serde(default = "yes")]
    pub qkv_bias: bool,
    /// `hidden_dropout_prob`
    #[serde(default)]
    pub dropout: f64,
    /// `attention_probs_dropout_prob`
    #[serde(default)]
    pub attention_dropout: f64,
    /// This block's stochastic-depth rate.
    #[serde(default)]
    pub drop_path: f64,
    #[serde(default = "gelu")]
    pub activation: FfnActivation,
    #[serde(default = "eps")]
    pub layer_norm_eps: f64,
}

fn yes() -> bool {
    true
}
fn gelu() -> FfnActivation {
    FfnActivation::Gelu
}
fn eps() -> f64 {
    1e-5
}

fn check_p(p: f64, what: &str) -> LayerResult<()> {
    if !(0.0..=1.0).contains(&p) {
        return Err(format!("{what} must be between 0 and 1, got {p}"));
    }
    Ok(())
}

impl SwinBlock {
    pub fn lower(&self, b: &mut Builder, x: ValueId) -> LayerResult<ValueId> {
        let (c, heads, w) = (self.dim, self.num_heads, self.window_size);
        for (v, n) in [(c, "dim"), (heads, "num_heads"), (w, "window_size"), (self.intermediate_size, "intermediate_size"), (self.resolution[0], "resolution"), (self.resolution[1], "resolution")] {
            positive(v, n)?;
        }
        if !c.is_multiple_of(heads) {
            return Err(format!("dim ({c}) must be divisible by num_heads ({heads})"));
        }
        for (p, n) in [(self.dropout, "dropout"), (self.attention_dropout, "attention_dropout"), (self.drop_path, "drop_path")] {
            check_p(p, n)?;
        }
        let [hh, ww] = self.resolution;
        let l = seq_of(b, x, c)?;
        if l != hh.saturating_mul(ww) {
            return Err(format!("expected {hh}×{ww} = {} tokens, got {l}", hh.saturating_mul(ww)));
        }
        let (hp, wp) = (hh.div_ceil(w).saturating_mul(w), ww.div_ceil(w).saturating_mul(w));
        let (nw, t) = ((hp / w).saturating_mul(wp / w), w.saturating_mul(w));
        let rows = nw.saturating_mul(t);
        let hd = c / heads;
        let ln = |b: &mut Builder, v| LayerNorm { normalized_shape: c, eps: self.layer_norm_eps, elementwise_affine: true, bias: true }.lower(b, v);
        let lin = |i, o, bias| Linear { in_features: i, out_features: o, bias, tied_weight: false };
        let y = ln(b, x)?;
        let mut y = y;
        let padded = hp != hh || wp != ww;
        if padded {
            y = copy(b, y, Shape::new([hp.saturating_mul(wp), c]));
        }
        if self.shift {
            y = copy(b, y, Shape::new([hp.saturating_mul(wp), c]));
        }
        // window_partition: `.contiguous()` of the transposed view
        let win = copy(b, y, Shape::new([rows, c]));
        let q = lin(c, c, self.qkv_bias).lower(b, win)?;
        let k = lin(c, c, self.qkv_bias).lower(b, win)?;
        let v = lin(c, c, self.qkv_bias).lower(b, win)?;
        let groups = nw.saturating_mul(heads);
        let (q, k, v) = (b.view(q, Shape::new([groups, t, hd])), b.view(k, Shape::new([groups, t, hd])), b.view(v, Shape::new([groups, t, hd])));
        let dt = b.dtype(q);
        // the bias: table[index] (saves the index buffer), `.permute(2, 0, 1).contiguous()`
        let table = b.param(Shape::new([(2 * w - 1).saturating_mul(2 * w - 1), heads]));
        b.buffer(t.saturating_mul(t), DType::I64);
        let gathered = b.op("index", &[table], &[(Shape::new([t, t, heads]), dt)], &[], false, &[], GradRule::Alloc)[0];
        let mut bias = copy(b, gathered, Shape::new([heads, t, t]));
        if self.shift {
            // the shift mask (per block, `[nW, T, T]`), expanded and reshaped per sample: a copy;
            // the sum with the bias broadcasts to `[nW, heads, T, T]` per sample
            let mask = tensor(b, "shift_mask", &[], Shape::new([nw, t, t]), dt, &[]);
            let per_sample = tensor(b, "reshape", &[mask, x], Shape::new([nw, t, t]), dt, &[]);
            bias = tensor(b, "add", &[bias, per_sample], Shape::new([groups, t, t]), dt, &[]);
        }
        let dropout_p = if b.training() { self.attention_dropout } else { 0.0 };
        let eager = b.opts.attention == AttentionImpl::Eager;
        let math = !eager && sdpa_backend(b.opts.device, dt, hd, true, dropout_p) == super::sdpa::SdpaBackend::Math;
        let out = if eager || math {
            let scores = bmm(b, q, k, Shape::new([groups, t, t]), true);
            let scores = unary(b, "mul_scalar", scores, Saves::Nothing);
            let scores = add(b, scores, bias);
            let probs = if eager {
                let f = b.cast(scores, DType::F32);
                let p = softmax(b, f, Some(DType::F32));
                b.cast(p, dt)
            } else {
                softmax(b, scores, None)
            };
            let probs = dropout(b, probs, self.attention_dropout);
            let out = bmm(b, probs, v, Shape::new([groups, t, hd]), false);
            copy(b, out, Shape::new([rows, c]))
        } else {
            let fused = sdpa_backend(b.opts.device, dt, hd, true, dropout_p);
            let lse_len = if fused == super::sdpa::SdpaBackend::MemEfficient { t.div_ceil(32).saturating_mul(32) } else { t };
            let lse = (Shape::new([groups, lse_len]), true, DType::F32);
            let ins = [q, k, v, bias];
            let out = b.op("sdpa", &ins, &[(Shape::new([groups, t, hd]), dt)], &ins, true, &[lse], GradRule::Alloc)[0];
            // the fused kernels write `[.., T, heads, d]` memory: `transpose(1, 2).contiguous()` is free
            b.view(out, Shape::new([rows, c]))
        };
        let out = lin(c, c, true).lower(b, out)?;
        let out = dropout(b, out, self.dropout);
        // window_reverse, the reverse roll and the crop: copies
        let mut out = copy(b, out, Shape::new([hp.saturating_mul(wp), c]));
        if self.shift {
            out = copy(b, out, Shape::new([hp.saturating_mul(wp), c]));
        }
        if padded {
            out = copy(b, out, Shape::new([l, c]));
        }
        if self.drop_path > 0.0 && b.training() {
            // `hidden_states.div(keep_prob) * random_tensor`: mul saves the [1] random tensor
            let divided = unary(b, "div_scalar", out, Saves::Nothing);
            let random = tensor(b, "rand", &[x], Shape::new([1]), dt, &[]);
            out = mul(b, divided, random);
        }
        let x = add(b, x, out);
        let y = ln(b, x)?;
        let y = lin(c, self.intermediate_size, true).lower(b, y)?;
        let y = match self.activation {
            FfnActivation::Relu => unary(b, "relu", y, Saves::Output),
            FfnActivation::Silu => unary(b, "silu", y, Saves::Input),
            _ => unary(b, "gelu", y, Saves::Input),
        };
        let y = lin(self.intermediate_size, c, true).lower(b, y)?;
        let y = dropout(b, y, self.dropout);
        Ok(add(b, y, x))
    }
}

/// `SwinPatchMerging(dim)`: `[H·W, C]` → `[⌈H/2⌉·⌈W/2⌉, 2C]`: padding to even sides (a copy
/// when odd), `torch.cat` of the four strided quarters (`[…, 4C]`), LayerNorm(4C), `reduction`
/// (4C → 2C, no bias).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PatchMerging {
    pub dim: u64,
    pub resolution: [u64; 2],
}

impl PatchMerging {
    pub fn lower(&self, b: &mut Builder, x: ValueId) -> LayerResult<ValueId> {
        positive(self.dim, "dim")?;
        let [hh, ww] = self.resolution;
        let l = seq_of(b, x, self.dim)?;
        if l != hh.saturating_mul(ww) || l == 0 {
            return Err(format!("expected {hh}×{ww} tokens, got {l}"));
        }
        let c4 = self.dim.saturating_mul(4);
        let (h2, w2) = (hh.div_ceil(2), ww.div_ceil(2));
        let dt = b.dtype(x);
        let mut y = x;
        if hh % 2 == 1 || ww % 2 == 1 {
            y = copy(b, y, Shape::new([h2.saturating_mul(2).saturating_mul(w2.saturating_mul(2)), self.dim]));
        }
        let cat = b.op("cat", &[y], &[(Shape::new([h2.saturating_mul(w2), c4]), dt)], &[], false, &[], GradRule::Alloc)[0];
        let y = LayerNorm { normalized_shape: c4, eps: 1e-5, elementwise_affine: true, bias: true }.lower(b, cat)?;
        Linear { in_features: c4, out_features: self.dim.saturating_mul(2), bias: false, tied_weight: false }.lower(b, y)
    }
}

/// The mean over the tokens: `[L, C]` → `[C]` (`AdaptiveAvgPool1d(1)` of the transposed map,
/// flattened).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenMean {}

impl TokenMean {
    pub fn lower(&self, b: &mut Builder, x: ValueId) -> LayerResult<ValueId> {
        let s = b.shape(x).0.clone();
        if s.len() != 2 {
            return Err(format!("expected a [L, C] input, got {}", b.shape(x)));
        }
        let dt = b.dtype(x);
        Ok(b.op("mean", &[x], &[(Shape::new([s[1]]), dt)], &[], false, &[], GradRule::Alloc)[0])
    }
}

#[cfg(test)]
mod tests {
    use crate::layer::test_util::one;
    use serde_json::json;

    #[test]
    fn swin_block_params() {
        // dim 32, 2 heads, window 4: q/k/v/o 4·(32·32 + 32), bias table 7·7·2, 2 LayerNorms,
        // fc1 32·128 + 128, fc2 128·32 + 32
        let l = one(json!({"kind": "swin_block", "dim": 32, "num_heads": 2, "resolution": [8, 8], "window_size": 4, "shift": true, "intermediate_size": 128}), &[64, 32]);
        assert_eq!((l.shape, l.params), (vec![64, 32], 4 * (32 * 32 + 32) + 49 * 2 + 4 * 32 + 32 * 128 + 128 + 128 * 32 + 32));
        let m = one(json!({"kind": "patch_merging", "dim": 32, "resolution": [7, 8]}), &[56, 32]);
        assert_eq!((m.shape, m.params), (vec![16, 64], 2 * 128 + 128 * 64));
    }
}
