//! Multi-head self-attention and transformer layers, lowered the way Hugging Face writes them.
//!
//! Per sample, activations are `[S, D]`. Eager attention (`softmax(QKᵀ/√d)V` in separate ops)
//! materialises and saves `H × S × S` scores, probabilities and a dropout mask; SDPA's
//! memory-efficient/flash kernels save only Q, K, V, the output and an `H × S` log-sum-exp.

pub use super::sdpa::{sdpa_backend, SdpaBackend};
use super::activation::{add, dropout, mul, softmax, unary, Saves};
use super::linear::Linear;
use super::norm::{LayerNorm, NormKind, RmsNorm};
use super::{positive, LayerResult};
use crate::finetune::LinearRole;
use crate::graph::{GradRule, ValueId};
use crate::lower::{Builder, CastPolicy};
use crate::config::{AttentionImpl, Device};
use crate::serde_util::{is_false, t};
use crate::units::{DType, Shape};
use serde::{Deserialize, Serialize};

/// Self-attention with its Q/K/V and output projections.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MultiheadAttention {
    pub embed_dim: u64,
    pub num_heads: u64,
    /// Grouped-query attention (LLaMA): fewer key/value heads than query heads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_kv_heads: Option<u64>,
    /// Dropout on the attention probabilities.
    #[serde(default)]
    pub dropout: f64,
    #[serde(default = "t")]
    pub bias: bool,
    /// Causal mask (decoders).
    #[serde(default, skip_serializing_if = "is_false")]
    pub causal: bool,
    /// Rotary position embedding applied to Q and K (LLaMA).
    #[serde(default, skip_serializing_if = "is_false")]
    pub rotary: bool,
    /// One `[D, 3D]` projection split into Q, K, V (GPT-2's `c_attn`, `nn.MultiheadAttention`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub fused_qkv: bool,
    /// Size of one head (default `embed_dim / num_heads`); Gemma's 256 makes the Q/K/V width
    /// `num_heads × head_dim` differ from `embed_dim`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_dim: Option<u64>,
    /// Bias of the output projection (default: `bias`; Qwen2 has Q/K/V biases and none here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub out_bias: Option<bool>,
    /// Rotary embedding on the first `rotary_dim` features of each head only (GPT-NeoX, Phi:
    /// `partial_rotary_factor × head_dim`); the rest is concatenated back unrotated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rotary_dim: Option<u64>,
    /// A norm over each head's Q and K before rotary (Qwen3, Gemma 3: RMSNorm; Phi: LayerNorm).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qk_norm: Option<NormKind>,
    /// Sliding-window attention: each position sees at most this many previous ones (Mistral,
    /// Gemma 2/3, Starcoder2). In training it changes only the mask path: eager attention is
    /// unchanged; under SDPA a sequence at least this long needs an explicit mask, with which
    /// transformers repeats grouped K/V heads (`repeat_kv`) instead of SDPA's `enable_gqa`.
    /// Recorded for generation too (a capped KV cache).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sliding_window: Option<u64>,
    /// Gemma 2's `attn_logit_softcapping`: eager scores become `tanh(scores / cap) · cap`
    /// (SDPA ignores it, as transformers' `sdpa_attention_forward` does).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logit_softcap: Option<f64>,
    /// Bias of the K projection (default: `bias`; Whisper's `k_proj` has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_bias: Option<bool>,
    /// Adds the stack's relative position bias (a preceding `relative_position_bias` layer,
    /// T5) to the scores; under SDPA it is the explicit float mask.
    #[serde(default, skip_serializing_if = "is_false")]
    pub position_bias: bool,
    /// Q/K/V made contiguous per head (Whisper): a flash kernel's output keeps that layout, so its transpose back is a copy.
    #[serde(default, skip_serializing_if = "is_false")]
    pub contiguous_heads: bool,
    /// Attention sinks (GPT-OSS `GptOssAttention.sinks`, one learned logit per head): a
    /// parameter of `num_heads`; the scores get a sink column before the softmax, which is then
    /// dropped (`eager_attention_forward` of `modeling_gpt_oss.py`). transformers runs such a model
    /// eagerly (`_supports_sdpa = False`), so it is lowered eagerly whatever `attention` says.
    #[serde(default, skip_serializing_if = "is_false")]
    pub sinks: bool,
    /// An RMSNorm over the whole Q and K projections before the heads split (OLMoE:
    /// `q_norm(q_proj(x))` with `num_heads × head_dim` weights, `k_norm` with
    /// `num_kv_heads × head_dim`), instead of or besides `qk_norm`'s per-head one.
    #[serde(default, skip_serializing_if = "is_false")]
    pub qk_norm_full: bool,
    /// Chunked local attention (Llama 4's `chunked_attention` layers, `attention_chunk_size`):
    /// a position sees only its own chunk. transformers caches such a layer as a sliding window
    /// of the chunk's size (`cache_utils.py`: "sliding and chunked are the same [for the
    /// cache], only the mask differs"); in training it is an explicit SDPA mask, as a window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attention_chunk: Option<u64>,
    /// A sigmoid gate on the attention output (Qwen3-Next's `Qwen3NextAttention`): `q_proj`
    /// is twice as wide (queries and gate per head), `attn_output * sigmoid(gate)` before `o_proj`.
    #[serde(default, skip_serializing_if = "is_false")]
    pub output_gate: bool,
    /// The model computes its attention itself, eagerly, whatever `attention` says (BLOOM's
    /// `BloomAttention`, MPT's `MptAttention`: transformers refuses SDPA for both).
    #[serde(default, skip_serializing_if = "is_false")]
    pub eager_only: bool,
    /// With `rotary`: the layer reads the model's second cos/sin pair, the local one. Gemma 3
    /// (`modeling_gemma3.py`, `Gemma3TextModel.forward`) computes one pair per layer type
    /// (`for layer_type in set(config.layer_types)`) before its first layer, the sliding layers'
    /// from `rope_local_base_freq`, and keeps both to the end of the forward.
    #[serde(default, skip_serializing_if = "is_false")]
    pub rotary_local: bool,
    /// The attention runs separately over consecutive spans of these many tokens, which sum to
    /// the sequence: Qwen2.5-VL's vision blocks, windows of `window_size` pixels, or one span per
    /// image in its full-attention blocks (`cu_seqlens`). Non-causal encoders only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub windows: Option<Vec<u64>>,
}

