//! Llama 3.2 Vision's cross-attention decoder layer (`MllamaCrossAttentionDecoderLayer`,
//! transformers 5.24 `modeling_mllama.py`), interleaved with the self-attention layers at
//! `cross_attention_layers`. Per sample, text `[S, D]`, the image tokens (the memory a
//! `token_input` set aside, after the projector) `[N, D]`:
//!
//! * `input_layernorm` (RMSNorm), `MllamaTextCrossAttention`: bias-free `q_proj` on the text,
//!   `k_proj`/`v_proj` on the image tokens (`num_key_value_heads` heads, grouped), `q_norm` and
//!   `k_norm` (RMSNorm over `head_dim`), attention (eager: `repeat_kv` copies, `[H, S, N]` scores,
//!   fp32 softmax, `@ V`; SDPA: one fused kernel), `o_proj`;
//!   `residual + cross_attn_attn_gate.tanh() * out`;
//! * `post_attention_layernorm`, the SwiGLU MLP, `residual + cross_attn_mlp_gate.tanh() * out`.
//!
//! In `generate()` (`MllamaTextCrossAttention.forward` with a cache) the prefill projects the
//! image tokens and `cache.update` stores K and V once (`DynamicLayer.update`'s `torch.cat`: a
//! copy, `[Hkv, N, d]` each; `_prepare_static_cache` gives a static cache's cross layers `N`
//! slots, the same bytes); a decode step projects nothing and attends over the cached `N` keys,
//! which do not grow with the tokens. An 8-bit cache is not modelled for these layers (they keep
//! the compute dtype or `kv_dtype` without the quantize/dequantize copies).
//!
//! No rotary positions on either side. Not modelled (memory only): the cross-attention mask and
//! `full_text_row_masked_out_mask` (`[S, N]` and `[S, 1]` per sample) a caller passes with the image.

use super::activation::{add, dropout, softmax};
use super::attention::{copy, matmul};
use super::linear::GatedMlp;
use super::linear::Linear;
use super::norm::RmsNorm;
use super::sdpa::{sdpa_backend, SdpaBackend};
use super::kv_cache::cross_cache;
use super::tiled_vision::tanh_gate;
use super::{positive, LayerResult};
use crate::config::AttentionImpl;
use crate::graph::{GradRule, ValueId};
use crate::lower::{Builder, CastPolicy};
use crate::units::{DType, Shape};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GatedCrossAttentionLayer {
    pub hidden_size: u64,
    pub num_heads: u64,
    pub num_kv_heads: u64,
    pub intermediate_size: u64,
    #[serde(default = "eps")]
    pub eps: f64,
    /// Dropout on the attention probabilities in training (`MllamaTextConfig.dropout`).
    #[serde(default)]
    pub dropout: f64,
}

fn eps() -> f64 {
    1e-5
}

impl GatedCrossAttentionLayer {
    /// The keys and values over the `sk` image tokens: projected (and cached once in the prefill
    /// of `generate()`), or read from the cache in a decode step.
    fn keys(&self, b: &mut Builder, mem: ValueId, sk: u64, hd: u64) -> LayerResult<(ValueId, ValueId)> {
        let (d, kvh) = (self.hidden_size, self.num_kv_heads);
        let shape = Shape::new([kvh, sk, hd]);
        cross_cache(b, mem, shape.clone(), |b, mem| {
            let proj = |o| Linear { in_features: d, out_features: o, bias: false, tied_weight: false };
            let k = proj(kvh.saturating_mul(hd)).lower(b, mem)?;
            let v = proj(kvh.saturating_mul(hd)).lower(b, mem)?;
            let k = b.view(k, shape.clone());
            let k = RmsNorm { normalized_shape: hd, eps: self.eps, t5: false }.lower(b, k)?;
            Ok((k, b.view(v, shape)))
        })
    }

