//! What encoder–decoders need beyond one stream of layers: a second input (`token_input`: the
//! decoder's token ids; the encoder's output becomes the *memory*), attention from the second
//! stream to the memory (`cross_attention`), and T5's relative position bias
//! (`relative_position_bias`, added to the scores by `multihead_attention`'s `position_bias`).
//! Two towers (CLIP) use the same second input: the first tower's embedding is the memory that
//! `contrastive` compares with the second's.
//!
//! A spec lists the encoder's layers, then `token_input`, then the decoder's layers: the model
//! `T5ForConditionalGeneration` / `WhisperForConditionalGeneration` runs, as
//! transformers 5.24 `modeling_t5.py` (`T5Attention`, `T5Stack`) and `modeling_whisper.py`
//! (`WhisperAttention`) write it. Per sample, activations are `[S, D]`; the memory `[S_enc, D]`.

use super::activation::{add, dropout, softmax, unary, Saves};
use super::attention::{bmm_cached, copy, sdpa_backend, SdpaBackend};
use super::linear::Linear;
use super::{positive, LayerResult};
use crate::config::AttentionImpl;
use crate::graph::{GradRule, ValueId};
use crate::lower::{Builder, CastPolicy};
use crate::serde_util::{is_false, t};
use crate::units::{DType, Shape};
use serde::{Deserialize, Serialize};

/// Sets the current output aside as the memory and starts a second stream of `seq_len` int64
/// token ids per sample (the decoder's `decoder_input_ids`, from the labels by `_shift_right`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenInput {
    pub seq_len: u64,
    /// A vision-language model's prompt: after an image input, the estimate's sequence length
    /// (`--seq-len`) replaces `seq_len`.
    #[serde(default, skip_serializing_if = "is_false")]
    pub prompt: bool,
    /// The processor gives the prompt's `token_type_ids` too (`[S]` int64, 1 at the image
    /// tokens: PaliGemma's and Gemma 3's `return_token_type_ids`), which `generate()` keeps
    /// and grows (`memory/generate.rs`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub token_type_ids: bool,
}

impl TokenInput {
    pub fn lower(&self, b: &mut Builder, x: ValueId) -> LayerResult<ValueId> {
        positive(self.seq_len, "seq_len")?;
        if b.memory.is_some() {
            return Err("a model has at most one `token_input`".into());
        }
        b.memory = Some(x);
        b.position_bias = None;
        let len = if self.prompt { b.prompt_len.unwrap_or(self.seq_len) } else { self.seq_len };
        Ok(b.input(Shape::new([len]), DType::I64))
    }
}

/// T5's bucketed relative position bias of one stack: `nn.Embedding(num_buckets, num_heads)`
/// looked up once per forward with a `[S, S]` int64 bucket matrix (built without gradient),
/// permuted to `[1, H, S, S]` (in the parameters' dtype, one per batch) and kept for every layer
/// of the stack (`T5Attention.compute_bias`). The layer passes its input through.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RelativePositionBias {
    pub num_buckets: u64,
    pub num_heads: u64,
    /// Buckets for both directions (the encoder) or only the past (the decoder).
    #[serde(default = "t")]
    pub bidirectional: bool,
}

impl RelativePositionBias {
    pub fn lower(&self, b: &mut Builder, x: ValueId) -> LayerResult<ValueId> {
        positive(self.num_buckets, "num_buckets")?;
        positive(self.num_heads, "num_heads")?;
        let s = b.shape(x).0.clone();
        if s.len() != 2 {
            return Err(format!("expected a [S, D] input, got {}", b.shape(x)));
        }
        let w = b.param(Shape::new([self.num_buckets, self.num_heads]));
        let seq = s[0];
        let dt = b.dtype(w);
        let buckets = (Shape::new([seq, seq]), false, DType::I64);
        let values = b.op("embedding", &[w], &[(Shape::new([seq, seq, self.num_heads]), dt)], &[], false, &[buckets], GradRule::Alloc)[0];
        b.position_bias = Some(b.view(values, Shape::new([self.num_heads, seq, seq])));
        Ok(x)
    }
}

