//! Normalisation layers.

use super::activation::{mul, unary, Saves};
use super::{positive, LayerResult};
use crate::graph::{GradRule, ValueId};
use crate::lower::Builder;
use crate::serde_util::t;
use crate::units::{DType, Shape};
use serde::{Deserialize, Serialize};

/// The norm a transformer layer uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum NormKind {
    #[default]
    LayerNorm,
    RmsNorm,
    /// Cohere's `CohereLayerNorm`: a LayerNorm without bias written in fp32 ops
    /// (`modeling_cohere.py`: `mean`, `(x - mean).pow(2).mean()`, `(x - mean) * rsqrt(var + eps)`,
    /// `weight.float() * …`), which keeps two centred copies and the product for backward.
    CohereLayerNorm,
}

/// [`NormKind::CohereLayerNorm`] of `x` over its last `n` features, op by op.
pub(crate) fn cohere_layer_norm(b: &mut Builder, x: ValueId, n: u64) -> LayerResult<ValueId> {
    positive(n, "normalized_shape")?;
    super::expect_last(b.shape(x), n, "features")?;
    let w = b.param(Shape::new([n]));
    let in_dtype = b.dtype(x);
    let xf = b.cast(x, DType::F32);
    let (shape, rows) = (b.shape(x).clone(), b.shape(x).with_last(1));
    let mean = b.op("mean", &[xf], &[(rows.clone(), DType::F32)], &[], false, &[], GradRule::Alloc)[0];
    // `(hidden_states - mean).pow(2)`: pow saves the centred copy
    let centred = b.op("sub", &[xf, mean], &[(shape.clone(), DType::F32)], &[], false, &[], GradRule::Alloc)[0];
    let sq = unary(b, "pow", centred, Saves::Input);
    let var = b.op("mean", &[sq], &[(rows, DType::F32)], &[], false, &[], GradRule::Alloc)[0];
    let var = unary(b, "add_scalar", var, Saves::Nothing);
    let inv = unary(b, "rsqrt", var, Saves::Output);
    // `(hidden_states - mean) * rsqrt(…)`: a second centred copy, saved by the product
    let centred = b.op("sub", &[xf, mean], &[(shape, DType::F32)], &[], false, &[], GradRule::Alloc)[0];
    let normed = mul(b, centred, inv);
    let wf = b.cast(w, DType::F32);
    let out = mul(b, wf, normed);
    Ok(b.cast(out, in_dtype))
}

fn eps() -> f64 {
    1e-5
}
fn bn_momentum() -> f64 {
    0.1
}

/// `nn.BatchNorm1d/2d(num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatchNorm {
    pub num_features: u64,
    #[serde(default = "eps")]
    pub eps: f64,
    #[serde(default = "bn_momentum")]
    pub momentum: f64,
    #[serde(default = "t")]
    pub affine: bool,
    #[serde(default = "t")]
    pub track_running_stats: bool,
}

impl BatchNorm {
    /// `rank`: 1 for BatchNorm1d (`[C]` or `[C, L]`), 3 for BatchNorm2d (`[C, H, W]`).
    pub fn lower(&self, b: &mut Builder, x: ValueId, two_d: bool) -> LayerResult<ValueId> {
        positive(self.num_features, "num_features")?;
        let s = b.shape(x).clone();
        let ok_rank = if two_d { s.rank() == 3 } else { s.rank() == 1 || s.rank() == 2 };
        if !ok_rank {
            let want = if two_d { "[C, H, W]" } else { "[C] or [C, L]" };
            return Err(format!("expected a {want} input, got {s}"));
        }
        if s.0[0] != self.num_features {
            return Err(format!("expected {} channels, got {}", self.num_features, s.0[0]));
        }
        let c = self.num_features;
        let (w, bias) = if self.affine {
            (Some(b.param(Shape::new([c]))), Some(b.param(Shape::new([c]))))
        } else {
            (None, None)
        };
        if self.track_running_stats {
            let dt = b.param_dtype();
            b.buffer(c.saturating_mul(2), dt);
            b.buffer(1, DType::I64);
        }
        let mut ins = vec![x];
        ins.extend(w);
        ins.extend(bias);
        let dt = b.dtype(x);
        let stats = Shape::new([c]);
        let training = b.training();
        let extras: Vec<(Shape, bool, DType)> =
            if training { vec![(stats.clone(), false, DType::F32), (stats, false, DType::F32)] } else { vec![] };
        let save: Vec<ValueId> = ins[..ins.len().min(2)].to_vec();
        Ok(b.op("batch_norm", &ins, &[(s, dt)], &save, false, &extras, GradRule::Alloc)[0])
    }
}

/// `nn.LayerNorm(normalized_shape, eps=1e-5, elementwise_affine=True, bias=True)` over the last dim.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LayerNorm {
    pub normalized_shape: u64,
    #[serde(default = "eps")]
    pub eps: f64,
    #[serde(default = "t")]
    pub elementwise_affine: bool,
    #[serde(default = "t")]
    pub bias: bool,
}

