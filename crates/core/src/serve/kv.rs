//! What a serving engine caches per token, read from the spec: for every attention layer its
//! KV heads and head size (grouped-query and multi-query aware), its sliding window, or the
//! latent of multi-head latent attention; and the widths the profile run's activations need.

use crate::formats::KvDtype;
use crate::layer::transformer::TransformerLayer;
use crate::spec::{Layer, ModelSpec};

/// One attention layer's cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheLayer {
    /// KV heads × head size (K and V each); for MLA the latent width, cached once.
    pub heads: u64,
    pub head_dim: u64,
    /// MLA: `kv_lora_rank + qk_rope_head_dim` values, one vector per token (no separate V).
    pub latent: bool,
    /// Sliding-window attention: the layer never needs more than this many tokens.
    pub window: Option<u64>,
}

impl CacheLayer {
    /// KV heads on one of `tp` ranks: vLLM shards KV heads and replicates them when there are
    /// fewer heads than ranks (`ModelConfig.get_num_kv_heads`: `max(1, total // tp)`); MLA's
    /// latent is replicated on every rank.
    pub fn heads_per_rank(&self, tp: u64) -> u64 {
        if self.latent { 1 } else { (self.heads / tp.max(1)).max(1) }
    }

    /// Cache bytes of one token on one rank: `2 × kv_heads × head_dim × bytes` (K and V), or
    /// `latent × bytes` for MLA (vLLM `MLAAttentionSpec`).
    pub fn token_bytes(&self, tp: u64, dtype: KvDtype) -> u64 {
        let values = self.heads_per_rank(tp).saturating_mul(self.head_dim);
        let kv = if self.latent { 1 } else { 2 };
        dtype.bytes(values).saturating_mul(kv)
    }
}

/// The widths of one block, for the profile run's activations (per rank where vLLM shards).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BlockWidths {
    pub hidden: u64,
    /// Q + K + V projection outputs (one fused `qkv_proj`).
    pub qkv: u64,
    /// Attention output (`num_heads × head_dim`, or MLA's `num_heads × v_head_dim`).
    pub attn_out: u64,
    /// The MLP's fused `gate_up_proj` output (2·I gated, I otherwise); per routed token for MoE.
    pub up: u64,
    /// The activation's output fed to `down_proj` (I); per routed token for MoE.
    pub act: u64,
    /// Experts per token of a sparse MoE MLP (0: dense).
    pub top_k: u64,
}

/// The cache layers and block widths of a decoder, in order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ModelShape {
    pub layers: Vec<CacheLayer>,
    pub blocks: Vec<BlockWidths>,
    pub vocab: u64,
    pub hidden: u64,
    /// The recurrent layers' fixed state per sequence (Mamba, Mamba-2, gated DeltaNet: vLLM's
    /// `MambaSpec`, one page per request whatever its length).
    pub states: Vec<crate::layer::state_cache::StateSize>,
}

impl ModelShape {
    /// Bytes of every recurrent layer's state for one sequence on one of `tp` ranks, conv and
    /// SSM states in the model's `dtype_bytes` (vLLM's `mamba_cache_dtype` and
    /// `mamba_ssm_cache_dtype` `auto`); the heads are split over the ranks. vLLM keeps
    /// `conv_kernel − 1` columns of the conv state (`MambaStateShapeCalculator` in
    /// `vllm/model_executor/layers/mamba/mamba_utils.py`), transformers all `conv_kernel`.
    pub fn state_bytes(&self, tp: u64, dtype_bytes: u64) -> u64 {
        let vllm = |s: &crate::layer::state_cache::StateSize| crate::layer::state_cache::StateSize { conv_kernel: s.conv_kernel.saturating_sub(1), ..*s };
        let all = self.states.iter().map(|s| vllm(s).bytes(dtype_bytes, dtype_bytes)).fold(0u64, u64::saturating_add);
        all.div_ceil(tp.max(1))
    }

    pub fn of(spec: &ModelSpec) -> ModelShape {
        let mut m = ModelShape { vocab: spec.input.vocab_size.unwrap_or(0), ..ModelShape::default() };
        walk(&spec.layers, 1, &mut m);
        m
    }
}