impl MultiheadAttention {
    /// Its KV cache's geometry: `kv_heads` K/V heads of `head_dim` (`layer/kv_cache.rs`).
    fn geometry(&self, kv_heads: u64, head_dim: u64) -> super::kv_cache::Geometry {
        super::kv_cache::Geometry {
            heads: self.num_heads,
            kv_heads,
            head_dim,
            v_head_dim: head_dim,
            sliding_window: self.window(),
            fp32_softmax: self.rotary,
            softcap: self.logit_softcap.is_some(),
            sinks: self.sinks,
        }
    }

    /// The span a cached key stays visible: the sliding window, or the chunk.
    pub fn window(&self) -> Option<u64> {
        self.sliding_window.or(self.attention_chunk)
    }

    fn check(&self) -> LayerResult<(u64, u64)> {
        positive(self.embed_dim, "embed_dim")?;
        positive(self.num_heads, "num_heads")?;
        let hd = match self.head_dim {
            Some(hd) => {
                positive(hd, "head_dim")?;
                hd
            }
            None if !self.embed_dim.is_multiple_of(self.num_heads) => {
                return Err(format!("embed_dim ({}) must be divisible by num_heads ({})", self.embed_dim, self.num_heads));
            }
            None => self.embed_dim / self.num_heads,
        };
        if let Some(r) = self.rotary_dim {
            if r == 0 || r > hd || !r.is_multiple_of(2) {
                return Err(format!("rotary_dim ({r}) must be even, at least 2 and at most head_dim ({hd})"));
            }
        }
        if self.sliding_window == Some(0) || self.attention_chunk == Some(0) {
            return Err("`sliding_window` and `attention_chunk` must be at least 1".into());
        }
        if let Some(c) = self.logit_softcap {
            if !(c.is_finite() && c > 0.0) {
                return Err(format!("logit_softcap must be a positive number, got {c}"));
            }
        }
        let kv = self.num_kv_heads.unwrap_or(self.num_heads);
        positive(kv, "num_kv_heads")?;
        if !self.num_heads.is_multiple_of(kv) {
            return Err(format!("num_heads ({}) must be divisible by num_kv_heads ({kv})", self.num_heads));
        }
        if !(0.0..=1.0).contains(&self.dropout) {
            return Err(format!("dropout must be between 0 and 1, got {}", self.dropout));
        }
        Ok((hd, kv))
    }

    /// As a block of its own (a `residual` of a `repeat`): the probabilities go to the
    /// enclosing decoder layer's locals (`Builder::layer_locals`).
    pub fn lower(&self, b: &mut Builder, x: ValueId) -> LayerResult<ValueId> {
        let (out, weights) = self.lower_with_weights(b, x)?;
        b.layer_locals.extend(weights);
        Ok(out)
    }

