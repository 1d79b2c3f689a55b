//! Multi-head latent attention (DeepSeek-V2/V3), lowered as transformers 5.24's
//! `DeepseekV3Attention` runs it.
//!
//! Per sample, `[S, D]` in and out. With `H` heads, `n = qk_nope_head_dim`, `r = qk_rope_head_dim`,
//! `v = v_head_dim`:
//!
//! ```text
//! q   = q_b_proj(q_a_layernorm(q_a_proj(x)))            # D → q_lora_rank → H·(n+r)
//!       (or q_proj(x) when q_lora_rank is None)
//! ckv = kv_a_proj_with_mqa(x)                           # D → kv_lora_rank + r
//! kv  = kv_b_proj(kv_a_layernorm(ckv[:kv_lora_rank]))   # kv_lora_rank → H·(n+v)
//! q_rot, k_rot: RoPE on the last r dims (k_rot shared by all heads, then expanded)
//! attention(cat(q_nope, q_rot), cat(k_nope, k_rot), v) → o_proj: H·v → D
//! ```
//!
//! Biases: `q_a_proj`, `kv_a_proj_with_mqa` and `o_proj` follow `attention_bias`; `q_b_proj`,
//! `q_proj` and `kv_b_proj` never have one.
//!
//! **KV cache (for generation).** The design's cache is the latent: per token and layer,
//! `kv_lora_rank + qk_rope_head_dim` values (`c_KV` and the shared `k_rot`: 576 for DeepSeek-V3,
//! against `2·H·(n+r)`-ish for plain multi-head attention), which is what DeepSeek's own inference
//! code and serving engines keep. transformers 5.24's eager `DeepseekV3Attention`, however, calls
//! `past_key_values.update(key_states, value_states)` with the decompressed keys (`H·(n+r)`) and
//! values (`H·v`). `--mode generate` models the latent (`layer/kv_cache.rs`, `latent`): the
//! prefill attends as below, a decode step in the latent space (`latent_decode`).
//! transformers 5.24's `DeepseekV2Attention` (`expand_latent`) does cache the latents (normed
//! `k_nope` and rotated `k_pe`, `cache.update(k_nope, k_pe)`: measured exact in
//! `tests/generate_moe2.rs`), then expands the whole cache in every forward (`expand_kv`:
//! `kv_b_proj` over `L` tokens and a new `[H, L, n+r]` key) and attends as below, a decode step
//! too.

use super::activation::{add, dropout, softmax, unary, Saves};
use super::linear::Linear;
use super::norm::RmsNorm;
use super::{positive, LayerResult};
use crate::config::AttentionImpl;
use crate::finetune::LinearRole;
use crate::graph::{GradRule, Lin, ValueId};
use crate::lower::{Builder, CastPolicy};
use crate::serde_util::{is_false, t};
use crate::units::{DType, Shape};
use serde::{Deserialize, Serialize};

/// DeepSeek's multi-head latent attention with its low-rank projections and their RMSNorms.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MultiHeadLatentAttention {
    pub hidden_size: u64,
    pub num_heads: u64,
    /// Rank of the query compression; none: a full `q_proj` (DeepSeek-V2-Lite).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub q_lora_rank: Option<u64>,
    pub kv_lora_rank: u64,
    pub qk_rope_head_dim: u64,
    pub qk_nope_head_dim: u64,
    pub v_head_dim: u64,
    /// `attention_bias`: biases on `q_a_proj`, `kv_a_proj_with_mqa` and `o_proj`.
    #[serde(default, skip_serializing_if = "is_false")]
    pub bias: bool,
    /// `rope_interleave` (DeepSeek-V3's default): the rotary dims are de-interleaved by a copy first.
    #[serde(default = "t")]
    pub rope_interleave: bool,
    /// Dropout on the attention probabilities (`attention_dropout`).
    #[serde(default)]
    pub dropout: f64,
    /// Epsilon of the two latent RMSNorms (`rms_norm_eps`).
    #[serde(default = "eps")]
    pub eps: f64,
    /// transformers 5.24's `DeepseekV2Attention`: the cache holds the latents, and every forward
    /// expands the whole cache through `kv_b_proj` (`expand_kv`: `[L, H·(n+v)]` and a new
    /// `[H, L, n+r]` key) before attending, a decode step too (no absorbed latent decode).
    #[serde(default, skip_serializing_if = "is_false")]
    pub expand_latent: bool,
}

