//! One attention layer's KV cache update and its attention in a forward of `model.generate()`
//! (transformers 5.24), per sample:
//!
//! * `q`: `[H, Q, d]` (Q = the prompt in the prefill, 1 in a decode step), `k`, `v`: `[Hkv, Q, d]`.
//! * **dynamic** (`cache_utils.py`, `DynamicLayer.update`): `self.keys = torch.cat([self.keys,
//!   key_states], dim=-2)`, then the same for values: a new `[Hkv, L, d]` tensor while the old
//!   `[Hkv, L−1, d]` one still exists; the old one dies with the assignment. A sliding-window
//!   layer (`DynamicSlidingWindowLayer.update`) keeps a view of the last `W − 1` tokens of the
//!   `cat`, so it holds at most `W` tokens after the first decode step; until then the view
//!   keeps the prefill's whole-prompt `cat`. It makes both `cat`s before it reassigns either:
//!   the old keys live through the values' `cat`.
//! * **static** (`StaticLayer.lazy_initialization` + `update`): `torch.zeros(b, Hkv,
//!   max_cache_len, d)` for K and V at the layer's first update, `index_copy_` in place after;
//!   attention reads all `max_cache_len` slots (SDPA's prefill slices them to Q, `sdpa_attention_forward`).
//!   A sliding-window layer (`StaticSlidingWindowLayer`) holds `min(W, max_cache_len)` slots and
//!   returns a `cat` of its slots and the new token once full.
//! * **paged** (vLLM): whole blocks of [`PAGE_TOKENS`] tokens per sequence, the new token's K/V
//!   written into its slot, attention reading the blocks in place: no transient copy.
//! * An 8-bit cache (`Fp8QuantizedLayer.update`): the new states are quantized through an fp32
//!   copy, and the layer returns `_dequantize(...)` of everything it holds: `[Hkv, L, d]` K and V
//!   in the compute dtype, made through fp32 (`quant.float() * scale`). A paged cache's kernels
//!   read fp8 directly.
//!
//! Attention then follows `sdpa_attention_forward` (`integrations/sdpa_attention.py`: grouped
//! heads by `enable_gqa` without a mask, `pack_gqa` views for one query with a mask, `repeat_kv`
//! copies otherwise) or `eager_attention_forward` (`repeat_kv` copies, `[H, Q, L]` scores,
//! the mask, softmax — fp32 in the LLaMA family — and `attn_weights @ V`). Under `no_grad`
//! nothing is saved.

use super::activation::{add, softmax, unary, Saves};
use super::sdpa::{sdpa_backend, SdpaBackend};
use crate::config::{AttentionImpl, Device};
use crate::generation::{GenStep, KvCacheKind, PAGE_TOKENS};
use crate::graph::{GradRule, StorageClass, ValueId};
use crate::lower::Builder;
use crate::units::{DType, Shape};

/// What the layer's attention looks like.
#[derive(Debug, Clone, Copy)]
pub struct Geometry {
    pub heads: u64,
    pub kv_heads: u64,
    /// Q/K head size.
    pub head_dim: u64,
    /// V head size.
    pub v_head_dim: u64,
    pub sliding_window: Option<u64>,
    /// Eager softmax in fp32, cast back (transformers' LLaMA family; GPT-2 keeps the dtype).
    pub fp32_softmax: bool,
    pub softcap: bool,
    /// GPT-OSS's attention sinks: eager always, a sink column on the scores.
    pub sinks: bool,
}

/// Cache slots one layer (sliding `window` or none) holds for a sequence of `tokens` tokens.
pub fn slots(step: &GenStep, window: Option<u64>, tokens: u64) -> u64 {
    let w = window.unwrap_or(u64::MAX);
    match step.cache {
        KvCacheKind::Dynamic => tokens.min(w),
        KvCacheKind::Static => step.max_cache_len.min(w),
        KvCacheKind::Paged => tokens.min(w).div_ceil(PAGE_TOKENS).saturating_mul(PAGE_TOKENS),
    }
}