fn transformer(l: &TransformerLayer, m: &mut ModelShape) {
    let hd = l.head_dim.unwrap_or(l.d_model / l.nhead.max(1));
    let kv = l.num_kv_heads.unwrap_or(l.nhead);
    m.layers.push(CacheLayer { heads: kv, head_dim: hd, latent: false, window: l.sliding_window });
    let i = l.dim_feedforward;
    m.hidden = m.hidden.max(l.d_model);
    m.blocks.push(BlockWidths {
        hidden: l.d_model,
        qkv: (l.nhead + 2 * kv).saturating_mul(hd),
        attn_out: l.nhead.saturating_mul(hd),
        up: if l.gated_mlp { 2 * i } else { i },
        act: i,
        top_k: 0,
    });
}

/// Repetitions walked at most (a spec's `repeat` can be any size; no real model has more layers).
const MAX_REPEAT: u64 = 1 << 16;

fn walk(layers: &[Layer], times: u64, m: &mut ModelShape) {
    for _ in 0..times.min(MAX_REPEAT) {
        for l in layers {
            match l {
                // encoder layers attend both ways and keep no cache (vLLM's EncoderOnlyAttentionSpec)
                Layer::TransformerDecoderLayer(t) => transformer(t, m),
                Layer::MultiheadAttention(a) if a.causal => {
                    let hd = a.head_dim.unwrap_or(a.embed_dim / a.num_heads.max(1));
                    let kv = a.num_kv_heads.unwrap_or(a.num_heads);
                    m.layers.push(CacheLayer { heads: kv, head_dim: hd, latent: false, window: a.window() });
                    m.hidden = m.hidden.max(a.embed_dim);
                    m.blocks.push(BlockWidths {
                        hidden: a.embed_dim,
                        qkv: (a.num_heads + 2 * kv).saturating_mul(hd),
                        attn_out: a.num_heads.saturating_mul(hd),
                        ..BlockWidths::default()
                    });
                }
                Layer::MultiHeadLatentAttention(a) => {
                    let latent = a.kv_lora_rank.saturating_add(a.qk_rope_head_dim);
                    m.layers.push(CacheLayer { heads: 1, head_dim: latent, latent: true, window: None });
                    m.hidden = m.hidden.max(a.hidden_size);
                    m.blocks.push(BlockWidths {
                        hidden: a.hidden_size,
                        qkv: a.num_heads.saturating_mul(a.qk_nope_head_dim + a.qk_rope_head_dim).saturating_add(latent),
                        attn_out: a.num_heads.saturating_mul(a.v_head_dim),
                        ..BlockWidths::default()
                    });
                }
                Layer::MambaMixer(l) => m.states.push(l.state()),
                Layer::Mamba2Mixer(l) => m.states.push(l.state()),
                Layer::GatedDeltaNet(l) => m.states.push(l.state()),
                Layer::LightningAttention(l) => m.states.push(l.state()),
                Layer::GatedMlp(g) => merge_mlp(m, 2 * g.intermediate_size, g.intermediate_size, 0),
                // the routed experts (a shared expert runs as a dense MLP before them)
                Layer::SparseMoe(s) => merge_mlp(m, 2 * s.intermediate_size, s.intermediate_size, s.top_k),
                Layer::Repeat { times, body } => walk(body, *times, m),
                Layer::Sequential { layers, .. } => walk(layers, 1, m),
                Layer::Residual { body, shortcut, .. } => {
                    walk(body, 1, m);
                    if let Some(s) = shortcut {
                        walk(s, 1, m);
                    }
                }
                Layer::Parallel { branches, .. } => {
                    for b in branches {
                        walk(b, 1, m);
                    }
                }
                _ => {}
            }
        }
    }
}

/// A stand-alone MLP (MoE models put attention and MLP in separate layers) widens the last block.
fn merge_mlp(m: &mut ModelShape, up: u64, act: u64, top_k: u64) {
    match m.blocks.last_mut() {
        Some(b) if b.up == 0 => {
            b.up = up;
            b.act = act;
            b.top_k = top_k;
        }
        _ => m.blocks.push(BlockWidths { hidden: m.hidden, up, act, top_k, ..BlockWidths::default() }),
    }
}