/// Attention from the current stream (queries) to the memory (keys and values), with its
/// projections: T5's `EncDecAttention`, Whisper's `encoder_attn`. Not causal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CrossAttention {
    pub embed_dim: u64,
    pub num_heads: u64,
    /// Size of one head (default `embed_dim / num_heads`; T5's `d_kv`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_dim: Option<u64>,
    /// Dropout on the attention probabilities.
    #[serde(default)]
    pub dropout: f64,
    #[serde(default = "t")]
    pub bias: bool,
    /// Bias of the K projection (default: `bias`; Whisper's `k_proj` has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_bias: Option<bool>,
    /// T5: the scores get a zero `[1, H, S, S_enc]` position bias added (`T5Attention` without
    /// `has_relative_attention_bias`), a new scores tensor.
    #[serde(default, skip_serializing_if = "is_false")]
    pub position_bias: bool,
    /// Q/K/V made contiguous per head (Whisper's `.transpose(1, 2).contiguous()`): a flash
    /// kernel's output keeps that layout, so transposing it back is a copy.
    #[serde(default, skip_serializing_if = "is_false")]
    pub contiguous_heads: bool,
}

impl CrossAttention {
    pub fn lower(&self, b: &mut Builder, x: ValueId) -> LayerResult<ValueId> {
        positive(self.embed_dim, "embed_dim")?;
        positive(self.num_heads, "num_heads")?;
        let hd = match self.head_dim {
            Some(hd) => hd,
            None if self.embed_dim.is_multiple_of(self.num_heads) => self.embed_dim / self.num_heads,
            None => return Err(format!("embed_dim ({}) must be divisible by num_heads ({})", self.embed_dim, self.num_heads)),
        };
        positive(hd, "head_dim")?;
        if !(0.0..=1.0).contains(&self.dropout) {
            return Err(format!("dropout must be between 0 and 1, got {}", self.dropout));
        }
        let mem = b.memory.ok_or("cross_attention needs a `token_input` earlier in the model (the encoder's output is its memory)")?;
        let (xs, ms) = (b.shape(x).0.clone(), b.shape(mem).0.clone());
        if xs.len() != 2 || ms.len() != 2 {
            return Err(format!("expected [S, D] input and memory, got {} and {}", b.shape(x), b.shape(mem)));
        }
        super::expect_last(b.shape(x), self.embed_dim, "features")?;
        let (sq, sk, d, h) = (xs[0], ms[0], self.embed_dim, self.num_heads);
        let inner = h.saturating_mul(hd);
        let proj = |i, o, bias| Linear { in_features: i, out_features: o, bias, tied_weight: false };
        let q = proj(d, inner, self.bias).lower(b, x)?;
        let q = b.view(q, Shape::new([h, sq, hd]));
        // in `generate()`: projected and cached once (the `EncoderDecoderCache`'s cross-attention cache)
        let (mut k, mut v) = super::kv_cache::cross_cache(b, mem, Shape::new([h, sk, hd]), |b, mem| {
            let k = proj(ms[1], inner, self.key_bias.unwrap_or(self.bias)).lower(b, mem)?;
            let v = proj(ms[1], inner, self.bias).lower(b, mem)?;
            Ok((b.view(k, Shape::new([h, sk, hd])), b.view(v, Shape::new([h, sk, hd]))))
        })?;
        let dropout_p = if b.training() { self.dropout } else { 0.0 };
        let eager = b.opts.attention == AttentionImpl::Eager;
        let bias = |b: &mut Builder| {
            let dt = b.float_dtype();
            b.op("zeros", &[], &[(Shape::new([h, sq, sk]), dt)], &[], false, &[], GradRule::Alloc)[0]
        };
        let out = if eager {
            // (in `generate()` the cache's keys and values are read as views)
            let scores = bmm_cached(b, q, k, Shape::new([h, sq, sk]), true);
            let mut scores = unary(b, "mul_scalar", scores, Saves::Nothing);
            if self.position_bias {
                let zero = bias(b);
                scores = add(b, scores, zero);
            }
            let probs = softmax(b, scores, None);
            let probs = dropout(b, probs, self.dropout);
            let out = bmm_cached(b, probs, v, Shape::new([h, sq, hd]), false);
            b.hold(probs);
            copy(b, out, Shape::new([sq, inner]))
        } else {
            if b.training() {
                // the decoder trains with `use_cache=True`: `EncoderDecoderCache` keeps `torch.cat`
                // copies of the memory's K and V, which SDPA then reads and saves
                k = copy(b, k, Shape::new([h, sk, hd]));
                v = copy(b, v, Shape::new([h, sk, hd]));
            }
            let (mut ins, dt) = b.autocast(CastPolicy::Lower, &[q, k, v]);
            if self.position_bias {
                ins.push(bias(b));
            }
            let backend = sdpa_backend(b.opts.device, dt, hd, self.position_bias, dropout_p);
            let lse_len = if backend == SdpaBackend::MemEfficient { sq.div_ceil(32).saturating_mul(32) } else { sq };
            let lse = (Shape::new([h, lse_len]), true, DType::F32);
            let out = b.op("sdpa", &ins, &[(Shape::new([h, sq, hd]), dt)], &ins, true, &[lse], GradRule::Alloc)[0];
            if self.contiguous_heads && backend == SdpaBackend::Flash {
                copy(b, out, Shape::new([sq, inner]))
            } else {
                b.view(out, Shape::new([sq, inner]))
            }
        };
        proj(inner, d, self.bias).lower(b, out)
    }
}