    /// Also returns the attention probabilities (eager only), which Hugging Face layers return
    /// and keep in a local (`attn_output, _ = self.attn(...)`) until the layer returns.
    pub fn lower_with_weights(&self, b: &mut Builder, x: ValueId) -> LayerResult<(ValueId, Option<ValueId>)> {
        let (hd, kvh) = self.check()?;
        let s = b.shape(x).0.clone();
        if s.len() != 2 {
            return Err(format!("expected a [S, {}] input, got {}", self.embed_dim, b.shape(x)));
        }
        super::expect_last(b.shape(x), self.embed_dim, "features")?;
        // under sequence parallelism the input is this rank's `S/t` tokens; attention sees all `S`
        let (seq, d, h) = (s[0].saturating_mul(b.seq_shards), self.embed_dim, self.num_heads);
        let kv_dim = kvh.saturating_mul(hd);
        let q_dim = h.saturating_mul(hd);
        let proj = |i, o| Linear { in_features: i, out_features: o, bias: self.bias, tied_weight: false };
        let (q, k, v) = if self.fused_qkv {
            b.role = Some(LinearRole::Qkv);
            let qkv = proj(d, q_dim.saturating_add(kv_dim.saturating_mul(2))).lower(b, x)?;
            let q = b.view(qkv, Shape::new([seq, q_dim]));
            let k = b.view(qkv, Shape::new([seq, kv_dim]));
            let v = b.view(qkv, Shape::new([seq, kv_dim]));
            (q, k, v)
        } else {
            let named = |b: &mut Builder, role, l: Linear| { b.role = Some(role); l.lower(b, x) };
            let key = Linear { bias: self.key_bias.unwrap_or(self.bias), ..proj(d, kv_dim) };
            let q_width = if self.output_gate { q_dim.saturating_mul(2) } else { q_dim };
            (named(b, LinearRole::Q, proj(d, q_width))?, named(b, LinearRole::K, key)?, named(b, LinearRole::V, proj(d, kv_dim))?)
        };
        // `torch.chunk(q_proj(x).view(..., head_dim * 2), 2, dim=-1)`: the queries and the gate, views
        let gate = self.output_gate.then(|| b.view(q, Shape::new([seq, q_dim])));
        let q = if self.output_gate { b.view(q, Shape::new([seq, q_dim])) } else { q };
        let (q, k) = if self.qk_norm_full {
            let norm = |n| RmsNorm { normalized_shape: n, eps: 1e-5, t5: false };
            (norm(q_dim).lower(b, q)?, norm(kv_dim).lower(b, k)?)
        } else {
            (q, k)
        };
        // [S, H·hd] → [H, S, hd]: views.
        let mut q = b.view(q, Shape::new([h, seq, hd]));
        let mut k = b.view(k, Shape::new([kvh, seq, hd]));
        let v = b.view(v, Shape::new([kvh, seq, hd]));
        if let Some(kind) = self.qk_norm {
            // `q_norm(q.view(..., head_dim))`: per-head norms with `head_dim` weights
            q = qk_norm(b, kind, q, hd)?;
            k = qk_norm(b, kind, k, hd)?;
        }
        if self.rotary {
            let rd = self.rotary_dim.unwrap_or(hd);
            q = rotary(b, q, rd, self.rotary_local);
            k = rotary(b, k, rd, self.rotary_local);
        }
        // a parameter in generation too; there the sink column's [H, Q, L + 1] scores are not
        // modelled (`kv_cache::attend` attends as without sinks)
        let sinks = self.sinks.then(|| b.param(Shape::new([h])));
        if let Some(step) = b.opts.generation {
            let mut a = super::kv_cache::attend(b, step, self.geometry(kvh, hd), q, k, v);
            a.out = output_gate(b, a.out, gate);
            let out = Linear { in_features: q_dim, out_features: d, bias: self.out_bias.unwrap_or(self.bias), tied_weight: false }.lower(b, a.out)?;
            // and the caller's `hidden_states`, the attention's input
            a.locals.iter().chain([&x]).for_each(|&l| b.hold(l));
            return Ok((out, a.weights));
        }
        let (out, weights) = match &self.windows {
            None => {
                let out = self.attend(b, (q, k, v), seq, (h, kvh, hd), sinks)?;
                if !b.training() {
                    // outside autograd nothing saves them, but the attention module's locals
                    // (`query_states`, …) and its caller's `hidden_states` live until it returns
                    for l in [q, k, v, x] {
                        b.hold(l);
                    }
                }
                out
            }
            Some(spans) => {
                let out = self.attend_windows(b, (q, k, v), seq, (h, kvh, hd), sinks, spans)?;
                // `query_states`, `key_states`, `value_states` (the rotary outputs) and the
                // caller's `hidden_states` are Python locals until the spans are concatenated
                for l in [q, k, v, x] {
                    b.hold(l);
                }
                out
            }
        };
        let out = output_gate(b, out, gate);
        let o = Linear { in_features: q_dim, out_features: d, bias: self.out_bias.unwrap_or(self.bias), tied_weight: false };
        b.role = Some(LinearRole::O);
        Ok((o.lower(b, out)?, weights))
    }

