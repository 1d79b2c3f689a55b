//! Token, position and class-token embeddings.

use super::activation::add;
use super::{positive, LayerResult};
use crate::graph::{GradRule, ValueId};
use crate::lower::Builder;
use crate::serde_util::is_false;
use crate::units::{DType, Shape};
use serde::{Deserialize, Serialize};

/// `nn.Embedding(num_embeddings, embedding_dim, padding_idx=None)`: int64 ids `[S]` → `[S, D]`.
/// Saves only the ids; its backward allocates a dense `num_embeddings × D` gradient.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Embedding {
    pub num_embeddings: u64,
    pub embedding_dim: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub padding_idx: Option<i64>,
    /// Shares the first embedding's weight instead of owning one (T5's decoder reads the
    /// encoder's `shared` table).
    #[serde(default, skip_serializing_if = "is_false")]
    pub tied_weight: bool,
}

impl Embedding {
    pub fn lower(&self, b: &mut Builder, x: ValueId) -> LayerResult<ValueId> {
        positive(self.num_embeddings, "num_embeddings")?;
        positive(self.embedding_dim, "embedding_dim")?;
        if b.dtype(x) != DType::I64 {
            return Err(format!("expects int64 token ids, got a {:?} input (set input.dtype to \"int64\")", b.dtype(x)));
        }
        let w = match (self.tied_weight, b.tied_embedding) {
            (true, Some(w)) if b.shape(w).0 == [self.num_embeddings, self.embedding_dim] => w,
            (true, Some(w)) => return Err(format!("`tied_weight`: the first embedding is {}, not [{}, {}]", b.shape(w), self.num_embeddings, self.embedding_dim)),
            (true, None) => return Err("`tied_weight` needs an embedding layer earlier in the model".into()),
            (false, _) => b.param(Shape::new([self.num_embeddings, self.embedding_dim])),
        };
        if b.tied_embedding.is_none() {
            b.tied_embedding = Some(w);
        }
        let mut out = b.shape(x).0.clone();
        out.push(self.embedding_dim);
        let dt = b.dtype(w);
        Ok(b.op("embedding", &[w, x], &[(Shape(out), dt)], &[x], false, &[], GradRule::Alloc)[0])
    }
}

/// Adds a learned embedding looked up by position (BERT/GPT-2 positions) or by a per-sample id
/// (BERT token types, `per_sample: true`) to a `[S, D]` input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PositionalEmbedding {
    pub num_embeddings: u64,
    pub embedding_dim: u64,
    /// Looked up per sample (output `[B, S, D]`), not once per position (`[1, S, D]`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub per_sample: bool,
    /// Int64 elements of a registered index buffer (BERT keeps `position_ids`/`token_type_ids`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub index_buffer: u64,
    /// `x += emb` instead of `x = x + emb`.
    #[serde(default, skip_serializing_if = "is_false")]
    pub inplace: bool,
    /// The positions looked up once per sample (`[B, S, D]`), not once (`[1, S, D]`): BART's
    /// `BartLearnedPositionalEmbedding` (`arange(...).expand(bsz, -1) + offset`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub batched: bool,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