/// A cache tensor `[Hkv, n, d]` of class `class`, allocated by an op named `name` (or existing
/// before the forward when `class` is not `KvNew`).
pub(crate) fn cache_tensor(b: &mut Builder, name: &'static str, inputs: &[ValueId], shape: Shape, dt: DType, class: StorageClass) -> ValueId {
    let out = b.op(name, inputs, &[(shape, dt)], &[], false, &[], GradRule::Alloc)[0];
    b.set_batched(out);
    let s = b.g.storage_of(out) as usize;
    b.g.storages[s].class = class;
    if class != StorageClass::KvNew {
        // it exists before this forward: no op allocates it
        if let Some(op) = b.g.ops.last_mut() {
            op.allocs.clear();
        }
    }
    out
}

/// The keys and values of a cross-attention layer over `mem`, a memory that does not change
/// during `generate()` (Llama 3.2 Vision's image tokens, an encoder's output): `project`ed
/// (outside generation as they are); in the prefill `cache.update` stores them once
/// (`DynamicLayer.update`'s `torch.cat([empty, states])`: a copy, `shape` each, returned and
/// attended over); a decode step projects nothing and reads the cached `shape`, which never
/// grows, while the projections' weights stay resident (lowered aside for their count).
pub(crate) fn cross_cache(
    b: &mut Builder,
    mem: ValueId,
    shape: Shape,
    project: impl FnOnce(&mut Builder, ValueId) -> super::LayerResult<(ValueId, ValueId)>,
) -> super::LayerResult<(ValueId, ValueId)> {
    let step = b.opts.generation;
    if let Some(step) = step.filter(|s| !s.is_prefill()) {
        let mut aside = Builder::new(crate::lower::LowerOptions { generation: None, ..b.opts });
        let input = aside.input(b.shape(mem).clone(), b.dtype(mem));
        project(&mut aside, input)?;
        b.param(Shape::new([aside.param_numel]));
        let dt = step.kv_dtype.unwrap_or(b.compute_dtype());
        let cached = |b: &mut Builder| cache_tensor(b, "cache", &[], shape.clone(), dt, StorageClass::KvResident);
        return Ok((cached(b), cached(b)));
    }
    let (k, v) = project(b, mem)?;
    let Some(step) = step else { return Ok((k, v)) };
    let store = step.kv_dtype.unwrap_or(b.dtype(k));
    let k = cache_tensor(b, "cat", &[k], shape.clone(), store, StorageClass::KvNew);
    let v = cache_tensor(b, "cat", &[v], shape, store, StorageClass::KvNew);
    Ok((k, v))
}

/// What attention returns: the `[Q, H·dv]` output, the eager probabilities the decoder layer keeps
/// until it returns, and the attention module's locals (`query_states`, the keys and values it
/// attended over) that live until its output projection is done.
pub struct Attended {
    pub out: ValueId,
    pub weights: Option<ValueId>,
    pub locals: Vec<ValueId>,
}

/// Updates the layer's cache with `k`, `v` and runs attention.
pub fn attend(b: &mut Builder, step: GenStep, geo: Geometry, q: ValueId, k: ValueId, v: ValueId) -> Attended {
    let (kv, attended) = update(b, step, geo.sliding_window, &[k, v]);
    let (keys, values) = (kv[0], kv[1]);
    match b.opts.attention {
        AttentionImpl::Sdpa if !geo.sinks => sdpa(b, step, geo, q, keys, values, attended),
        _ => eager(b, geo, q, keys, values, attended),
    }
}