    /// The attention of one span of `seq` tokens (the whole sequence, or one window): `q` is
    /// `[H, seq, hd]`, `k` and `v` `[kvH, seq, hd]`; the output `[seq, H·hd]` and, eager, the
    /// probabilities.
    pub(super) fn attend(&self, b: &mut Builder, (q, k, v): (ValueId, ValueId, ValueId), seq: u64, (h, kvh, hd): (u64, u64, u64), sinks: Option<ValueId>) -> LayerResult<(ValueId, Option<ValueId>)> {
        let (mut q, mut k, mut v) = (q, k, v);
        let q_dim = h.saturating_mul(hd);
        let mut weights = None;
        // no attention mask: BERT is given none, decoders pass `is_causal=True`
        let dropout_p = if b.training() { self.dropout } else { 0.0 };
        let eager = b.opts.attention == AttentionImpl::Eager || self.sinks || self.eager_only;
        // SDPA gets an explicit mask only for a sliding window shorter than the sequence.
        let explicit_mask = !eager && (self.position_bias || self.window().is_some_and(|w| seq >= w));
        let no_bias = "`position_bias` needs a `relative_position_bias` layer earlier in the model";
        let position_bias = if self.position_bias { Some(b.position_bias.ok_or(no_bias)?) } else { None };
        if !eager && self.causal && b.training() {
            // Hugging Face decoders train with `use_cache=True`: `DynamicCache.update` returns
            // `torch.cat` copies of K and V, which SDPA then saves; so a fused Q/K/V projection is
            // not kept alive by a saved view of V.
            let (ks, vs) = (b.shape(k).clone(), b.shape(v).clone());
            k = copy(b, k, ks);
            v = copy(b, v, vs);
        }
        let math = !eager && sdpa_backend(b.opts.device, b.dtype(q), hd, explicit_mask, dropout_p) == SdpaBackend::Math;
        // the math kernel on the CPU computes half inputs in fp32 (`_scaled_dot_product_attention_math`:
        // q, k, v `.to(kFloat)`, the result cast back)
        let math_dtype = (math && b.opts.device == Device::Cpu && matches!(b.dtype(q), DType::Bf16 | DType::F16)).then(|| b.dtype(q));
        if math_dtype.is_some() {
            (q, k, v) = (b.cast(q, DType::F32), b.cast(k, DType::F32), b.cast(v, DType::F32));
        }
        let out = match eager || math {
            true => {
                if kvh != h {
                    if eager && self.causal && b.training() && !b.opts.checkpointing {
                        // `use_cache=True` (no checkpointing: then transformers turns it off):
                        // `DynamicCache.update`'s `torch.cat` copies of K and V, which
                        // `repeat_kv` reads, live in the model's output (`past_key_values`) to
                        // the forward's end (traced: LLaVA's Llama decoder, its 4 cats alive at
                        // the loss). With as many K/V heads as query heads, the cats are what
                        // matmul reads and saves (a contiguous `[B, H, S, d]` folds as a view):
                        // `bmm`'s copies here.
                        let (ks, vs) = (b.shape(k).clone(), b.shape(v).clone());
                        k = copy(b, k, ks);
                        v = copy(b, v, vs);
                        b.forward_locals.extend([k, v]);
                    }
                    // `repeat_kv` (eager), `repeat_interleave` for `enable_gqa` (math)
                    k = copy(b, k, Shape::new([h, seq, hd]));
                    v = copy(b, v, Shape::new([h, seq, hd]));
                }
                // SDPA's math kernel scales a copy of the query first (`query_ * scaling_factor`,
                // `_scaled_dot_product_attention_math`), a C++ local alive until the kernel
                // returns; outside autograd nothing else keeps it (recorded, `bmm` saves it)
                let q_scaled = (math && !b.value(q).requires_grad).then(|| unary(b, "mul_scalar", q, Saves::Nothing));
                let scores = bmm(b, q_scaled.unwrap_or(q), k, Shape::new([h, seq, seq]), true);
                let mut scores = unary(b, "mul_scalar", scores, Saves::Nothing);
                if self.logit_softcap.is_some() {
                    // `attn_weights / softcap; tanh; * softcap`: tanh keeps its output
                    scores = unary(b, "div_scalar", scores, Saves::Nothing);
                    scores = unary(b, "tanh", scores, Saves::Output);
                    scores = unary(b, "mul_scalar", scores, Saves::Nothing);
                }
                if let Some(pb) = position_bias {
                    scores = add(b, scores, pb);
                }
                if self.causal {
                    let mask = causal_mask(b, seq, b.dtype(scores), eager);
                    scores = add(b, scores, mask);
                }
                // The rotary (LLaMA-family) eager attention of transformers 5.24,
                // `eager_attention_forward` in `models/llama/modeling_llama.py`:
                // `softmax(attn_weights, dim=-1, dtype=torch.float32).to(query.dtype)`. The fp32
                // probabilities are saved by softmax, their copy in the query's dtype by the
                // matmul; under fp32 weights both are one tensor. BERT and GPT-2 keep the
                // scores' dtype, and so does SDPA's math kernel (`at::softmax(attn, -1)`).
                // ATen's `softmax(input, dim, dtype)` (`aten/src/ATen/native/SoftMax.cpp`) first
                // converts the input (`input_.toType(dtype)`: a transient fp32 copy of the
                // scores, nothing saved) except for CUDA fp16, which `_softmax(…, half_to_float)`
                // reads directly; backward then casts the fp32 gradient back to the scores' dtype.
                let probs = if let Some(sk) = sinks {
                    // cat([scores, sinks.expand(…, 1)], -1) → [H, S, S+1]; `- max(-1).values`
                    // (max saves its int64 indices); softmax in that dtype saves its output;
                    // `[..., :-1]` is a view of it, and so is matmul's `[B·H, S, S]` reshape of
                    // that slice (its batch strides merge): bmm saves the view, no copy (traced)
                    let dt = b.dtype(scores);
                    let wide = Shape::new([h, seq, seq.saturating_add(1)]);
                    let combined = b.op("cat", &[scores, sk], &[(wide.clone(), dt)], &[], false, &[], GradRule::Alloc)[0];
                    let idx = (Shape::new([h, seq, 1]), true, DType::I64);
                    let mx = b.op("max", &[combined], &[(Shape::new([h, seq, 1]), dt)], &[], false, &[idx], GradRule::Alloc)[0];
                    let shifted = b.op("sub", &[combined, mx], &[(wide, dt)], &[], false, &[], GradRule::Alloc)[0];
                    let probs = softmax(b, shifted, None);
                    b.view(probs, Shape::new([h, seq, seq]))
                } else if self.rotary && eager {
                    let query_dtype = b.dtype(scores);
                    let fused = b.opts.device == Device::Cuda && query_dtype == DType::F16;
                    let input = if fused { scores } else { b.cast(scores, DType::F32) };
                    let probs = softmax(b, input, Some(DType::F32));
                    b.cast(probs, query_dtype)
                } else {
                    softmax(b, scores, None)
                };
                let probs = dropout(b, probs, self.dropout);
                // eager layers return the probabilities; SDPA returns its output only
                if eager {
                    weights = Some(probs);
                }
                let mut out = bmm(b, probs, v, Shape::new([h, seq, hd]), false);
                if let Some(dt) = math_dtype {
                    out = b.cast(out, dt);
                }
                if let Some(qs) = q_scaled {
                    // outside autograd, also the projections: `query_layer`, `key_layer` are
                    // Python locals of the attention module until it returns
                    for v in [qs, q, k] {
                        b.hold(v);
                    }
                }
                // transpose(1, 2).contiguous(): a copy back to [S, H, hd]
                let out = copy(b, out, Shape::new([seq, q_dim]));
                if eager && kvh != h {
                    // `eager_attention_forward`'s `key_states`, `value_states` (the `repeat_kv`
                    // copies) are locals until it returns
                    b.hold(k);
                    b.hold(v);
                }
                out
            }
            false => {
                // A window shorter than the sequence needs an explicit mask, and transformers'
                // `sdpa_attention_forward` then gives grouped K/V heads to SDPA as `repeat_kv`
                // copies (saved for backward) instead of `enable_gqa`.
                if kvh != h && explicit_mask {
                    k = copy(b, k, Shape::new([h, seq, hd]));
                    v = copy(b, v, Shape::new([h, seq, hd]));
                }
                let (mut ins, dt) = b.autocast(CastPolicy::Lower, &[q, k, v]);
                // transformers' `create_position_bias_mask`: a copy of the bias (causal: by
                // `torch.where`; else `.contiguous()` of its permuted view) is SDPA's float mask
                if let Some(pb) = position_bias {
                    ins.push(copy(b, pb, Shape::new([h, seq, seq])));
                }
                let fused = sdpa_backend(b.opts.device, dt, hd, explicit_mask, dropout_p);
                // Flash (CUDA, CPU) keeps a [H, S] fp32 log-sum-exp; CUDA's memory-efficient
                // kernel pads it to a multiple of 32 (`aten/src/ATen/native/transformers/cuda/
                // attention.cu`, `_efficient_attention_forward`: `ceil_div(max_seqlen_q, 32) * 32`).
                let lse_len = if fused == SdpaBackend::MemEfficient { seq.div_ceil(32).saturating_mul(32) } else { seq };
                let lse = (Shape::new([h, lse_len]), true, DType::F32);
                let out = b.op("sdpa", &ins, &[(Shape::new([h, seq, hd]), dt)], &ins, true, &[lse], GradRule::Alloc)[0];
                // the kernel writes [S, H, hd] memory, so transpose(1, 2).contiguous() is free
                if self.contiguous_heads && fused == SdpaBackend::Flash { copy(b, out, Shape::new([seq, q_dim])) } else { b.view(out, Shape::new([seq, q_dim])) }
            }
        };
        Ok((out, weights))
    }

}