fn eps() -> f64 {
    1e-6
}

impl MultiHeadLatentAttention {
    fn check(&self) -> LayerResult<()> {
        positive(self.hidden_size, "hidden_size")?;
        positive(self.num_heads, "num_heads")?;
        positive(self.kv_lora_rank, "kv_lora_rank")?;
        positive(self.qk_rope_head_dim, "qk_rope_head_dim")?;
        positive(self.v_head_dim, "v_head_dim")?;
        if let Some(r) = self.q_lora_rank {
            positive(r, "q_lora_rank")?;
        }
        if !self.qk_rope_head_dim.is_multiple_of(2) {
            return Err(format!("qk_rope_head_dim ({}) must be even (rotate_half)", self.qk_rope_head_dim));
        }
        if !(0.0..=1.0).contains(&self.dropout) {
            return Err(format!("dropout must be between 0 and 1, got {}", self.dropout));
        }
        Ok(())
    }

    pub fn lower(&self, b: &mut Builder, x: ValueId) -> LayerResult<ValueId> {
        self.check()?;
        let seq = super::moe::sequence_len(b, x, self.hidden_size)?;
        let (d, h) = (self.hidden_size, self.num_heads);
        let (nope, rope, v) = (self.qk_nope_head_dim, self.qk_rope_head_dim, self.v_head_dim);
        let qk = nope.saturating_add(rope);
        let lin = |i, o, bias| Linear { in_features: i, out_features: o, bias, tied_weight: false };
        let norm = |n| RmsNorm { normalized_shape: n, eps: self.eps, t5: false };
        let q = match self.q_lora_rank {
            Some(r) => {
                let a = lin(d, r, self.bias).lower(named(b, LinearRole::QDown), x)?;
                let a = norm(r).lower(b, a)?;
                lin(r, h.saturating_mul(qk), false).lower(named(b, LinearRole::QUp), a)?
            }
            None => lin(d, h.saturating_mul(qk), false).lower(named(b, LinearRole::Q), x)?,
        };
        // view(query_shape).transpose(1, 2) and torch.split are views: the ops below read q, ckv
        // and kv whole (a view shares its base's storage, so liveness and saving are the same).
        let ckv = lin(d, self.kv_lora_rank.saturating_add(rope), self.bias).lower(named(b, LinearRole::KvDown), x)?;
        let k_latent = b.view(ckv, Shape::new([seq, self.kv_lora_rank]));
        let normed = norm(self.kv_lora_rank).lower(b, k_latent)?;
        let kv_up = lin(self.kv_lora_rank, h.saturating_mul(nope.saturating_add(v)), false);
        // DeepSeek-V2 expands after the cache update, V3 here
        let early = if self.expand_latent { None } else { Some(kv_up.lower(named(b, LinearRole::KvUp), normed)?) };
        // the expanded cache of a V2 decode step: the latents read and their length
        let mut cached = None;
        if let Some(step) = b.opts.generation {
            // generation caches the latent (`layer/kv_cache.rs`, `latent`); a decode step attends
            // in the latent space (V2: over the expanded cache), the prefill as below
            let (latent, attended) = super::kv_cache::latent(b, step, ckv, self.kv_lora_rank, rope);
            if !step.is_prefill() {
                if early.is_some() {
                    let out = super::kv_cache::latent_decode(b, h, self.kv_lora_rank, v, q, latent, attended);
                    return lin(h.saturating_mul(v), d, self.bias).lower(named(b, LinearRole::O), out);
                }
                cached = Some((latent, attended));
            }
        }
        let (kv_in, keys) = match cached {
            Some((latent, attended)) => (b.view(latent, Shape::new([attended, self.kv_lora_rank])), attended),
            None => (normed, seq),
        };
        let kv = match early {
            Some(kv) => kv,
            None => kv_up.lower(named(b, LinearRole::KvUp), kv_in)?,
        };
        let q_rot = self.rotary(b, q, Shape::new([h, seq, rope]));
        // k_rot: one head, `expand`ed to all heads by the `cat` (a view); a V2 decode step's
        // comes rotated from the cache
        let k_rot = match cached {
            Some((latent, _)) => latent,
            None => self.rotary(b, ckv, Shape::new([1, seq, rope])),
        };
        let query = cat(b, q, q_rot, Shape::new([h, seq, qk]));
        let key = cat(b, kv, k_rot, Shape::new([h, keys, qk]));
        let value = kv;
        let out = match b.opts.attention {
            AttentionImpl::Sdpa => {
                // q/k head dim ≠ v head dim rules out the flash kernel: the memory-efficient one
                // saves q, k, v, the output and an fp32 log-sum-exp
                let (ins, dt) = b.autocast(CastPolicy::Lower, &[query, key, value]);
                let lse = (Shape::new([h, seq.div_ceil(32).saturating_mul(32)]), true, DType::F32);
                // the kernel writes [S, H, v] memory: transpose(1, 2).reshape(...) is free
                b.op("sdpa", &ins, &[(Shape::new([seq, h.saturating_mul(v)]), dt)], &ins, true, &[lse], GradRule::Alloc)[0]
            }
            AttentionImpl::Eager => {
                let (out, probs) = self.eager(b, query, key, value, seq, keys);
                // `hidden_states, _ = self.self_attn(...)`: the decoder layer keeps the
                // probabilities in `_` until it returns
                if !b.training() {
                    b.layer_locals.push(probs);
                }
                out
            }
        };
        let out = lin(h.saturating_mul(v), d, self.bias).lower(named(b, LinearRole::O), out)?;
        if self.expand_latent && !b.training() {
            // `query_states`, `key_states` and `value_states` (`kv_b_proj`'s output) are
            // `forward`'s locals until it returns
            [query, key, kv].into_iter().for_each(|l| b.hold(l));
        }
        Ok(out)
    }

