//! DeBERTa-v2's relative-position attention (`modeling_deberta_v2.py`, transformers 5.24):
//! `relative_embeddings` (the encoder's `rel_embeddings` table and its optional LayerNorm,
//! computed once per forward and handed to every layer) and `disentangled_attention`
//! (`DisentangledSelfAttention`: content-to-content scores plus content-to-position (`c2p`) and
//! position-to-content (`p2c`) scores gathered by relative distance). DeBERTa computes this
//! attention itself, eagerly, whatever `attn_implementation` says.
//!
//! Parameters (exact): `rel_embeddings [2·span, hidden]` (`span` = `position_buckets` if > 0,
//! else `max_relative_positions`, else `max_position_embeddings`) and `LayerNorm` when
//! `norm_rel_ebd` has `layer_norm`; per layer biased `query_proj`, `key_proj`, `value_proj`
//! (hidden → H·d) and, without `share_att_key`, `pos_key_proj` (for `c2p`) and `pos_query_proj`
//! (for `p2c`); with it the positions go through `key_proj` / `query_proj` again.
//!
//! Memory, read from `forward` and `disentangled_attention_bias`: `transpose_for_scores`'
//! contiguous `[H, S, d]` copies of Q, K and V (saved by their `bmm`s), `Kᵀ / scale`, the
//! `[H, S, S]` content scores; the projected positions' `[H, 2·span, d]` copies repeated per
//! sample (`.repeat(batch)`, saved by their `bmm`s), the `[H, S, 2·span]` `c2p`/`p2c` products
//! (saved by their `gather`s, whose backward reads `self`), the gathers by the `[S, S]` int64
//! relative positions (saved), the sum of the scores, the
//! mask's `bool` and `~` (`[1, S, S]`, the second saved by `masked_fill`), `masked_fill`, the
//! softmax (its output saved), dropout, `bmm` with V and the contiguous `[S, H·d]` context. The
//! encoder's one `[1, S, S]` float attention mask per sample and the log-bucket arithmetic on
//! `[S, S]` (once per forward) are not modelled.

use super::activation::dropout;
use super::linear_op::linear;
use super::norm::LayerNorm;
use super::{positive, LayerResult};
use crate::graph::{GradRule, ValueId};
use crate::lower::Builder;
use crate::units::{DType, Shape};
use serde::{Deserialize, Serialize};

/// The encoder's relative-position embeddings, passed on to the `disentangled_attention` layers
/// after it (in the builder's position-bias slot, as T5's bias is). The layer passes its input
/// through.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RelativeEmbeddings {
    /// Rows: `2 × span`; 0 without `relative_attention`, where `DebertaV2Encoder` still builds
    /// the LayerNorm of `norm_rel_ebd` (its parameters, never used).
    pub num_embeddings: u64,
    pub hidden_size: u64,
    /// `norm_rel_ebd: "layer_norm"`: a LayerNorm (with bias) over the table.
    #[serde(default)]
    pub layer_norm: bool,
    #[serde(default = "eps")]
    pub eps: f64,
}

fn eps() -> f64 {
    1e-7
}

impl RelativeEmbeddings {
    pub fn lower(&self, b: &mut Builder, x: ValueId) -> LayerResult<ValueId> {
        positive(self.hidden_size, "hidden_size")?;
        if self.num_embeddings == 0 {
            if !self.layer_norm {
                return Err("`relative_embeddings` without rows holds only its LayerNorm: set `layer_norm`".into());
            }
            b.param(Shape::new([self.hidden_size]));
            b.param(Shape::new([self.hidden_size]));
            return Ok(x);
        }
        let mut rel = b.param(Shape::new([self.num_embeddings, self.hidden_size]));
        if self.layer_norm {
            rel = LayerNorm { normalized_shape: self.hidden_size, eps: self.eps, elementwise_affine: true, bias: true }.lower(b, rel)?;
        }
        b.position_bias = Some(rel);
        Ok(x)
    }
}