/// Writes `states` (each `[heads, Q, d]`: K and V, or MLA's latent) into the layer's cache and
/// returns what attention reads (each `[heads, L, d]` in the compute dtype) and `L`.
pub fn update(b: &mut Builder, step: GenStep, window: Option<u64>, states: &[ValueId]) -> (Vec<ValueId>, u64) {
    let ql = b.shape(states[0]).0[1];
    let total = step.past.saturating_add(ql);
    let compute = b.dtype(states[0]);
    let store = step.kv_dtype.unwrap_or(compute);
    let shape = |b: &Builder, x: ValueId, n: u64| {
        let s = &b.shape(x).0;
        Shape::new([s[0], n, s[2]])
    };
    let n = slots(&step, window, total);
    let mut dequantize = step.kv_quantized && step.cache != KvCacheKind::Paged;
    let mut read = Vec::with_capacity(states.len());
    let attended = match step.cache {
        KvCacheKind::Dynamic if step.is_prefill() => {
            for &x in states {
                // `cat([empty, x])`: a copy (quantized: through fp32, the original returned)
                let c = cache_tensor(b, "cat", &[x], shape(b, x, ql), store, StorageClass::KvNew);
                if step.kv_quantized {
                    quantize_scratch(b, c);
                    b.hold(x);
                }
                read.push(if step.kv_quantized { x } else { c });
            }
            dequantize = false;
            ql
        }
        KvCacheKind::Dynamic => {
            // a window keeps a view of `W − 1` tokens of the previous `cat`'s `W`, or of the
            // prefill's `cat` of the prompt (`self.keys = full_key_states[:, :, -W + 1:, :]`)
            let kept = if step.past == step.prompt { step.past } else { slots(&step, window, step.past) };
            let mut olds = Vec::with_capacity(states.len());
            for &x in states {
                let old = cache_tensor(b, "cache", &[], shape(b, x, kept), store, StorageClass::KvPast);
                let c = cache_tensor(b, "cat", &[old, x], shape(b, x, n), store, StorageClass::KvNew);
                if step.kv_quantized {
                    quantize_scratch(b, c);
                }
                read.push(c);
                olds.push(old);
            }
            // `full_key_states = torch.cat(...)`, `full_value_states = torch.cat(...)`, then the
            // assignments (`cache_utils.py`, `DynamicSlidingWindowLayer.update`); `DynamicLayer`
            // assigns each `cat` at once
            if window.is_some() {
                olds.into_iter().for_each(|o| b.hold(o));
            }
            n
        }
        KvCacheKind::Static => {
            let class = if step.is_prefill() { StorageClass::KvNew } else { StorageClass::KvResident };
            // `index_copy_` in place; a full sliding window returns `cat(slots, new)` instead
            let window_full = window.is_some_and(|w| total > w.min(step.max_cache_len));
            let full = n.max(ql);
            for &x in states {
                let c = cache_tensor(b, "zeros", &[], shape(b, x, n), store, class);
                let r = if window_full {
                    b.op("cat", &[c, x], &[(shape(b, x, full), compute)], &[], false, &[], GradRule::Alloc)[0]
                } else {
                    b.op("index_copy_", &[c, x], &[], &[], false, &[], GradRule::Alloc);
                    c
                };
                read.push(r);
            }
            let sliced = step.is_prefill() && b.opts.attention == AttentionImpl::Sdpa;
            if window_full {
                dequantize = false;
                full
            } else if sliced {
                ql
            } else {
                n
            }
        }
        KvCacheKind::Paged => {
            let class = if step.is_prefill() { StorageClass::KvNew } else { StorageClass::KvResident };
            for &x in states {
                let c = cache_tensor(b, "kv_blocks", &[], shape(b, x, n), store, class);
                b.op("reshape_and_cache", &[c, x], &[], &[], false, &[], GradRule::Alloc);
                // the prefill attends over its own states, a decode step over the blocks
                read.push(if step.is_prefill() { x } else { c });
            }
            if step.is_prefill() { ql } else { total.min(window.unwrap_or(u64::MAX)) }
        }
    };
    let mut out = Vec::with_capacity(read.len());
    for x in read {
        let s = shape(b, x, attended);
        out.push(if dequantize {
            let elems = s.numel();
            let d = b.op("dequantize", &[x], &[(s, compute)], &[], false, &[], GradRule::Alloc)[0];
            // `quant.float() * scale`: two fp32 copies on the way
            b.last_fwd_scratch(elems.saturating_mul(8).into_lin());
            d
        } else {
            b.view(x, s)
        });
    }
    (out, attended)
}