    /// `eager_attention_forward`: `matmul(q, kᵀ) · scaling + mask`, fp32 softmax cast back,
    /// dropout, `matmul(p, v)`, `transpose(1, 2).contiguous()`.
    /// `seq` queries over `keys` keys; returns the output and the probabilities.
    fn eager(&self, b: &mut Builder, q: ValueId, k: ValueId, value: ValueId, seq: u64, keys: u64) -> (ValueId, ValueId) {
        let (h, v) = (self.num_heads, self.v_head_dim);
        let (ins, dt) = b.autocast(CastPolicy::Lower, &[q, k]);
        // q and k are contiguous (fresh `cat`s): matmul's reshape to 3-d is a view
        let scores = b.op("bmm", &ins, &[(Shape::new([h, seq, keys]), dt)], &ins, false, &[], GradRule::Alloc)[0];
        let scores = unary(b, "mul_scalar", scores, Saves::Nothing);
        let shape = Shape::new([seq, keys]);
        let mask = if b.training() {
            b.op("causal_mask", &[], &[(shape, dt)], &[], false, &[], GradRule::Alloc)[0]
        } else {
            // outside training: `create_causal_mask`'s one `[B, 1, Q, L]` mask per forward,
            // passed to every layer (`attention.rs` `causal_mask`), a local of
            // `DeepseekV2Model.forward` until it returns
            b.per_forward("causal_mask", &shape, |b| {
                let m = b.op("causal_mask", &[], &[(shape.clone(), dt)], &[], false, &[], GradRule::Alloc)[0];
                b.set_batched(m);
                b.forward_locals.push(m);
                m
            })
        };
        let scores = add(b, scores, mask);
        let probs = softmax(b, scores, Some(DType::F32));
        let probs = b.cast(probs, dt);
        let probs = dropout(b, probs, self.dropout);
        // v is a strided view of kv_b_proj's output (`view(B, L, H, n + v).transpose(1, 2)`,
        // split): matmul's reshape to `[B·H, L, v]` copies it, except at a batch of one
        let (vins, _) = b.autocast(CastPolicy::Lower, &[value]);
        let vc = b.fold_batch(vins[0], Shape::new([h, keys, v]));
        let out = b.op("bmm", &[probs, vc], &[(Shape::new([h, seq, v]), dt)], &[probs, vc], false, &[], GradRule::Alloc)[0];
        (b.op("clone", &[out], &[(Shape::new([seq, h.saturating_mul(v)]), dt)], &[], false, &[], GradRule::Alias)[0], probs)
    }