impl LayerNorm {
    pub fn lower(&self, b: &mut Builder, x: ValueId) -> LayerResult<ValueId> {
        positive(self.normalized_shape, "normalized_shape")?;
        super::expect_last(b.shape(x), self.normalized_shape, "features")?;
        let w = self.elementwise_affine.then(|| b.param(Shape::new([self.normalized_shape])));
        let bias = (self.elementwise_affine && self.bias).then(|| b.param(Shape::new([self.normalized_shape])));
        Ok(layer_norm(b, x, w, bias))
    }
}

/// `native_layer_norm`: output, per-row mean and rstd (fp32); saves input, mean, rstd.
pub fn layer_norm(b: &mut Builder, x: ValueId, w: Option<ValueId>, bias: Option<ValueId>) -> ValueId {
    let mut ins = vec![x];
    ins.extend(w);
    ins.extend(bias);
    let (ins, dt) = norm_autocast(b, &ins);
    let s = b.shape(x).clone();
    let rows = Shape::new([s.numel() / s.last().max(1)]);
    let batched = b.value(x).batched;
    let extras = [(rows.clone(), batched, DType::F32), (rows, batched, DType::F32)];
    b.op("layer_norm", &ins, &[(s, dt)], &ins[..1], false, &extras, GradRule::Alloc)[0]
}

/// Autocast of `layer_norm` / `group_norm` (`ins[0]` the input, then the affine parameters):
/// CUDA's runs them in fp32; CPU autocast leaves them out of its lists, and ATen's CPU kernels
/// take a half input with fp32 weights as it is (`is_mixed_type`: the output in the input's
/// dtype, `layer_norm_cpu` / `native_group_norm`) — fp32 master weights under CPU autocast
/// (measured: `tools/measure_diffusion_full.py`); other inputs promote.
fn norm_autocast(b: &mut Builder, ins: &[ValueId]) -> (Vec<ValueId>, DType) {
    let policy = b.norm_policy();
    let x = b.dtype(ins[0]);
    let amp = matches!(b.opts.precision, crate::config::Precision::AmpBf16 | crate::config::Precision::AmpFp16);
    let mixed = ins[1..].iter().all(|&w| b.dtype(w) == DType::F32);
    if amp && policy == crate::lower::CastPolicy::Promote && matches!(x, DType::Bf16 | DType::F16) && mixed {
        return (ins.to_vec(), x);
    }
    b.autocast(policy, ins)
}

/// `nn.GroupNorm(num_groups, num_channels, eps=1e-5, affine=True)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupNorm {
    pub num_groups: u64,
    pub num_channels: u64,
    #[serde(default = "eps")]
    pub eps: f64,
    #[serde(default = "t")]
    pub affine: bool,
}

impl GroupNorm {
    pub fn lower(&self, b: &mut Builder, x: ValueId) -> LayerResult<ValueId> {
        positive(self.num_groups, "num_groups")?;
        let s = b.shape(x).clone();
        if s.rank() < 1 || s.0[0] != self.num_channels {
            return Err(format!("expected {} channels, got input shape {s}", self.num_channels));
        }
        if !self.num_channels.is_multiple_of(self.num_groups) {
            return Err(format!("num_channels ({}) must be divisible by num_groups ({})", self.num_channels, self.num_groups));
        }
        let mut ins = vec![x];
        if self.affine {
            ins.push(b.param(Shape::new([self.num_channels])));
            ins.push(b.param(Shape::new([self.num_channels])));
        }
        let (ins, dt) = norm_autocast(b, &ins);
        let g = Shape::new([self.num_groups]);
        let extras = [(g.clone(), true, DType::F32), (g, true, DType::F32)];
        Ok(b.op("group_norm", &ins, &[(s, dt)], &ins[..1], false, &extras, GradRule::Alloc)[0])
    }
}

/// LLaMA's `RMSNorm(hidden_size, eps=1e-6)` as Hugging Face writes it, op by op:
/// `weight * (x.float() * rsqrt(x.float().pow(2).mean(-1) + eps)).to(dtype)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RmsNorm {
    pub normalized_shape: u64,
    #[serde(default = "rms_eps")]
    pub eps: f64,
    /// `T5LayerNorm` (transformers `modeling_t5.py`): `hidden_states * rsqrt(variance + eps)`
    /// multiplies the input in its own dtype (promoted to fp32), so under half weights the
    /// half input is saved besides its fp32 copy.
    #[serde(default, skip_serializing_if = "crate::serde_util::is_false")]
    pub t5: bool,
}

fn rms_eps() -> f64 {
    1e-6
}