/// `DisentangledSelfAttention(config)`: `[S, hidden]` → the `[S, H·d]` context (DeBERTa's
/// `DebertaV2SelfOutput` dense, dropout, residual and LayerNorm follow as their own layers).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DisentangledAttention {
    pub hidden_size: u64,
    pub num_heads: u64,
    /// `attention_head_size` (default `hidden_size / num_heads`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_dim: Option<u64>,
    /// `relative_attention`: the `c2p`/`p2c` terms over the preceding `relative_embeddings`.
    #[serde(default)]
    pub relative: bool,
    /// `"c2p" in pos_att_type`
    #[serde(default)]
    pub c2p: bool,
    /// `"p2c" in pos_att_type`
    #[serde(default)]
    pub p2c: bool,
    /// `share_att_key`: the positions go through `key_proj` and `query_proj`.
    #[serde(default)]
    pub share_att_key: bool,
    /// `attention_probs_dropout_prob`
    #[serde(default)]
    pub dropout: f64,
    /// `pos_dropout` on the relative embeddings (`hidden_dropout_prob`).
    #[serde(default)]
    pub pos_dropout: f64,
}

impl DisentangledAttention {
    fn head_dim(&self) -> LayerResult<u64> {
        positive(self.hidden_size, "hidden_size")?;
        positive(self.num_heads, "num_heads")?;
        let d = match self.head_dim {
            Some(d) => d,
            None if self.hidden_size.is_multiple_of(self.num_heads) => self.hidden_size / self.num_heads,
            None => return Err(format!("hidden_size ({}) must be divisible by num_heads ({})", self.hidden_size, self.num_heads)),
        };
        positive(d, "head_dim")?;
        for p in [self.dropout, self.pos_dropout] {
            if !(0.0..=1.0).contains(&p) {
                return Err(format!("dropout must be between 0 and 1, got {p}"));
            }
        }
        Ok(d)
    }