    /// `apply_rotary_pos_emb(_interleave)` on the rotary slice (`out`: `[heads, S, r]`) of `x`:
    /// with `rope_interleave` the `view(…, r/2, 2).transpose(4, 3).reshape(…)` copy, then
    /// `x * cos + rotate_half(x) * sin`. One op for the chain: its output, the fixed cos/sin tables
    /// it saves, and as forward workspace the copy, `x * cos`, `-x2`, the `cat` and `· sin` that
    /// die inside it (backward: the gradients of the same).
    fn rotary(&self, b: &mut Builder, x: ValueId, out: Shape) -> ValueId {
        let dt = b.dtype(x);
        let one = out.numel().saturating_mul(dt.size());
        let tables = (Shape::new([out.0[1], out.0[2]]), false, dt);
        let y = b.op("rope", &[x], &[(out, dt)], &[], false, &[tables.clone(), tables], GradRule::Alloc)[0];
        let temps = if self.rope_interleave { 4 } else { 3 };
        b.last_fwd_scratch(Lin { fixed: 0, per_sample: one.saturating_mul(temps) });
        b.last_bwd_scratch(Lin { fixed: 0, per_sample: one.saturating_mul(2) });
        y
    }
}

/// The builder with the next linear's role set: its module name in `DeepseekV3Attention`
/// (LoRA targets, `--train-only`).
fn named(b: &mut Builder, role: LinearRole) -> &mut Builder {
    b.role = Some(role);
    b
}

/// `torch.cat((a, b), dim=-1)`: a new tensor; saves nothing.
fn cat(b: &mut Builder, x: ValueId, y: ValueId, out: Shape) -> ValueId {
    let (ins, dt) = b.autocast(CastPolicy::Promote, &[x, y]);
    b.op("cat", &ins, &[(out, dt)], &[], false, &[], GradRule::Alloc)[0]
}

#[cfg(test)]
mod tests {
    use crate::layer::test_util::{error, one};
    use serde_json::json;

