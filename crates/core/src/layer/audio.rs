//! wav2vec 2.0's positional convolution (`Wav2Vec2PositionalConvEmbedding`,
//! `modeling_wav2vec2.py`, transformers 5.24): `[T, hidden]` → `[T, hidden]`, the relative
//! positions a grouped `Conv1d(hidden, hidden, kernel, padding = kernel // 2, groups)` computes.
//!
//! Its weight is under `nn.utils.parametrizations.weight_norm(conv, name="weight", dim=2)`:
//! `parameters()` holds `parametrizations.weight.original0` (`g`, `[1, 1, kernel]`: the norm
//! over every dimension but 2) and `original1` (`v`, `[hidden, hidden / groups, kernel]`) instead
//! of `weight`, plus the conv's bias: `kernel + hidden · hidden / groups · kernel + hidden`
//! parameters. Memory: the weight `g · v / ‖v‖` is recomputed every forward (`_weight_norm`:
//! a new weight-sized tensor, saved by the conv), the conv output `[hidden, T + 1]` for an even
//! kernel, `Wav2Vec2SamePadLayer`'s slice dropping the last step (a view), the activation (GELU
//! saving its input, that view). With `mask_embed` the layer also holds `Wav2Vec2Model`'s
//! `masked_spec_embed` (`[hidden]`, present when `mask_time_prob` or `mask_feature_prob` > 0;
//! SpecAugment's in-place writes of it are not modelled).

use super::activation::{unary, Saves};
use super::conv::conv_op;
use super::{positive, LayerResult};
use crate::graph::{GradRule, ValueId};
use crate::lower::Builder;
use crate::units::Shape;
use serde::{Deserialize, Serialize};

/// `Wav2Vec2PositionalConvEmbedding(config)`, GELU activated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PositionalConv {
    pub hidden_size: u64,
    /// `num_conv_pos_embeddings`
    pub kernel_size: u64,
    /// `num_conv_pos_embedding_groups`
    #[serde(default = "one")]
    pub groups: u64,
    /// Also `masked_spec_embed` (`[hidden]`).
    #[serde(default)]
    pub mask_embed: bool,
}

fn one() -> u64 {
    1
}

impl PositionalConv {
    pub fn lower(&self, b: &mut Builder, x: ValueId) -> LayerResult<ValueId> {
        let (h, k, g) = (self.hidden_size, self.kernel_size, self.groups);
        positive(h, "hidden_size")?;
        positive(k, "kernel_size")?;
        positive(g, "groups")?;
        if !h.is_multiple_of(g) {
            return Err(format!("hidden_size ({h}) must be divisible by groups ({g})"));
        }
        let t = super::ssm::seq_of(b, x, h)?;
        if self.mask_embed {
            b.param(Shape::new([h]));
        }
        let gain = b.param(Shape::new([1, 1, k]));
        let v = b.param(Shape::new([h, h / g, k]));
        let bias = b.param(Shape::new([h]));
        let dt = b.dtype(v);
        // `_weight_norm(v, g, 2)`: saves v, g and the [1, 1, k] norms
        let w = b.op("weight_norm", &[v, gain], &[(Shape::new([h, h / g, k]), dt)], &[v, gain], false, &[(Shape::new([1, 1, k]), false, dt)], GradRule::Alloc)[0];
        let xt = b.view(x, Shape::new([h, t]));
        // padding k // 2 on both sides: T + 2·(k/2) − k + 1 steps
        let out_len = t.saturating_add(2 * (k / 2)).saturating_add(1).saturating_sub(k);
        if out_len < t {
            return Err(format!("kernel_size {k} leaves fewer than {t} steps"));
        }
        let y = conv_op(b, xt, w, Some(bias), Shape::new([h, out_len]));
        let y = if out_len > t { b.view(y, Shape::new([h, t])) } else { y };
        let y = unary(b, "gelu", y, Saves::Input);
        Ok(b.view(y, Shape::new([t, h])))
    }
}

#[cfg(test)]
mod tests {
    use crate::layer::test_util::one;
    use serde_json::json;

    #[test]
    fn weight_norm_parameters() {
        // g [1, 1, 4], v [32, 32 / 4, 4], bias 32, masked_spec_embed 32
        let l = one(json!({"kind": "positional_conv", "hidden_size": 32, "kernel_size": 4, "groups": 4, "mask_embed": true}), &[20, 32]);
        assert_eq!((l.shape, l.params), (vec![20, 32], 4 + 32 * 8 * 4 + 32 + 32));
    }
}
