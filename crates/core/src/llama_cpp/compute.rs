//! The compute buffers and the output buffer.
//!
//! Output buffer (read from source, measured exact): `llama_context::output_reserve(n_seq_max)`
//! at creation: logits for `max(n_outputs, n_seq_max)` = `n_seq_max` rows of `n_vocab` f32, in the
//! output device's host buffer type (pinned `CUDA_Host` when the output layer is on a GPU, else CPU).
//!
//! Compute buffer: for the architectures `models.rs` builds (llama, qwen2, qwen3, qwen3moe,
//! gemma2, gemma3, phi3, gpt-oss, deepseek2 with MLA) it is computed, not estimated: the graph llama.cpp reserves is
//! built tensor by tensor and allocated as `ggml_gallocr` does (`gallocr.rs`), exact to the byte
//! on every measured CPU run (`tests/llama_cpp_gallocr.rs`). For other architectures
//! [`compute_bytes`] below stands in: the largest of the live sets at four points of the graph,
//! fitted to the CPU backend's measured buffers before the graphs were modelled (`T` = n_ubatch,
//! sizes in bytes):
//!
//! - attention without flash attention: the f32 scores `n_kv × T × n_head` (`kq`, softmaxed in
//!   place), the f32 masks of each cache (`n_kv × T`), and per token the layer's activations
//!   (`4·(3·n_embd + 2·q_dim) + 8·kv_dim + 20`);
//! - attention with flash attention: the f16 masks and per token `4·(3·n_embd + q_dim + kv_dim) + 20`;
//! - the feed-forward: the masks and per token `4·(3·n_ff + 4·n_embd) + 28`; for MoE layers `n_ff`
//!   is `n_expert_used × expert_feed_forward_length`;
//! - the head: the `n_vocab × T` f32 logits and per token `12·n_embd + 4` (`8·n_embd + 4` with
//!   flash attention).
//!
//! Its error on the measured runs was −13 % to +6.5 % (see `docs/llama-cpp.md`). The CUDA
//! backend's buffers are taken to be the same graph's (its flash-attention kernels' f16 K/V
//! conversion buffers, `ggml_cuda_flash_attn_ext_get_alloc_size`, come from its memory pool, not
//! the compute buffer).

use super::hparams::Hparams;
use super::kv::Context;

/// Bytes of the output buffer.
pub fn output_bytes(hp: &Hparams, ctx: &Context) -> u64 {
    hp.n_vocab * ctx.n_seq * 4
}

/// The fitted compute buffer of a backend that runs some layers (`layers`) and/or the output layer
/// (`head`), for architectures without a modelled graph.
pub fn compute_bytes(hp: &Hparams, ctx: &Context, flash_attn: bool, layers: bool, head: bool) -> u64 {
    // In f64: exact for every real model (all terms below 2^53), and hostile metadata saturates
    // (`as u64`) instead of overflowing.
    let f = |x: u64| x as f64;
    let n = hp.n_layer as usize;
    let t = f(ctx.n_ubatch);
    let e = f(hp.n_embd);
    let heads = f(hp.n_head.iter().copied().max().unwrap_or(0));
    let q = (0..n).map(|il| f(hp.n_head[il]) * f(if hp.is_swa[il] { hp.head_k_swa } else { hp.head_k })).fold(0.0, f64::max);
    let kv = (0..n).map(|il| f(hp.n_embd_v_gqa(il))).fold(0.0, f64::max);
    // A MoE model's dense FFN is only in its leading dense layers (`n_ff` is unused otherwise).
    let ff_dense = if hp.n_expert == 0 || hp.n_dense_lead > 0 { f(hp.n_ff.iter().copied().max().unwrap_or(0)) } else { 0.0 };
    let ff = ff_dense.max(f(hp.n_ff_exp) * f(hp.n_expert_used));
    let n_kv = f(ctx.n_ctx_seq);
    // One mask per cache, [n_kv, T] over the streams: f16 with flash attention, else f32.
    let mask_elt = if flash_attn { 2.0 } else { 4.0 };
    let masks = n_kv * t * mask_elt + f(ctx.swa_cells) * t * mask_elt;
    let mut peak: f64 = 0.0;
    if layers {
        let act = if hp.is_mla {
            // MLA (deepseek2): Q absorbed into the latent (n_head × (kv_lora_rank + n_rot)), twice,
            // and the full Q (n_head × key_length_mla); fitted on deepseek2 records.
            4.0 * (5.0 * e + 2.0 * heads * (f(hp.kv_lora_rank) + f(hp.n_rot)) + heads * f(hp.head_k_mla)) + 20.0 + if flash_attn { 0.0 } else { 72.0 }
        } else {
            let gemma = if hp.arch.starts_with("gemma") { 8.0 * e + 8.0 } else { 0.0 };
            if flash_attn {
                // No scores and no transposed-V row indices.
                4.0 * (3.0 * e + q + kv) + 20.0 + gemma
            } else {
                4.0 * (3.0 * e + 2.0 * q) + 8.0 * kv + 20.0 + gemma
            }
        };
        let attn = if flash_attn { masks + t * act } else { n_kv * t * heads * 4.0 + masks + t * act };
        let ffn = masks + t * (4.0 * (3.0 * ff + 4.0 * e) + 28.0);
        peak = peak.max(attn).max(ffn);
    }
    if head {
        let per = if flash_attn { 8.0 * e + 4.0 } else { 12.0 * e + 4.0 };
        peak = peak.max(t * (4.0 * f(hp.n_vocab) + per));
    }
    peak as u64
}