trait IntoLin {
    fn into_lin(self) -> crate::graph::Lin;
}

impl IntoLin for u64 {
    /// Per-sample bytes.
    fn into_lin(self) -> crate::graph::Lin {
        crate::graph::Lin { fixed: 0, per_sample: self }
    }
}

/// `Fp8QuantizedLayer._quantize`: `tensor.float() / scale` before the cast to 8 bits, an fp32
/// transient of the new states.
fn quantize_scratch(b: &mut Builder, cached: ValueId) {
    let elems = b.shape(cached).numel();
    b.last_fwd_scratch(elems.saturating_mul(8).into_lin());
}

/// Does attention get an explicit mask? Prefill: only a sliding window the sequence reaches
/// (`_ignore_causal_mask_sdpa`); decode: a static (compileable) cache always gets one
/// (`create_causal_mask`: no skip "if we are compiling and decoding"), a window once reached.
fn explicit_mask(step: &GenStep, geo: &Geometry, attended: u64) -> bool {
    let window = geo.sliding_window.is_some_and(|w| attended >= w);
    match step.cache {
        KvCacheKind::Paged => false,
        KvCacheKind::Static if !step.is_prefill() => true,
        _ => window,
    }
}

/// Copies grouped K/V heads to every query head (`repeat_kv`).
fn repeat(b: &mut Builder, geo: &Geometry, x: ValueId) -> ValueId {
    if geo.kv_heads == geo.heads {
        return x;
    }
    let s = b.shape(x).0.clone();
    let dt = b.dtype(x);
    b.op("repeat_kv", &[x], &[(Shape::new([geo.heads, s[1], s[2]]), dt)], &[], false, &[], GradRule::Alloc)[0]
}

fn sdpa(b: &mut Builder, step: GenStep, geo: Geometry, q: ValueId, k: ValueId, v: ValueId, attended: u64) -> Attended {
    let ql = b.shape(q).0[1];
    let dt = b.dtype(q);
    // Gemma 3's image blocks in the prefill: `create_masks_for_vision_model` builds both masks,
    // `[b, 1, Q, L]` bool each (`layer/vision.rs`)
    let blocks = b.image_blocks && step.is_prefill();
    let masked = blocks || explicit_mask(&step, &geo, attended);
    if blocks {
        let name = if geo.sliding_window.is_some() { "block_mask_sliding" } else { "block_mask" };
        let m = mask(b, name, ql, attended, DType::Bool);
        b.set_batched(m);
    } else if masked {
        mask(b, "sdpa_mask", ql, attended, DType::Bool);
    }
    let backend = sdpa_backend(b.opts.device, dt, geo.head_dim, masked, 0.0);
    let grouped = geo.kv_heads != geo.heads;
    // `enable_gqa` without a mask, `pack_gqa` views for one query, `repeat_kv` copies otherwise;
    // the math kernel repeats the heads itself (`repeat_interleave`)
    let copy_heads = grouped && ((masked && ql > 1) || backend == SdpaBackend::Math);
    let (k, v) = if copy_heads { (repeat(b, &geo, k), repeat(b, &geo, v)) } else { (k, v) };
    let out_shape = Shape::new([geo.heads, ql, geo.v_head_dim]);
    let out = if backend == SdpaBackend::Math {
        let scores = b.op("bmm", &[q, k], &[(Shape::new([geo.heads, ql, attended]), dt)], &[], false, &[], GradRule::Alloc)[0];
        let probs = softmax(b, scores, None);
        b.op("bmm", &[probs, v], &[(out_shape, dt)], &[], false, &[], GradRule::Alloc)[0]
    } else {
        b.op("sdpa", &[q, k, v], &[(out_shape, dt)], &[], false, &[], GradRule::Alloc)[0]
    };
    // the fused kernels write `[Q, H, dv]` memory: `transpose(1, 2).contiguous()` is free
    let out = b.view(out, Shape::new([ql, geo.heads.saturating_mul(geo.v_head_dim)]));
    Attended { out, weights: None, locals: vec![q, k, v] }
}