/// `attn_output * torch.sigmoid(gate)` (sigmoid saves its output, the product both operands).
fn output_gate(b: &mut Builder, out: ValueId, gate: Option<ValueId>) -> ValueId {
    match gate {
        Some(g) => {
            let sig = unary(b, "sigmoid", g, Saves::Output);
            mul(b, out, sig)
        }
        None => out,
    }
}

/// A contiguous copy (what `reshape` of a transposed tensor or `.contiguous()` does).
pub(super) fn copy(b: &mut Builder, x: ValueId, shape: Shape) -> ValueId {
    let dt = b.dtype(x);
    b.op("clone", &[x], &[(shape, dt)], &[], false, &[], GradRule::Alias)[0]
}

/// [`bmm`] in a `generate()` forward over a cross-attention cache: its contiguous `[H, S_enc, d]`
/// keys and values (and one query token) fold the batch into views (`torch.matmul`), no copy.
pub(super) fn bmm_cached(b: &mut Builder, x: ValueId, y: ValueId, out: Shape, copy_left: bool) -> ValueId {
    if b.opts.generation.is_none() {
        return bmm(b, x, y, out, copy_left);
    }
    let (ins, dt) = b.autocast(CastPolicy::Lower, &[x, y]);
    b.op("bmm", &ins, &[(out, dt)], &[], false, &[], GradRule::Alloc)[0]
}

/// `torch.matmul` of `[H, S, hd]`-shaped operands: both come in transposed, so `matmul`'s reshape
/// copies them before the `bmm`, which saves the copies.
pub(super) fn bmm(b: &mut Builder, x: ValueId, y: ValueId, out: Shape, copy_left: bool) -> ValueId {
    matmul(b, x, y, out, (copy_left, true))
}