/// CLIP's contrastive head (`CLIPModel.forward`, transformers 5.24 `modeling_clip.py`): both
/// embeddings (the memory, the image's; the input, the text's) divided by their L2 norms
/// (`_get_vector_norm`: `pow(2)`, `sum`, `pow(0.5)`), their similarity matrix times
/// `logit_scale.exp()` (one parameter), and the loss on it. The `B × B` similarities are
/// counted as one value per sample (the output `[1]`): the matrix is quadratic in the batch,
/// which the estimate's per-sample accounting cannot express, and below 4 MB up to B = 1024.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Contrastive {
    pub embed_dim: u64,
    /// SigLIP's `logit_bias` (one more parameter), added after the scale.
    #[serde(default, skip_serializing_if = "is_false")]
    pub bias: bool,
}

impl Contrastive {
    pub fn lower(&self, b: &mut Builder, x: ValueId) -> LayerResult<ValueId> {
        let mem = b.memory.ok_or("contrastive needs a `token_input` earlier in the model (the first tower's output is its memory)")?;
        for v in [x, mem] {
            if b.shape(v).0 != [self.embed_dim] {
                return Err(format!("expected [{}] embeddings from both towers, got {} and {}", self.embed_dim, b.shape(x), b.shape(mem)));
            }
        }
        let scale = b.param(Shape::new([]));
        let mut normed = Vec::new();
        for v in [mem, x] {
            let sq = unary(b, "pow", v, Saves::Input);
            let dt = b.dtype(sq);
            let sum = b.op("sum", &[sq], &[(Shape::new([1]), dt)], &[], false, &[], GradRule::Alloc)[0];
            let norm = b.op("pow", &[sum], &[(Shape::new([1]), dt)], &[sum], true, &[], GradRule::Alloc)[0];
            let (ins, dt) = b.autocast(CastPolicy::Promote, &[v, norm]);
            normed.push(b.op("div", &ins, &[(Shape::new([self.embed_dim]), dt)], &ins, true, &[], GradRule::Alloc)[0]);
        }
        let (ins, dt) = b.autocast(CastPolicy::Lower, &normed);
        let sim = b.op("mm", &ins, &[(Shape::new([1]), dt)], &ins, false, &[], GradRule::Alloc)[0];
        let exp = unary(b, "exp", scale, Saves::Output);
        let scaled = super::activation::mul(b, sim, exp);
        if self.bias {
            let bias = b.param(Shape::new([]));
            return Ok(add(b, scaled, bias));
        }
        Ok(scaled)
    }
}