impl RmsNorm {
    pub fn lower(&self, b: &mut Builder, x: ValueId) -> LayerResult<ValueId> {
        positive(self.normalized_shape, "normalized_shape")?;
        super::expect_last(b.shape(x), self.normalized_shape, "features")?;
        let w = b.param(Shape::new([self.normalized_shape]));
        let in_dtype = b.dtype(x);
        let xf = b.cast(x, DType::F32);
        let sq = unary(b, "pow", xf, Saves::Input);
        let rows = b.shape(x).with_last(1);
        let batched = b.value(x).batched;
        let mean = b.op("mean", &[sq], &[(rows.clone(), DType::F32)], &[], false, &[], GradRule::Alloc)[0];
        let _ = batched;
        let var = unary(b, "add_scalar", mean, Saves::Nothing);
        let inv = unary(b, "rsqrt", var, Saves::Output);
        let normed = if self.t5 {
            let shape = b.shape(x).clone();
            b.op("mul", &[x, inv], &[(shape, DType::F32)], &[x, inv], false, &[], GradRule::Alloc)[0]
        } else {
            mul(b, xf, inv)
        };
        let normed = b.cast(normed, in_dtype);
        Ok(mul(b, w, normed))
    }
}

#[cfg(test)]
mod tests {
    //! Parameters (`m.parameters()`) and buffers (`m.buffers()`) as PyTorch registers them.

    use crate::layer::test_util::{error, one};
    use serde_json::json;

    #[test]
    fn batch_norm2d_params_and_buffers() {
        // nn.BatchNorm2d(64): weight and bias (2·64 = 128 parameters); buffers running_mean and
        // running_var (64 float32 each) and num_batches_tracked (one int64): 2·64·4 + 8 = 520 bytes
        let n = one(json!({"kind": "batch_norm2d", "num_features": 64}), &[64, 56, 56]);
        assert_eq!(n.shape, [64, 56, 56]);
        assert_eq!((n.params, n.buffer_bytes), (128, 520));
        // affine=False: no parameters, the same buffers
        let n = one(json!({"kind": "batch_norm2d", "num_features": 64, "affine": false}), &[64, 56, 56]);
        assert_eq!((n.params, n.buffer_bytes), (0, 520));
        // track_running_stats=False: no buffers at all
        let n = one(json!({"kind": "batch_norm2d", "num_features": 64, "track_running_stats": false}), &[64, 56, 56]);
        assert_eq!((n.params, n.buffer_bytes), (128, 0));
    }

    #[test]
    fn batch_norm1d_inputs() {
        // nn.BatchNorm1d(100) takes (N, C) or (N, C, L)
        let n = one(json!({"kind": "batch_norm1d", "num_features": 100}), &[100]);
        assert_eq!((n.shape, n.params, n.buffer_bytes), (vec![100], 200, 808));
        let n = one(json!({"kind": "batch_norm1d", "num_features": 100}), &[100, 50]);
        assert_eq!(n.shape, [100, 50]);
        let e = error(json!({"kind": "batch_norm1d", "num_features": 100}), &[100, 5, 5]);
        assert!(e.contains("expected a [C] or [C, L] input"), "{e}");
        let e = error(json!({"kind": "batch_norm2d", "num_features": 64}), &[32, 8, 8]);
        assert!(e.contains("expected 64 channels, got 32"), "{e}");
    }

    #[test]
    fn layer_norm_params() {
        // nn.LayerNorm(768): weight and bias, 1,536
        let n = one(json!({"kind": "layer_norm", "normalized_shape": 768}), &[128, 768]);
        assert_eq!((n.shape, n.params, n.buffer_bytes), (vec![128, 768], 1_536, 0));
        // nn.LayerNorm(768, bias=False): 768; elementwise_affine=False: 0
        let n = one(json!({"kind": "layer_norm", "normalized_shape": 768, "bias": false}), &[128, 768]);
        assert_eq!(n.params, 768);
        let n = one(json!({"kind": "layer_norm", "normalized_shape": 768, "elementwise_affine": false}), &[128, 768]);
        assert_eq!(n.params, 0);
        let e = error(json!({"kind": "layer_norm", "normalized_shape": 768}), &[128, 512]);
        assert!(e.contains("expected 768 features, got 512"), "{e}");
    }

    #[test]
    fn group_norm_and_rms_norm_params() {
        // nn.GroupNorm(32, 256): weight and bias per channel, 512
        let n = one(json!({"kind": "group_norm", "num_groups": 32, "num_channels": 256}), &[256, 8, 8]);
        assert_eq!((n.shape, n.params, n.buffer_bytes), (vec![256, 8, 8], 512, 0));
        let e = error(json!({"kind": "group_norm", "num_groups": 3, "num_channels": 256}), &[256, 8, 8]);
        assert!(e.contains("must be divisible by num_groups"), "{e}");
        // LlamaRMSNorm(4096): a weight only, 4,096
        let n = one(json!({"kind": "rms_norm", "normalized_shape": 4096}), &[16, 4096]);
        assert_eq!((n.shape, n.params), (vec![16, 4096], 4_096));
    }
}