fn eager(b: &mut Builder, geo: Geometry, q: ValueId, k: ValueId, v: ValueId, attended: u64) -> Attended {
    let ql = b.shape(q).0[1];
    let dt = b.dtype(q);
    let k = repeat(b, &geo, k);
    let v = repeat(b, &geo, v);
    let locals = vec![q, k, v];
    // a transposed multi-token query is copied by matmul's reshape; one token is a view
    let q = if ql > 1 { b.op("clone", &[q], &[(b.shape(q).clone(), dt)], &[], false, &[], GradRule::Alias)[0] } else { q };
    let scores = b.op("bmm", &[q, k], &[(Shape::new([geo.heads, ql, attended]), dt)], &[], false, &[], GradRule::Alloc)[0];
    let mut scores = unary(b, "mul_scalar", scores, Saves::Nothing);
    if geo.softcap {
        scores = unary(b, "div_scalar", scores, Saves::Nothing);
        scores = unary(b, "tanh", scores, Saves::Nothing);
        scores = unary(b, "mul_scalar", scores, Saves::Nothing);
    }
    // `eager_mask`: `torch.where(mask, 0, min)` in the model's dtype, `[b, 1, Q, L]`
    // a model with sliding and full layers builds both masks (`create_causal_mask` and
    // `create_sliding_window_causal_mask` in its `causal_mask_mapping`), even of one shape
    let name = if geo.sliding_window.is_some() { "eager_mask_sliding" } else { "eager_mask" };
    let m = mask(b, name, ql, attended, b.float_dtype());
    let scores = add(b, scores, m);
    let mut locals_extra = None;
    let probs = if geo.sinks {
        // `cat([attn_weights, sinks], -1)`, `- max(-1)`, softmax over `L + 1`, `[..., :-1]` (a
        // view); `attn_weights` (the scores) stays a Python local until the dropout reassigns it
        let wide = Shape::new([geo.heads, ql, attended.saturating_add(1)]);
        let combined = b.op("cat", &[scores], &[(wide.clone(), dt)], &[], false, &[], GradRule::Alloc)[0];
        let mx = b.op("max", &[combined], &[(Shape::new([geo.heads, ql, 1]), dt)], &[], false, &[], GradRule::Alloc)[0];
        let shifted = b.op("sub", &[combined, mx], &[(wide, dt)], &[], false, &[], GradRule::Alloc)[0];
        let p = softmax(b, shifted, None);
        b.hold(scores);
        // `combined_logits` (now the shifted logits) is a local until the function returns
        locals_extra = Some(shifted);
        b.view(p, Shape::new([geo.heads, ql, attended]))
    } else if geo.fp32_softmax {
        // `softmax(attn_weights, dtype=float32)`: ATen converts its input inside the call (a
        // transient fp32 copy while `attn_weights` still holds the scores) except CUDA fp16
        let fused = b.opts.device == Device::Cuda && dt == DType::F16;
        let elems = b.shape(scores).numel();
        let p = softmax(b, scores, Some(DType::F32));
        if !fused && dt != DType::F32 {
            b.last_fwd_scratch(elems.saturating_mul(4).into_lin());
        }
        b.cast(p, dt)
    } else {
        softmax(b, scores, None)
    };
    let out = b.op("bmm", &[probs, v], &[(Shape::new([geo.heads, ql, geo.v_head_dim]), dt)], &[], false, &[], GradRule::Alloc)[0];
    let out = b.op("clone", &[out], &[(Shape::new([ql, geo.heads.saturating_mul(geo.v_head_dim)]), dt)], &[], false, &[], GradRule::Alias)[0];
    let mut locals = locals;
    locals.extend(locals_extra);
    Attended { out, weights: Some(probs), locals }
}