    pub fn lower(&self, b: &mut Builder, x: ValueId) -> LayerResult<ValueId> {
        positive(self.hidden_size, "hidden_size")?;
        positive(self.num_heads, "num_heads")?;
        positive(self.num_kv_heads, "num_kv_heads")?;
        positive(self.intermediate_size, "intermediate_size")?;
        let (d, h, kvh) = (self.hidden_size, self.num_heads, self.num_kv_heads);
        if !d.is_multiple_of(h) || !h.is_multiple_of(kvh) {
            return Err(format!("hidden_size ({d}) must be divisible by num_heads ({h}), and num_heads by num_kv_heads ({kvh})"));
        }
        if !(0.0..=1.0).contains(&self.dropout) {
            return Err(format!("dropout must be between 0 and 1, got {}", self.dropout));
        }
        let mem = b.memory.ok_or("gated_cross_attention_layer needs a `token_input` after the vision tower (its output is the image tokens)")?;
        let (xs, ms) = (b.shape(x).0.clone(), b.shape(mem).0.clone());
        if xs.len() != 2 || ms.len() != 2 || xs[1] != d || ms[1] != d {
            return Err(format!("expected [S, {d}] text and [N, {d}] image tokens, got {} and {}", b.shape(x), b.shape(mem)));
        }
        let (sq, sk, hd) = (xs[0], ms[0], d / h);
        let norm = RmsNorm { normalized_shape: d, eps: self.eps, t5: false };
        let proj = |i, o| Linear { in_features: i, out_features: o, bias: false, tied_weight: false };
        let head_norm = RmsNorm { normalized_shape: hd, eps: self.eps, t5: false };
        let n = norm.lower(b, x)?;
        let q = proj(d, d).lower(b, n)?;
        let q = b.view(q, Shape::new([h, sq, hd]));
        let q = head_norm.lower(b, q)?;
        let (k, v) = self.keys(b, mem, sk, hd)?;
        let p = if b.training() { self.dropout } else { 0.0 };
        let out = match b.opts.attention {
            AttentionImpl::Eager => {
                // `repeat_kv`: copies when the heads are grouped
                let (k, v) = if kvh == h { (k, v) } else { (copy(b, k, Shape::new([h, sk, hd])), copy(b, v, Shape::new([h, sk, hd]))) };
                // `torch.matmul` reshapes K·ᵀ and V to `[B·H, …]`: a view of a contiguous tensor
                // (the `repeat_kv` copies, the cache's `torch.cat`), a copy of the transposed
                // projections otherwise (`eager_attention_forward`, `modeling_mllama.py`)
                let contiguous = kvh != h || b.opts.generation.is_some();
                let scores = matmul(b, q, k, Shape::new([h, sq, sk]), (false, !contiguous));
                let scores = super::activation::unary(b, "mul_scalar", scores, super::activation::Saves::Nothing);
                let probs = softmax(b, scores, Some(DType::F32));
                let dt = b.dtype(q);
                let probs = b.cast(probs, dt);
                let probs = dropout(b, probs, p);
                let o = matmul(b, probs, v, Shape::new([h, sq, hd]), (false, !contiguous));
                b.hold(probs);
                copy(b, o, Shape::new([sq, d]))
            }
            _ => {
                let (ins, dt) = b.autocast(CastPolicy::Lower, &[q, k, v]);
                let backend = sdpa_backend(b.opts.device, dt, hd, false, p);
                let lse_len = if backend == SdpaBackend::MemEfficient { sq.div_ceil(32).saturating_mul(32) } else { sq };
                let lse = (Shape::new([h, lse_len]), true, DType::F32);
                let o = b.op("sdpa", &ins, &[(Shape::new([h, sq, hd]), dt)], &ins, true, &[lse], GradRule::Alloc)[0];
                b.view(o, Shape::new([sq, d]))
            }
        };
        let a = proj(d, d).lower(b, out)?;
        // `MllamaCrossAttentionDecoderLayer.forward` passes the norm's output to `self.cross_attn`
        // as its local `hidden_states`, and `query_states` is the attention's: both live until it
        // returns; `hidden_states = self.mlp(hidden_states)` keeps the second norm's output
        // through the MLP (`modeling_mllama.py`)
        b.hold(n);
        b.hold(q);
        let a = tanh_gate(b, a);
        let hsum = add(b, x, a);
        let n2 = norm.lower(b, hsum)?;
        let m = GatedMlp { hidden_size: d, intermediate_size: self.intermediate_size, bias: false, gelu_new_dropout: None }.lower(b, n2)?;
        b.hold(n2);
        let m = tanh_gate(b, m);
        Ok(add(b, hsum, m))
    }
}

#[cfg(test)]
mod tests {
    use crate::lower::LowerOptions;
    use crate::resolve::resolve;
    use crate::spec::ModelSpec;

    /// `MllamaCrossAttentionDecoderLayer`'s parameters by hand: Q/O `D²`, K/V `D·kv·hd`, two head
    /// norms, two RMSNorms, the SwiGLU MLP and two gates.
    #[test]
    fn cross_layer_parameters_and_memory_errors() {
        let text = r#"{"input": {"shape": [6, 32]}, "layers": [{"kind": "linear", "in_features": 32, "out_features": 32},
            {"kind": "token_input", "seq_len": 10}, {"kind": "embedding", "num_embeddings": 50, "embedding_dim": 32},
            {"kind": "gated_cross_attention_layer", "hidden_size": 32, "num_heads": 4, "num_kv_heads": 2, "intermediate_size": 48}]}"#;
        for attention in [crate::config::AttentionImpl::Eager, crate::config::AttentionImpl::Sdpa] {
            let opts = LowerOptions { attention, ..LowerOptions::default() };
            let r = resolve(&ModelSpec::from_json(text).unwrap(), None, opts).unwrap();
            let (d, hd, kv) = (32u64, 8, 2);
            let want = 2 * d * d + 2 * d * kv * hd + 2 * hd + 2 * d + 3 * d * 48 + 2;
            assert_eq!(r.layers[3].params, want);
            assert_eq!(r.layers[3].output_shape.0, vec![10, 32]);
        }
        let bad = r#"{"input": {"shape": [10], "dtype": "int64", "vocab_size": 50}, "layers": [{"kind": "embedding", "num_embeddings": 50, "embedding_dim": 32},
            {"kind": "gated_cross_attention_layer", "hidden_size": 32, "num_heads": 4, "num_kv_heads": 2, "intermediate_size": 48}]}"#;
        let e = resolve(&ModelSpec::from_json(bad).unwrap(), None, LowerOptions::default()).unwrap_err().to_string();
        assert!(e.contains("token_input"), "{e}");
    }
}