/// [`bmm`] with each operand's copy chosen: `(left, right)` are copied (not viewable as
/// `[B·H, …]`); a contiguous `[B, H, …]` operand reshapes to a view.
pub(super) fn matmul(b: &mut Builder, x: ValueId, y: ValueId, out: Shape, (copy_left, copy_right): (bool, bool)) -> ValueId {
    let (ins, dt) = b.autocast(CastPolicy::Lower, &[x, y]);
    let copied = |b: &mut Builder, v: ValueId, c: bool| if c { let s = b.shape(v).clone(); copy(b, v, s) } else { v };
    let left = copied(b, ins[0], copy_left);
    let right = copied(b, ins[1], copy_right);
    b.op("bmm", &[left, right], &[(out, dt)], &[left, right], false, &[], GradRule::Alloc)[0]
}

/// A head-wise norm of `[H, S, hd]` (its input is a view of the projection, its output new).
fn qk_norm(b: &mut Builder, kind: NormKind, x: ValueId, hd: u64) -> LayerResult<ValueId> {
    match kind {
        NormKind::RmsNorm => RmsNorm { normalized_shape: hd, eps: 1e-6, t5: false }.lower(b, x),
        NormKind::LayerNorm => LayerNorm { normalized_shape: hd, eps: 1e-5, elementwise_affine: true, bias: true }.lower(b, x),
        NormKind::CohereLayerNorm => super::norm::cohere_layer_norm(b, x, hd),
    }
}

/// `q * cos + rotate_half(q) * sin` (Hugging Face's `apply_rotary_pos_emb`) on the first
/// `dim` features of each head; with `dim < head_dim` (partial rotary) the rotated part is
/// concatenated with the rest, a new `[H, S, hd]` tensor.
fn rotary(b: &mut Builder, x: ValueId, dim: u64, local: bool) -> ValueId {
    let full = b.shape(x).0.clone();
    if dim < full[2] {
        let part = b.view(x, Shape::new([full[0], full[1], dim]));
        let r = rotary(b, part, dim, local);
        let dt = b.dtype(x);
        return b.op("cat", &[r, x], &[(Shape(full), dt)], &[], false, &[], GradRule::Alloc)[0];
    }
    let s = full;
    let (cos, sin) = rope_tables(b, Shape::new([s[1], s[2]]), local);
    let a = mul(b, x, cos);
    let half = Shape::new([s[0], s[1], s[2] / 2]);
    let dt = b.dtype(x);
    let neg = b.op("neg", &[x], &[(half, dt)], &[], false, &[], GradRule::Alloc)[0];
    let rot = b.op("cat", &[neg, x], &[(Shape(s), dt)], &[], false, &[], GradRule::Alloc)[0];
    let r = mul(b, rot, sin);
    add(b, a, r)
}

/// The `[S, head_dim]` cos and sin tables: `LlamaRotaryEmbedding.forward` runs once per model
/// forward under `no_grad` ("Force float32": autocast disabled, fp32 `freqs`, `emb`, `cos`,
/// `sin`) and returns `cos.to(dtype=x.dtype), sin.to(dtype=x.dtype)` with `x` the hidden states
/// entering the decoder, so the tables are in the model's dtype: bf16 after
/// `model.to(torch.bfloat16)`, fp32 under autocast (the embedding output is fp32 there).
/// Every layer reads the same pair (`position_embeddings`), and checkpointed layers get it as
/// an argument (transformers `models/llama/modeling_llama.py`, `LlamaModel.forward`). A model
/// with local layers ([`MultiheadAttention::rotary_local`]) has a second pair, made with the
/// first (Gemma 3 makes both before its first layer), whichever kind of layer comes first.
fn rope_tables(b: &mut Builder, table: Shape, local: bool) -> (ValueId, ValueId) {
    let dt = b.float_dtype();
    // `generate()` passes `position_ids` of shape `[b, S]`: one table per sample
    let per_sample = b.opts.generation.is_some();
    let table_op = |b: &mut Builder, name| {
        b.per_forward(name, &table, |b| {
            let t = b.op(name, &[], &[(table.clone(), dt)], &[], false, &[], GradRule::Alloc)[0];
            if per_sample {
                b.set_batched(t);
            }
            t
        })
    };
    let global = (table_op(b, "rope_cos"), table_op(b, "rope_sin"));
    if !local {
        return global;
    }
    (table_op(b, "rope_cos_local"), table_op(b, "rope_sin_local"))
}

/// The additive causal mask eager attention adds to its scores. transformers 5.24
/// (`masking_utils.create_causal_mask` → `eager_mask`) builds one `[B, 1, S, S]` mask in the
/// model's dtype per forward (0 below the diagonal, the dtype's minimum above) and passes it to
/// every layer, so a checkpointed layer holds it until its backward. SDPA's math kernel builds
/// its own `[S, S]` mask per call (`convert_boolean_attn_mask` in `attention.cpp`).
fn causal_mask(b: &mut Builder, seq: u64, dtype: DType, eager: bool) -> ValueId {
    let shape = Shape::new([seq, seq]);
    if !eager {
        return b.op("causal_mask", &[], &[(shape, dtype)], &[], false, &[], GradRule::Alloc)[0];
    }
    let dt = b.float_dtype();
    b.per_forward("causal_mask", &shape, |b| {
        let mask = b.op("causal_mask", &[], &[(shape.clone(), dt)], &[], false, &[], GradRule::Alloc)[0];
        b.set_batched(mask);
        mask
    })
}