/// The attention mask of this forward, built once and passed to every layer: eager's float
/// mask is one per sample (`[b, 1, Q, L]`), SDPA's boolean one is expanded over the batch (a view).
fn mask(b: &mut Builder, name: &'static str, ql: u64, kv: u64, dt: DType) -> ValueId {
    let shape = Shape::new([ql, kv]);
    b.per_forward(name, &shape, |b| {
        let m = b.op(name, &[], &[(shape.clone(), dt)], &[], false, &[], GradRule::Alloc)[0];
        if dt != DType::Bool {
            b.set_batched(m);
        }
        m
    })
}

/// Multi-head latent attention's cache (DeepSeek-V2/V3 as DeepSeek's inference code and vLLM
/// run it, see `layer/mla.rs`): per token and layer one `[kv_lora_rank + rope]` vector, the
/// normalised `c_KV` and the rotated shared `k_pe`, made from `kv_a_proj_with_mqa`'s output
/// `ckv`. Returns what a decode step reads (`[1, L, kv_lora_rank + rope]`) and `L`.
pub fn latent(b: &mut Builder, step: GenStep, ckv: ValueId, kv_lora_rank: u64, rope: u64) -> (ValueId, u64) {
    let ql = b.shape(ckv).0[0];
    let dt = b.dtype(ckv);
    let width = kv_lora_rank.saturating_add(rope);
    let l = b.op("latent", &[ckv], &[(Shape::new([1, ql, width]), dt)], &[], false, &[], GradRule::Alloc)[0];
    let (read, attended) = update(b, step, None, &[l]);
    (read[0], attended)
}

/// A decode step of latent attention with the projections absorbed: the query is taken into
/// the latent space (`q_nope · W_UK`, `[H, Q, kv_lora_rank + rope]`), attends over the cached
/// latents (`[H, Q, L]` scores under eager attention; a fused kernel otherwise), and the
/// `[H, Q, kv_lora_rank]` result goes through `W_UV` to `[Q, H·v]`.
pub fn latent_decode(b: &mut Builder, heads: u64, kv_lora_rank: u64, v: u64, q: ValueId, latent: ValueId, attended: u64) -> ValueId {
    let ql = b.shape(q).0[0];
    let dt = b.dtype(q);
    let width = b.shape(latent).0[2];
    let q_abs = b.op("absorb_q", &[q], &[(Shape::new([heads, ql, width]), dt)], &[], false, &[], GradRule::Alloc)[0];
    let out_latent = Shape::new([heads, ql, kv_lora_rank]);
    let o = match b.opts.attention {
        AttentionImpl::Sdpa => b.op("mla_attention", &[q_abs, latent], &[(out_latent, dt)], &[], false, &[], GradRule::Alloc)[0],
        AttentionImpl::Eager => {
            let scores = b.op("bmm", &[q_abs, latent], &[(Shape::new([heads, ql, attended]), dt)], &[], false, &[], GradRule::Alloc)[0];
            let scores = unary(b, "mul_scalar", scores, Saves::Nothing);
            let p = softmax(b, scores, Some(DType::F32));
            let p = b.cast(p, dt);
            b.op("bmm", &[p, latent], &[(out_latent, dt)], &[], false, &[], GradRule::Alloc)[0]
        }
    };
    b.hold(q_abs);
    b.op("absorb_v", &[o], &[(Shape::new([ql, heads.saturating_mul(v)]), dt)], &[], false, &[], GradRule::Alloc)[0]
}