impl PositionalEmbedding {
    pub fn lower(&self, b: &mut Builder, x: ValueId) -> LayerResult<ValueId> {
        positive(self.num_embeddings, "num_embeddings")?;
        let s = b.shape(x).0.clone();
        if s.len() != 2 || s[1] != self.embedding_dim {
            return Err(format!("expected a [S, {}] input, got {}", self.embedding_dim, b.shape(x)));
        }
        if !self.per_sample && s[0] > self.num_embeddings {
            return Err(format!("sequence length {} exceeds the {} learned positions", s[0], self.num_embeddings));
        }
        let w = b.param(Shape::new([self.num_embeddings, self.embedding_dim]));
        if self.index_buffer > 0 {
            b.buffer(self.index_buffer, DType::I64);
        }
        let dt = b.dtype(w);
        let emb = if self.per_sample {
            // ids come from an expanded buffer: a batched output, no batched index memory
            b.op("embedding", &[w, x], &[(Shape::new([s[0], s[1]]), dt)], &[], false, &[], GradRule::Alloc)[0]
        } else {
            let ids = b.op("arange", &[], &[(Shape::new([s[0]]), DType::I64)], &[], false, &[], GradRule::Alloc)[0];
            let e = b.op("embedding", &[w, ids], &[(Shape::new([s[0], s[1]]), dt)], &[], false, &[], GradRule::Alloc)[0];
            // `generate()` passes `position_ids` of shape `[b, S]`: one lookup per sample
            if b.opts.generation.is_some() || self.batched {
                b.set_batched(e);
            }
            e
        };
        Ok(if self.inplace && b.value(x).requires_grad == b.value(emb).requires_grad {
            b.inplace("add_", x, Some(emb), false, GradRule::Alias)
        } else {
            add(b, x, emb)
        })
    }
}

/// ViT's class token: a learned `[1, D]` row prepended to `[S, D]` (`torch.cat`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClsToken {
    pub embedding_dim: u64,
}

impl ClsToken {
    pub fn lower(&self, b: &mut Builder, x: ValueId) -> LayerResult<ValueId> {
        let s = b.shape(x).0.clone();
        if s.len() != 2 || s[1] != self.embedding_dim {
            return Err(format!("expected a [S, {}] input, got {}", self.embedding_dim, b.shape(x)));
        }
        let tok = b.param(Shape::new([1, self.embedding_dim]));
        let dt = b.dtype(x);
        Ok(b.op("cat", &[tok, x], &[(Shape::new([s[0].saturating_add(1), s[1]]), dt)], &[], false, &[], GradRule::Alloc)[0])
    }
}

#[cfg(test)]
mod tests {
    use crate::layer::test_util::{error, ids, one};
    use serde_json::json;

    #[test]
    fn embedding_bert_word_embeddings() {
        // BERT-base `word_embeddings`: nn.Embedding(30522, 768), 30522·768 = 23,440,896;
        // int64 ids [128] → [128, 768]
        let e = ids(json!({"kind": "embedding", "num_embeddings": 30522, "embedding_dim": 768}), 128);
        assert_eq!((e.shape, e.params), (vec![128, 768], 23_440_896));
        // float input: PyTorch's "Expected tensor for argument #1 'indices' to have … Long"
        let err = error(json!({"kind": "embedding", "num_embeddings": 10, "embedding_dim": 4}), &[8]);
        assert!(err.contains("expects int64 token ids"), "{err}");
    }

    #[test]
    fn positional_embedding_bert_positions() {
        // BERT-base `position_embeddings`: nn.Embedding(512, 768) = 393,216, plus the registered
        // `position_ids` buffer (int64 [1, 512]: 4,096 bytes); added to [S, 768]
        let p = ids(json!({"kind": "sequential", "layers": [
            {"kind": "embedding", "num_embeddings": 30522, "embedding_dim": 768},
            {"kind": "positional_embedding", "num_embeddings": 512, "embedding_dim": 768, "index_buffer": 512}]}), 128);
        let row = &p.resolved.layers[2];
        assert_eq!((row.output_shape.0.as_slice(), row.params), ([128, 768].as_slice(), 393_216));
        assert_eq!(p.buffer_bytes, 4_096);
        // more positions than learned: PyTorch's index error
        let err = error(json!({"kind": "positional_embedding", "num_embeddings": 512, "embedding_dim": 4}), &[513, 4]);
        assert!(err.contains("exceeds the 512 learned positions"), "{err}");
    }

    #[test]
    fn cls_token_vit() {
        // ViT-B/16: `cls_token` nn.Parameter(1, 1, 768) prepended to 196 patches → [197, 768]
        let c = one(json!({"kind": "cls_token", "embedding_dim": 768}), &[196, 768]);
        assert_eq!((c.shape, c.params), (vec![197, 768], 768));
    }
}