#[cfg(test)]
mod tests {
    use crate::layer::test_util::{error, one};
    use serde_json::json;

    #[test]
    fn multihead_attention_params() {
        // nn.MultiheadAttention(768, 12): in_proj 3·768² + 3·768 = 1,771,776 and out_proj
        // 768² + 768 = 590,592: 2,362,368, fused or as separate q, k, v projections
        for fused in [false, true] {
            let a = one(json!({"kind": "multihead_attention", "embed_dim": 768, "num_heads": 12, "fused_qkv": fused}), &[128, 768]);
            assert_eq!((a.shape, a.params), (vec![128, 768], 2_362_368), "fused_qkv: {fused}");
        }
        // bias=False: 4·768² = 2,359,296
        let a = one(json!({"kind": "multihead_attention", "embed_dim": 768, "num_heads": 12, "bias": false}), &[128, 768]);
        assert_eq!(a.params, 2_359_296);
    }

    #[test]
    fn grouped_query_attention_params() {
        // LLaMA-2-70B attention: hidden 8192, 64 heads of 128, 8 key/value heads, no biases:
        // q_proj and o_proj 8192², k_proj and v_proj 8192·1024: 150,994,944
        let a = one(json!({"kind": "multihead_attention", "embed_dim": 8192, "num_heads": 64, "num_kv_heads": 8, "bias": false, "causal": true, "rotary": true}), &[16, 8192]);
        assert_eq!((a.shape, a.params), (vec![16, 8192], 150_994_944));
    }

    #[test]
    fn attention_refuses_what_pytorch_refuses() {
        // "embed_dim must be divisible by num_heads"
        let e = error(json!({"kind": "multihead_attention", "embed_dim": 768, "num_heads": 10}), &[4, 768]);
        assert!(e.contains("must be divisible by num_heads"), "{e}");
        let e = error(json!({"kind": "multihead_attention", "embed_dim": 768, "num_heads": 12, "num_kv_heads": 5}), &[4, 768]);
        assert!(e.contains("must be divisible by num_kv_heads"), "{e}");
        let e = error(json!({"kind": "multihead_attention", "embed_dim": 768, "num_heads": 12}), &[4, 512]);
        assert!(e.contains("expected 768 features, got 512"), "{e}");
    }

    #[test]
    fn sdpa_picks_the_kernel_pytorch_picks() {
        use super::{sdpa_backend, SdpaBackend::*};
        use crate::config::Device::{Cpu, Cuda};
        use crate::units::DType::{Bf16, F16, F32};
        // CPU: flash for every float dtype, the math kernel as soon as dropout_p > 0
        assert_eq!(sdpa_backend(Cpu, F32, 64, false, 0.0), Flash);
        assert_eq!(sdpa_backend(Cpu, Bf16, 64, true, 0.0), Flash);
        assert_eq!(sdpa_backend(Cpu, F32, 64, false, 0.1), Math);
        assert_eq!(sdpa_backend(Cpu, Bf16, 512, false, 0.1), Math);
        // CUDA: flash for half without a mask (dropout or not) and heads up to 256,
        // memory-efficient otherwise
        assert_eq!(sdpa_backend(Cuda, F16, 64, false, 0.1), Flash);
        assert_eq!(sdpa_backend(Cuda, Bf16, 256, false, 0.0), Flash);
        assert_eq!(sdpa_backend(Cuda, Bf16, 512, false, 0.0), MemEfficient);
        assert_eq!(sdpa_backend(Cuda, Bf16, 64, true, 0.0), MemEfficient);
        assert_eq!(sdpa_backend(Cuda, F32, 64, false, 0.1), MemEfficient);
    }

    /// What one BERT-base attention layer allocates per sample under `--attention sdpa`, on a device.
    fn sdpa_layer_bytes(device: crate::config::Device, training: bool) -> u64 {
        use crate::config::AttentionImpl;
        let spec = crate::spec::ModelSpec::from_json(
            &json!({"input": {"shape": [128, 768]}, "layers": [
                {"kind": "multihead_attention", "embed_dim": 768, "num_heads": 12, "dropout": 0.1}]})
            .to_string(),
        )
        .unwrap();
        let opts = crate::lower::LowerOptions { device, training, attention: AttentionImpl::Sdpa, ..Default::default() };
        let r = crate::resolve::resolve(&spec, None, opts).unwrap();
        let g = &r.graph;
        g.ops.iter().filter(|o| o.layer == 0).flat_map(|o| o.allocs.iter().map(|&s| g.storages[s as usize].bytes.per_sample)).sum()
    }