    pub fn lower(&self, b: &mut Builder, x: ValueId) -> LayerResult<ValueId> {
        let d = self.head_dim()?;
        let s = super::ssm::seq_of(b, x, self.hidden_size)?;
        let (h, heads) = (self.hidden_size, self.num_heads);
        let hd = heads.saturating_mul(d);
        let op = |b: &mut Builder, name: &'static str, ins: &[ValueId], shape: Shape, dt: DType, saved: &[ValueId]| {
            b.op(name, ins, &[(shape, dt)], saved, false, &[], GradRule::Alloc)[0]
        };
        let proj = |b: &mut Builder| (b.param(Shape::new([hd, h])), b.param(Shape::new([hd])));
        let (wq, wk, wv) = (proj(b), proj(b), proj(b));
        // `transpose_for_scores`: view, permute, `.contiguous()` — a copy per projection
        let heads_of = |b: &mut Builder, y: ValueId, rows: u64| {
            let dt = b.dtype(y);
            op(b, "contiguous", &[y], Shape::new([heads, rows, d]), dt, &[])
        };
        let q = linear(b, x, wq.0, Some(wq.1));
        let q = heads_of(b, q, s);
        let k = linear(b, x, wk.0, Some(wk.1));
        let k = heads_of(b, k, s);
        let v = linear(b, x, wv.0, Some(wv.1));
        let v = heads_of(b, v, s);
        let dt = b.dtype(q);
        let scores_shape = || Shape::new([heads, s, s]);
        let kt = op(b, "div", &[k], Shape::new([heads, d, s]), dt, &[]);
        let mut scores = op(b, "bmm", &[q, kt], scores_shape(), dt, &[q, kt]);
        if self.relative && (self.c2p || self.p2c) {
            let rel = b.position_bias.ok_or("`disentangled_attention` with `relative` needs a `relative_embeddings` layer earlier in the model")?;
            let rows = b.shape(rel).0.first().copied().unwrap_or(0);
            if b.shape(rel).0.get(1) != Some(&h) {
                return Err(format!("the relative embeddings are {} wide, the attention {h}", b.shape(rel)));
            }
            let rel = dropout(b, rel, self.pos_dropout);
            let (pk, pq) = if self.share_att_key {
                (self.c2p.then_some(wk), self.p2c.then_some(wq))
            } else {
                (self.c2p.then(|| proj(b)), self.p2c.then(|| proj(b)))
            };
            // `transpose_for_scores(proj(rel)).repeat(batch, 1, 1)`: a copy per sample
            let positions = |b: &mut Builder, w: (ValueId, ValueId), like: ValueId| {
                let p = linear(b, rel, w.0, Some(w.1));
                let p = heads_of(b, p, rows);
                op(b, "repeat", &[p, like], Shape::new([heads, rows, d]), dt, &[])
            };
            let gathered = |b: &mut Builder, side: ValueId, pos: ValueId| {
                let att = op(b, "bmm", &[side, pos], Shape::new([heads, s, rows]), dt, &[side, pos]);
                // gather by the clamped relative positions (int64 [S, S], saved); `gather_backward(grad,
                // self, dim, index)` takes `self`: the `[H, S, 2·span]` product is saved too
                let g = b.op("gather", &[att], &[(scores_shape(), dt)], &[att], false, &[(Shape::new([s, s]), false, DType::I64)], GradRule::Alloc)[0];
                // `gather_backward`: `zeros(self.sizes()).scatter_add(dim, index, grad)`, out of
                // place: the zeros are a second `[H, S, 2·span]` while the gradient is made
                let bytes = heads.saturating_mul(s).saturating_mul(rows).saturating_mul(dt.size());
                b.last_bwd_scratch(crate::graph::Lin { fixed: 0, per_sample: bytes });
                op(b, "div", &[g], scores_shape(), dt, &[])
            };
            let mut rel_scores = None;
            if let Some(w) = pk {
                let pos = positions(b, w, q);
                let c2p = gathered(b, q, pos);
                // `score = 0; score += c2p_att / scale`: a new tensor
                rel_scores = Some(op(b, "add", &[c2p], scores_shape(), dt, &[]));
            }
            if let Some(w) = pq {
                let pos = positions(b, w, k);
                let p2c = gathered(b, k, pos);
                rel_scores = Some(match rel_scores {
                    // `score += …`: in place
                    Some(r) => b.inplace("add_", r, Some(p2c), false, GradRule::Alias),
                    None => op(b, "add", &[p2c], scores_shape(), dt, &[]),
                });
            }
            if let Some(r) = rel_scores {
                scores = op(b, "add", &[scores, r], scores_shape(), dt, &[]);
            }
        }
        // `attention_mask.bool()` and `~`: [1, S, S] per sample, the second saved by masked_fill
        let mask = op(b, "to_bool", &[x], Shape::new([1, s, s]), DType::Bool, &[]);
        let not_mask = op(b, "bitwise_not", &[mask], Shape::new([1, s, s]), DType::Bool, &[]);
        let masked = op(b, "masked_fill", &[scores, not_mask], scores_shape(), dt, &[not_mask]);
        let probs = b.op("softmax", &[masked], &[(scores_shape(), dt)], &[], true, &[], GradRule::Alloc)[0];
        let probs = dropout(b, probs, self.dropout);
        let ctx = op(b, "bmm", &[probs, v], Shape::new([heads, s, d]), dt, &[probs, v]);
        Ok(op(b, "contiguous", &[ctx], Shape::new([s, hd]), dt, &[]))
    }
}

#[cfg(test)]
mod tests {
    use crate::layer::test_util::one;
    use serde_json::json;

    #[test]
    fn disentangled_attention_params() {
        // q, k, v: 3·(64·64 + 64); shared keys add nothing, own pos projections 2·(64·64 + 64)
        let l = one(json!({"kind": "disentangled_attention", "hidden_size": 64, "num_heads": 4}), &[10, 64]);
        assert_eq!((l.shape, l.params), (vec![10, 64], 3 * (64 * 64 + 64)));
    }
}