    fn deepseek_v3() -> serde_json::Value {
        json!({"kind": "multi_head_latent_attention", "hidden_size": 7168, "num_heads": 128, "q_lora_rank": 1536,
            "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128})
    }

    #[test]
    fn deepseek_v3_attention_params() {
        // DeepseekV3Attention: q_a_proj 7168·1536, q_a_layernorm 1536, q_b_proj 1536·128·192,
        // kv_a_proj_with_mqa 7168·576, kv_a_layernorm 512, kv_b_proj 512·128·256,
        // o_proj 128·128·7168: 187,107,328
        let a = one(deepseek_v3(), &[8, 7168]);
        assert_eq!((a.shape, a.params), (vec![8, 7168], 187_107_328));
        // without a query compression: q_proj 7168·128·192 instead of the three q_a/q_b pieces
        let mut v = deepseek_v3();
        v.as_object_mut().unwrap().remove("q_lora_rank");
        let a = one(v, &[8, 7168]);
        assert_eq!(a.params, 187_107_328 - (7168 * 1536 + 1536 + 1536 * 128 * 192) + 7168 * 128 * 192);
        // attention_bias: q_a_proj, kv_a_proj_with_mqa and o_proj get biases
        let mut v = deepseek_v3();
        v["bias"] = json!(true);
        assert_eq!(one(v, &[8, 7168]).params, 187_107_328 + 1536 + 576 + 7168);
    }

    #[test]
    fn eager_and_sdpa_both_lower() {
        use crate::lower::LowerOptions;
        let spec = crate::spec::ModelSpec::from_json(
            &json!({"input": {"shape": [16, 64]}, "layers": [{"kind": "multi_head_latent_attention", "hidden_size": 64,
                "num_heads": 4, "q_lora_rank": 32, "kv_lora_rank": 16, "qk_rope_head_dim": 8, "qk_nope_head_dim": 16,
                "v_head_dim": 12}]}).to_string(),
        )
        .unwrap();
        for attention in [crate::config::AttentionImpl::Sdpa, crate::config::AttentionImpl::Eager] {
            let r = crate::resolve::resolve(&spec, None, LowerOptions { attention, ..LowerOptions::default() }).unwrap();
            assert_eq!(r.layers[0].output_shape.0, [16, 64]);
            // eager keeps H·S·S scores; SDPA does not
            let scores = r.graph.ops.iter().any(|o| o.name == "softmax" && r.graph.value(o.outputs[0]).shape.0 == [4, 16, 16]);
            assert_eq!(scores, attention == crate::config::AttentionImpl::Eager);
        }
    }

    #[test]
    fn saved_for_backward_with_sdpa() {
        // D 64, 4 heads, q_lora 32, kv_lora 16, rope 8, nope 16, v 12, S 16, fp32, after a linear.
        // Saved per sample: the input x (S·D, by q_a_proj and kv_a_proj_with_mqa); per latent
        // RMSNorm its input, rsqrt output, normalised output (for the weight's gradient) and its
        // output (by the next projection) — the kv one reads kv_a's whole [S, 16 + 8] output
        // through its view; kv_b_proj's output (S·4·28, read by SDPA as the
        // values); the concatenated query and key (4·S·24 each); SDPA's output (S·4·12) and
        // log-sum-exp (4 heads × 32 rows, fp32)
        let m = one(json!({"kind": "sequential", "layers": [{"kind": "linear", "in_features": 64, "out_features": 64},
            {"kind": "multi_head_latent_attention", "hidden_size": 64, "num_heads": 4, "q_lora_rank": 32, "kv_lora_rank": 16,
             "qk_rope_head_dim": 8, "qk_nope_head_dim": 16, "v_head_dim": 12}]}), &[16, 64]);
        let g = &m.resolved.graph;
        let mut saved: Vec<u32> =
            g.ops.iter().filter(|o| o.layer == 2 && !matches!(o.name, "log_softmax" | "nll_loss")).flat_map(|o| o.saved.iter().copied()).collect();
        saved.sort_unstable();
        saved.dedup();
        let per_sample: u64 = saved.iter().map(|&s| g.storages[s as usize].bytes.per_sample).sum();
        let s = 16u64;
        let norms = (s * 32 + s + 2 * s * 32) + (s * 24 + s + 2 * s * 16);
        let want = 4 * (s * 64 + norms + s * 4 * 28 + 2 * 4 * s * 24 + s * 4 * 12 + 4 * 32);
        assert_eq!(per_sample, want);
        assert_eq!(want, 36_992);
    }

    #[test]
    fn latent_attention_refuses_bad_sizes() {
        let mut v = deepseek_v3();
        v["qk_rope_head_dim"] = json!(63);
        assert!(error(v, &[4, 7168]).contains("must be even"));
        assert!(error(deepseek_v3(), &[4, 512]).contains("expected 7168 features, got 512"));
    }
}
