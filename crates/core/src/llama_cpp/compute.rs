//! The compute buffers and the output buffer.
//!
//! Output buffer (read from source, measured): `llama_context::output_reserve(n_seq_max)` at
//! creation: logits for `max(n_outputs, n_seq_max)` = `n_seq_max` rows of `n_vocab` f32, on the
//! output device's host buffer type (pinned `CUDA_Host` when the output layer is on a GPU, else CPU).
//!
//! Compute buffer: `ggml_gallocr` sizes one buffer per backend for the worst-case graph
//! `graph_reserve(n_tokens = min(n_ctx, n_ubatch), n_outputs = n_tokens)` with the whole cache
//! visible (`n_kv` = the cells of a stream). Its peak is the largest live set of one layer's
//! intermediate tensors plus the graph's inputs: without flash attention the `n_kv × n_tokens ×
//! n_head` f32 scores (`kq`, softmaxed in place) and the f32 mask; with it, the f16 mask and the
//! layer's activations; and at the head the `n_vocab × n_tokens` f32 logits. The per-token terms
//! are fitted to the CPU backend's measured buffers (`tests/data/llama_cpp/measured.jsonl`), the
//! structure is read from `llm_graph_context::build_attn_mha` (`src/llama-graph.cpp`).

use super::hparams::Hparams;
use super::kv::Context;

/// Bytes of the output buffer.
pub fn output_bytes(hp: &Hparams, ctx: &Context) -> u64 {
    hp.n_vocab * ctx.n_seq * 4
}

/// Per-layer dimensions the graph's tensors take (the widest layer).
struct Dims {
    e: u64,
    q: u64,
    kv: u64,
    heads: u64,
    ff: u64,
}

fn dims(hp: &Hparams) -> Dims {
    let n = hp.n_layer as usize;
    let heads = hp.n_head.iter().copied().max().unwrap_or(0);
    let q = (0..n).map(|il| hp.n_head[il] * if hp.is_swa[il] { hp.head_k_swa } else { hp.head_k }).max().unwrap_or(0);
    let kv = (0..n).map(|il| hp.n_embd_k_gqa(il) + hp.n_embd_v_gqa(il)).max().unwrap_or(0) / 2;
    let ff_dense = hp.n_ff.iter().copied().max().unwrap_or(0);
    let ff_moe = hp.n_ff_exp * hp.n_expert_used;
    Dims { e: hp.n_embd, q, kv, heads, ff: ff_dense.max(ff_moe) }
}

/// The compute buffer of a backend that runs `layers` layers (the widest cache `n_kv` cells) and,
/// if `head`, the output layer.
pub fn compute_bytes(hp: &Hparams, ctx: &Context, flash_attn: bool, n_kv: u64, layers: bool, head: bool) -> u64 {
    let d = dims(hp);
    let t = ctx.n_ubatch;
    // Tokens per stream: the micro-batch is split over the streams at reserve time.
    let t_stream = t.div_ceil(ctx.n_stream);
    let per_token = 4 * (3 * d.e + 2 * d.q + 2 * d.kv) + 20;
    let mut peak = 0;
    if layers {
        let attn = if flash_attn {
            n_kv * t_stream * ctx.n_stream * 2 + t * per_token
        } else {
            let kq = n_kv * t_stream * ctx.n_stream * d.heads * 4;
            let mask = n_kv * t_stream * ctx.n_stream * 4;
            kq + mask + t * per_token
        };
        let ffn = t * 4 * (2 * d.e + 3 * d.ff);
        peak = peak.max(attn).max(ffn);
    }
    if head {
        let out = hp.n_vocab * t * 4 + t * 4 * 2 * d.e;
        peak = peak.max(out);
    }
    peak
}
