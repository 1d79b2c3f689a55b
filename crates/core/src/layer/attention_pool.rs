//! SigLIP's attention-pooling head (`SiglipMultiheadAttentionPoolingHead`, transformers 5.24
//! `modeling_siglip.py`): a learned `probe` `[1, D]` attends to the `[P, D]` tokens through
//! `nn.MultiheadAttention(D, heads, batch_first=True)`, then `x + mlp(layernorm(x))`, and the one
//! pooled token `[D]` is the output.
//!
//! Lowered as `F.multi_head_attention_forward` runs with `need_weights=True` (the module's
//! default, which the head keeps): `in_proj_weight [3D, D]` and `in_proj_bias [3D]` (Q from the
//! probe, K and V from the tokens: one `[P, 2D]` projection), `bmm` scores `[H, 1, P]` (saving Q
//! and K/V), softmax (saving its output), the per-head average of the weights it returns (freed),
//! `bmm` with V, `out_proj`; then LayerNorm, `fc1`, the tanh GELU, `fc2` and the residual add.
//! The probe's `repeat(batch, 1, 1)` (a `[1, D]` copy per sample) is left out.

use super::activation::{add, unary, Saves};
use super::linear_op::linear;
use super::norm::layer_norm;
use super::{positive, LayerResult};
use crate::graph::{GradRule, ValueId};
use crate::lower::Builder;
use crate::units::Shape;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AttentionPool {
    pub embed_dim: u64,
    pub num_heads: u64,
    pub intermediate_size: u64,
}

impl AttentionPool {
    pub fn lower(&self, b: &mut Builder, x: ValueId) -> LayerResult<ValueId> {
        let (d, h, i) = (self.embed_dim, self.num_heads, self.intermediate_size);
        for (v, name) in [(d, "embed_dim"), (h, "num_heads"), (i, "intermediate_size")] {
            positive(v, name)?;
        }
        if !d.is_multiple_of(h) {
            return Err(format!("embed_dim ({d}) must be divisible by num_heads ({h})"));
        }
        let s = b.shape(x).0.clone();
        if s.len() != 2 || s[1] != d {
            return Err(format!("expected [P, {d}] tokens, got {}", b.shape(x)));
        }
        let probe = b.param(Shape::new([1, d]));
        // `in_proj_weight` / `in_proj_bias`, chunked into Q and K/V
        let (wq, bq) = (b.param(Shape::new([d, d])), b.param(Shape::new([d])));
        let (wkv, bkv) = (b.param(Shape::new([2 * d, d])), b.param(Shape::new([2 * d])));
        let q = linear(b, probe, wq, Some(bq));
        let kv = linear(b, x, wkv, Some(bkv));
        let dt = b.dtype(kv);
        let scores = b.op("bmm", &[q, kv], &[(Shape::new([h, 1, s[0]]), dt)], &[q, kv], false, &[], GradRule::Alloc)[0];
        let attn = unary(b, "softmax", scores, Saves::Output);
        // the averaged weights `need_weights=True` returns (unused)
        b.op("mean", &[attn], &[(Shape::new([1, s[0]]), dt)], &[], false, &[], GradRule::Alloc);
        let ctx = b.op("bmm", &[attn, kv], &[(Shape::new([1, d]), dt)], &[attn, kv], false, &[], GradRule::Alloc)[0];
        let (wo, bo) = (b.param(Shape::new([d, d])), b.param(Shape::new([d])));
        let pooled = linear(b, ctx, wo, Some(bo));
        let (lw, lb) = (b.param(Shape::new([d])), b.param(Shape::new([d])));
        let normed = layer_norm(b, pooled, Some(lw), Some(lb));
        let (w1, b1) = (b.param(Shape::new([i, d])), b.param(Shape::new([i])));
        let up = linear(b, normed, w1, Some(b1));
        let act = unary(b, "gelu", up, Saves::Input);
        let (w2, b2) = (b.param(Shape::new([d, i])), b.param(Shape::new([d])));
        let down = linear(b, act, w2, Some(b2));
        let out = add(b, pooled, down);
        // `hidden_state[:, 0]`
        Ok(b.view_with_grad(out, Shape::new([d]), GradRule::Alloc))
    }
}

#[cfg(test)]
mod tests {
    use crate::lower::LowerOptions;
    use crate::resolve::resolve;
    use crate::spec::ModelSpec;

    #[test]
    fn attention_pool_has_the_heads_parameters_and_pools_one_token() {
        let text = r#"{"input": {"shape": [16, 8]}, "layers": [{"kind": "linear", "in_features": 8, "out_features": 8},
            {"kind": "attention_pool", "embed_dim": 8, "num_heads": 2, "intermediate_size": 12}]}"#;
        let r = resolve(&ModelSpec::from_json(text).unwrap(), None, LowerOptions::default()).unwrap();
        // probe D, in_proj 3D² + 3D, out_proj D² + D, LayerNorm 2D, fc1 I·D + I, fc2 D·I + D
        let (d, i) = (8, 12);
        assert_eq!(r.layers[1].params, d + 3 * d * d + 3 * d + d * d + d + 2 * d + i * d + i + d * i + d);
        assert_eq!(r.layers[1].output_shape.0, vec![8]);
        let bad = r#"{"input": {"shape": [16, 8]}, "layers": [{"kind": "attention_pool", "embed_dim": 8, "num_heads": 3, "intermediate_size": 12}]}"#;
        assert!(resolve(&ModelSpec::from_json(bad).unwrap(), None, LowerOptions::default()).is_err());
    }
}