#[cfg(test)]
mod tests {
    //! Parameter counts as `sum(p.numel() for p in m.parameters())` gives them in PyTorch.

    use crate::layer::test_util::{error, one};
    use crate::lower::LowerOptions;
    use crate::resolve::resolve;
    use crate::spec::ModelSpec;
    use serde_json::json;

    /// `layers` after a float input `[S, D]` (the memory) and a `token_input` of `seq` tokens.
    fn after_token_input(layers: serde_json::Value, shape: &[u64], seq: u64) -> crate::resolve::Resolved {
        let mut all = vec![json!({"kind": "token_input", "seq_len": seq})];
        all.extend(layers.as_array().unwrap().iter().cloned());
        let spec = ModelSpec::from_json(&json!({"input": {"shape": shape}, "layers": all}).to_string()).unwrap();
        resolve(&spec, None, LowerOptions::default()).unwrap()
    }

    #[test]
    fn cross_attention_projects_queries_from_the_input_and_keys_from_the_memory() {
        // T5-small's EncDecAttention: q, k, v, o without bias, 8 heads × d_kv 64 on d_model 512:
        // 4 · 512 · 512 = 1,048,576; the output has the decoder's length, not the encoder's
        let r = after_token_input(
            json!([{"kind": "embedding", "num_embeddings": 100, "embedding_dim": 512},
                   {"kind": "cross_attention", "embed_dim": 512, "num_heads": 8, "head_dim": 64, "bias": false}]),
            &[37, 512],
            11,
        );
        assert_eq!(r.layers[2].params, 1_048_576);
        assert_eq!(r.layers[2].output_shape.0, [11, 512]);
        // Whisper's encoder_attn: biases on q, v and out_proj only: 4 · 384² + 3 · 384
        let r = after_token_input(
            json!([{"kind": "embedding", "num_embeddings": 100, "embedding_dim": 384},
                   {"kind": "cross_attention", "embed_dim": 384, "num_heads": 6, "key_bias": false}]),
            &[1500, 384],
            448,
        );
        assert_eq!(r.layers[2].params, 4 * 384 * 384 + 3 * 384);
    }

    #[test]
    fn cross_attention_and_contrastive_need_a_token_input() {
        let e = error(json!({"kind": "cross_attention", "embed_dim": 8, "num_heads": 2}), &[4, 8]);
        assert!(e.contains("needs a `token_input`"), "{e}");
        let e = error(json!({"kind": "contrastive", "embed_dim": 8}), &[8]);
        assert!(e.contains("needs a `token_input`"), "{e}");
        let e = error(json!({"kind": "multihead_attention", "embed_dim": 8, "num_heads": 2, "position_bias": true}), &[4, 8]);
        assert!(e.contains("relative_position_bias"), "{e}");
    }

    #[test]
    fn relative_position_bias_is_one_small_table() {
        // T5Attention.relative_attention_bias = nn.Embedding(32, 8): 256 parameters
        let l = one(json!({"kind": "relative_position_bias", "num_buckets": 32, "num_heads": 8}), &[16, 512]);
        assert_eq!((l.params, l.shape), (256, vec![16, 512]));
    }

    #[test]
    fn contrastive_has_the_logit_scale() {
        let r = after_token_input(
            json!([{"kind": "embedding", "num_embeddings": 100, "embedding_dim": 64}, {"kind": "select_token"},
                   {"kind": "contrastive", "embed_dim": 64}]),
            &[64],
            5,
        );
        assert_eq!((r.layers[3].params, r.layers[3].output_shape.0.to_vec()), (1, vec![1]));
    }
}
