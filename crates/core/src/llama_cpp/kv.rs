//! The KV cache: cells, streams, the layers that have one, K and V per layer and device.
//!
//! Read from source: `llama_context::llama_context` (`src/llama-context.cpp`) pads `n_ctx` to 256
//! and, without `--kv-unified`, gives each of the `n_seq_max` (`-np`) sequences its own stream of
//! `n_ctx_seq = pad(n_ctx / n_seq_max, 256)` cells; `llama_model::create_memory` builds a cache of
//! `n_ctx_seq` cells; `llama_kv_cache::llama_kv_cache` (`src/llama-kv-cache.cpp`) makes per layer a
//! K tensor `[n_embd_k_gqa, kv_size, n_stream]` of `-ctk`'s type and a V tensor `[n_embd_v_gqa,
//! kv_size, n_stream]` of `-ctv`'s type (none with MLA; every layer padded to the widest V
//! when V is transposed, i.e. without flash attention), on the layer's device, one buffer per
//! device; `llama_kv_cache_iswa` (`src/llama-kv-cache-iswa.cpp`) keeps the sliding-window layers
//! in a second cache of `pad(min(n_ctx_seq, n_swa × (unified ? n_seq : 1) + n_ubatch), 256)` cells
//! (`--swa-full`: as many as the other). Measured on the CPU backend: every buffer to the byte.

use super::hparams::Hparams;
use super::params::Params;
use super::placement::Buft;
use super::error::LlamaError;

/// `GGML_PAD(x, 256)`.
fn pad256(x: u64) -> u64 {
    x.div_ceil(256) * 256
}

/// The context as llama.cpp sizes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Context {
    /// `cparams.n_ctx` after padding.
    pub n_ctx: u64,
    /// Cells per stream.
    pub n_ctx_seq: u64,
    pub n_seq: u64,
    /// Streams: 1 unified, else one per sequence.
    pub n_stream: u64,
    pub n_batch: u64,
    pub n_ubatch: u64,
    /// Cells of the sliding-window cache (0 without sliding-window layers).
    pub swa_cells: u64,
}

impl Context {
    pub fn new(hp: &Hparams, p: &Params) -> Result<Context, LlamaError> {
        let n_seq = p.n_parallel.max(1);
        if n_seq > 256 {
            return Err(LlamaError::Params(format!("-np {n_seq}: llama.cpp takes at most 256 sequences (LLAMA_MAX_SEQ)")));
        }
        let n_ctx0 = if p.n_ctx == 0 { hp.n_ctx_train } else { p.n_ctx };
        if n_ctx0 == 0 {
            return Err(LlamaError::Params("-c 0 and the model has no context_length".into()));
        }
        if n_ctx0 > 1 << 32 {
            return Err(LlamaError::Params(format!("-c {n_ctx0}: llama.cpp's n_ctx is a 32-bit count")));
        }
        if p.n_batch == 0 || p.n_ubatch == 0 {
            return Err(LlamaError::Params("-b and -ub must be at least 1".into()));
        }
        // Causal attention: the batch is at most the context; the micro-batch at most the batch.
        let n_batch = p.n_batch.min(n_ctx0);
        let n_ubatch = p.n_ubatch.min(n_batch);
        let mut n_ctx = pad256(n_ctx0);
        let n_ctx_seq = if p.kv_unified {
            n_ctx
        } else {
            let s = pad256(n_ctx / n_seq);
            n_ctx = s * n_seq;
            s
        };
        let swa_cells = if !hp.any_swa() {
            0
        } else if p.swa_full {
            n_ctx_seq
        } else {
            let per = if p.kv_unified { n_seq } else { 1 };
            pad256(n_ctx_seq.min(hp.n_swa * per + n_ubatch))
        };
        Ok(Context { n_ctx, n_ctx_seq, n_seq, n_stream: if p.kv_unified { 1 } else { n_seq }, n_batch, n_ubatch, swa_cells })
    }
}

/// One device's share of the KV cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct KvBytes {
    pub k: u64,
    pub v: u64,
}

/// The KV buffers: `(buffer type, K bytes, V bytes)` per cache (full-attention, then
/// sliding-window) and device. A buffer's size is the sum of its tensors, each rounded up to the
/// buffer type's alignment (`Buft::alloc`).
pub fn kv_buffers(hp: &Hparams, p: &Params, ctx: &Context, layer_dev: &[Option<usize>]) -> Vec<(Buft, KvBytes)> {
    let v_trans = !p.flash_attn_on();
    let mut out: Vec<(Buft, KvBytes)> = Vec::new();
    for swa in [false, true] {
        let cells = if swa { ctx.swa_cells } else { ctx.n_ctx_seq };
        let mut bufs: Vec<(Buft, KvBytes)> = Vec::new();
        for (il, dev) in layer_dev.iter().enumerate().take(hp.n_layer as usize) {
            // MTP blocks have no cache (`create_memory`'s filter `il < n_layer()`).
            if hp.is_swa[il] != swa || (hp.recurrent[il] && !hp.attn_and_recurrent) || il >= hp.n_trunk() as usize {
                continue;
            }
            let buft = dev.map_or(Buft::Cpu, Buft::Cuda);
            let nk = hp.n_embd_k_gqa(il);
            let nv = if v_trans { hp.n_embd_v_gqa_max() } else { hp.n_embd_v_gqa(il) };
            let k = buft.alloc(nk, p.type_k, p.type_k.row_bytes(nk) * cells * ctx.n_stream);
            let v = if hp.is_mla { 0 } else { buft.alloc(nv, p.type_v, p.type_v.row_bytes(nv) * cells * ctx.n_stream) };
            match bufs.iter_mut().find(|(b, _)| *b == buft) {
                Some((_, kv)) => {
                    kv.k += k;
                    kv.v += v;
                }
                None => bufs.push((buft, KvBytes { k, v })),
            }
        }
        // llama_kv_cache keeps its buffers in a map ordered by buffer-type name.
        bufs.sort_by_key(|(b, _)| b.name());
        out.extend(bufs);
    }
    out
}

/// Checks llama.cpp makes on the cache types (`llama_context` constructor).
pub fn check_types(hp: &Hparams, p: &Params) -> Result<(), LlamaError> {
    if p.type_v.is_quantized() && !p.flash_attn_on() && !hp.is_mla {
        return Err(LlamaError::Params(format!(
            "-ctv {}: a quantized V cache requires flash attention (-fa on)",
            p.type_v.name
        )));
    }
    for (flag, t) in [("-ctk", p.type_k), ("-ctv", p.type_v)] {
        if !super::params::KV_CACHE_TYPES.contains(&t) {
            return Err(LlamaError::Params(format!("{flag} {}: not a KV cache type (f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1)", t.name)));
        }
    }
    Ok(())
}