    #[test]
    fn cpu_sdpa_with_dropout_materialises_the_attention_weights() {
        use crate::config::Device::{Cpu, Cuda};
        // 12 heads × 128 × 128 fp32 scores, probabilities, dropout noise and dropped copy: ≥ 3 MiB
        let weights = 12 * 128 * 128 * 4;
        assert!(sdpa_layer_bytes(Cpu, true) >= sdpa_layer_bytes(Cuda, true) + 3 * weights);
        // in eval Hugging Face passes dropout_p = 0: the CPU flash kernel, as on CUDA
        assert_eq!(sdpa_layer_bytes(Cpu, false), sdpa_layer_bytes(Cuda, false));
    }

    #[test]
    fn transformer_encoder_layer_params() {
        // nn.TransformerEncoderLayer(512, 8) (dim_feedforward 2048): self_attn 4·512² + 4·512 =
        // 1,050,624, linear1 512·2048 + 2048 = 1,050,624, linear2 2048·512 + 512 = 1,049,088,
        // norm1 and norm2 2·1,024: 3,152,384
        let t = one(json!({"kind": "transformer_encoder_layer", "d_model": 512, "nhead": 8}), &[10, 512]);
        assert_eq!((t.shape, t.params), (vec![10, 512], 3_152_384));
    }

    #[test]
    fn gpt2_and_llama_blocks() {
        // GPT-2 small block: c_attn 768·2304 + 2304, c_proj 768² + 768, c_fc 768·3072 + 3072,
        // mlp.c_proj 3072·768 + 768, ln_1 and ln_2 2·1,536: 7,087,872 (12 of them: 85,054,464)
        let g = one(json!({"kind": "transformer_decoder_layer", "d_model": 768, "nhead": 12, "dim_feedforward": 3072,
            "norm_first": true, "activation": "gelu_new", "fused_qkv": true}), &[64, 768]);
        assert_eq!((g.shape, g.params), (vec![64, 768], 7_087_872));
        // LLaMA-7B decoder layer: attention 4·4096² = 67,108,864, SwiGLU MLP 3·4096·11008 =
        // 135,266,304, two RMSNorm weights 8,192: 202,383,360 (32 of them + 2·32000·4096
        // embeddings + the final norm = 6,738,415,616)
        let l = one(json!({"kind": "transformer_decoder_layer", "d_model": 4096, "nhead": 32, "dim_feedforward": 11008,
            "norm_first": true, "bias": false, "norm": "rms_norm", "gated_mlp": true, "rotary": true}), &[16, 4096]);
        assert_eq!((l.shape, l.params), (vec![16, 4096], 202_383_360));
    }

    #[test]
    fn hugging_face_switches_params() {
        let layer = |extra: serde_json::Value| {
            let mut l = json!({"kind": "transformer_decoder_layer", "d_model": 64, "nhead": 4, "dim_feedforward": 128,
                "norm_first": true, "bias": false, "norm": "rms_norm", "gated_mlp": true, "rotary": true, "num_kv_heads": 2});
            for (k, v) in extra.as_object().unwrap() {
                l[k] = v.clone();
            }
            one(l, &[8, 64]).params
        };
        // LLaMA-style: q, o 64² each, k, v 64·32 each, MLP 3·64·128, two norms 2·64: 36,992
        let base = layer(json!({}));
        assert_eq!(base, 2 * 64 * 64 + 2 * 64 * 32 + 3 * 64 * 128 + 2 * 64);
        // head_dim 32 (Gemma-style): Q/K/V/O are 4·32 = 128 wide for q, 2·32 = 64 for k and v
        assert_eq!(layer(json!({"head_dim": 32})), 2 * 64 * 128 + 2 * 64 * 64 + 3 * 64 * 128 + 2 * 64);
        // Qwen2: Q/K/V biases (64 + 2·32), none on o_proj or the MLP
        assert_eq!(layer(json!({"bias": true, "out_bias": false, "mlp_bias": false})), base + 64 + 2 * 32);
        // Qwen3: per-head RMSNorm on Q and K, 16 weights each
        assert_eq!(layer(json!({"qk_norm": true})), base + 2 * 16);
        // Gemma 2: two more norms; windows and soft-capping add no parameters
        assert_eq!(layer(json!({"post_norms": true, "sliding_window": 4, "logit_softcap": 50.0})), base + 2 * 64);
        // parallel with one shared norm (Phi): one norm fewer; with two (GPT-NeoX): as many
        assert_eq!(layer(json!({"parallel": "shared"})), base - 64);
        assert_eq!(layer(json!({"parallel": "separate", "rotary_dim": 8})), base);
    }

    #[test]
    fn hugging_face_switches_refuse_what_transformers_cannot_build() {
        let e = error(json!({"kind": "multihead_attention", "embed_dim": 64, "num_heads": 4, "rotary": true, "rotary_dim": 3}), &[8, 64]);
        assert!(e.contains("rotary_dim"), "{e}");
        let e = error(json!({"kind": "transformer_decoder_layer", "d_model": 64, "nhead": 4, "parallel": "shared"}), &[8, 64]);
        assert!(e.contains("norm_first"), "{e}");
        let e = error(json!({"kind": "multihead_attention", "embed_dim": 64, "num_heads": 4, "sliding_window": 0}), &[8, 64]);
        assert!(e.contains("sliding_window"), "{e}");
    }
}
