//! The ALiBi decoders, as transformers 5.24 builds them: `bloom` (`modeling_bloom.py`) and `mpt`
//! (`modeling_mpt.py`). ALiBi adds a per-head linear bias to the attention scores instead of
//! positions: no parameters, no rotary. Both classes compute their attention themselves, eagerly
//! (`BloomAttention`: `alibi.baddbmm(q, kᵀ)`, fp32 softmax; `MptAttention`: `matmul`, `+
//! position_bias`, fp32 softmax), whatever `attn_implementation` says (transformers refuses
//! SDPA for both): their layers are `eager_only`. The bias itself (`[B·H, 1, S]` for BLOOM, `[H, 1, max_seq_len]` for MPT)
//! is not modelled.
//!
//! | family | layer |
//! |---|---|
//! | `bloom` | `word_embeddings_layernorm` after the embedding; biased LayerNorms, fused biased `query_key_value`, biased `dense`, `dense_h_to_4h`/`dense_4h_to_h` (4 × hidden) with `BloomGelu` (the tanh GELU in Python ops: `bloom_gelu` activation); `ln_f`; tied `lm_head` |
//! | `mpt` | LayerNorms without bias (`norm_1.bias = None`), bias-free fused `Wqkv` and `out_proj`, bias-free `up_proj`/`down_proj` of 4 × `d_model` with exact GELU; `norm_f` without bias; tied `lm_head`. `no_bias`, `learned_pos_emb`, `norm_type`, `qk_ln`, `alibi` are read by no 5.24 module |

use super::dense::{divisible, head_for, layer_count, layer_norm_decoder, Decoder};
use crate::error::{Error, Result};
use crate::import::decoder::{DecoderModules, MAX_DEFAULT_SEQ_LEN};
use crate::import::fields::{pick, Fields};
use crate::layer::norm::{LayerNorm, NormKind};
use crate::layer::transformer::{FfnActivation, TransformerLayer};
use crate::presets;
use crate::spec::{Layer, ModelSpec};
use serde_json::{Map, Value};

/// `BloomConfig` (transformers): defaults are its tiny 2-layer 64-wide model's.
pub(super) fn bloom(c: &Fields, arch: Option<&str>) -> Result<ModelSpec> {
    let (lm, base) = ("BloomForCausalLM", "BloomModel");
    let (class, name) = pick(arch, &[lm, base], base);
    // `n_embed` is the legacy name `__post_init__` folds into `hidden_size`
    let h = c.size("n_embed", c.size("hidden_size", 64)?)?;
    let heads = c.size("n_head", c.opt_int("num_attention_heads")?.unwrap_or(8))?;
    divisible(h, heads)?;
    let legacy_layers = c.opt_int("num_hidden_layers")?.unwrap_or(2);
    let n = layer_count(c, "n_layer", legacy_layers)?;
    let vocab = c.size("vocab_size", 250880)?;
    let eps = c.float("layer_norm_epsilon", 1e-5)?;
    if c.flag("apply_residual_connection_post_layernorm", false)? {
        return Err(Error::Import(
            "field `apply_residual_connection_post_layernorm`: a residual from the LayerNorm's output is not modelled (false)".into(),
        ));
    }
    let tp = c.size("pretraining_tp", 1)?;
    if c.flag("slow_but_exact", false)? && tp > 1 {
        return Err(Error::Import("field `slow_but_exact` with `pretraining_tp` > 1: the sliced output projections are not modelled".into()));
    }
    let hidden_dropout = c.prob("hidden_dropout", 0.0)?;
    let layer = TransformerLayer {
        dropout: hidden_dropout,
        attention_dropout: Some(c.prob("attention_dropout", 0.0)?),
        activation: FfnActivation::BloomGelu,
        layer_norm_eps: eps,
        norm_first: true,
        bias: true,
        norm: NormKind::LayerNorm,
        fused_qkv: true,
        eager_only: true,
        ..presets::transformer_layer(h, heads, h.saturating_mul(4))
    };
    let tied = c.flag("tie_word_embeddings", true)?;
    c.refuse_unknown("bloom", &[])?;
    let embed_norm = Layer::LayerNorm(LayerNorm { normalized_shape: h, eps, elementwise_affine: true, bias: true });
    let modules = DecoderModules { embed: "transformer.word_embeddings", layers: "transformer.h", norm: "transformer.ln_f", head: "lm_head" };
    // BLOOM's context is ALiBi's: unbounded; 2048 by default
    Ok(layer_norm_decoder(name, vocab, vec![embed_norm], layer, n, head_for(class, lm, h, vocab, tied, false), 2048).named(modules))
}

/// `MptAttentionConfig`'s fields (`attn_config`): `(name, what the 5.24 modeling code does with it)`.
const MPT_ATTN_INERT: &[&str] = &[
    // read by no module of modeling_mpt.py
    "attn_impl", "prefix_lm", "qk_ln", "attn_uses_sequence_id", "alibi", "alibi_bias_max", "softmax_scale",
];

/// `MptConfig` (transformers): defaults are its 24-layer 2048-wide model's.
pub(super) fn mpt(c: &Fields, arch: Option<&str>) -> Result<ModelSpec> {
    let (lm, base) = ("MptForCausalLM", "MptModel");
    let (class, name) = pick(arch, &[lm, base], base);
    let h = c.size("d_model", c.opt_int("hidden_size")?.unwrap_or(2048))?;
    let heads = c.size("n_heads", c.opt_int("num_attention_heads")?.unwrap_or(16))?;
    divisible(h, heads)?;
    let legacy_layers = c.opt_int("num_hidden_layers")?.unwrap_or(24);
    let n = layer_count(c, "n_layers", legacy_layers)?;
    let vocab = c.size("vocab_size", 50368)?;
    let eps = c.float("layer_norm_epsilon", 1e-5)?;
    if c.size("expansion_ratio", 4)? != 4 {
        return Err(Error::Import("field `expansion_ratio`: transformers' MptMLP is 4 × d_model whatever it says; another ratio's checkpoint does not load".into()));
    }
    let attn_pdrop = mpt_attn_config(c)?;
    // `resid_pdrop`, `emb_pdrop`: read by no 5.24 module (every dropout is `attn_pdrop`)
    c.prob("resid_pdrop", 0.0)?;
    c.prob("emb_pdrop", 0.0)?;
    let layer = TransformerLayer {
        dropout: attn_pdrop,
        attention_dropout: Some(attn_pdrop),
        activation: FfnActivation::Gelu,
        layer_norm_eps: eps,
        norm_first: true,
        bias: false,
        norm: NormKind::LayerNorm,
        fused_qkv: true,
        eager_only: true,
        // `MptBlock.forward`'s `attn_outputs` stays referenced to the block's end
        attn_out_kept: true,
        ..presets::transformer_layer(h, heads, h.saturating_mul(4))
    };
    let max_seq = c.size("max_seq_len", 2048)?;
    let tied = c.flag("tie_word_embeddings", true)?;
    c.refuse_unknown("mpt", &["no_bias", "learned_pos_emb", "norm_type", "init_device", "embedding_fraction", "logit_scale"])?;
    Ok(Decoder {
        name,
        vocab,
        embed_dim: h,
        after_embed: vec![],
        layers: vec![layer; n as usize],
        final_norm: Some(Layer::LayerNorm(LayerNorm { normalized_shape: h, eps, elementwise_affine: true, bias: false })),
        after_norm: vec![],
        head: head_for(class, lm, h, vocab, tied, false),
        after_head: vec![],
        seq_len: max_seq.min(MAX_DEFAULT_SEQ_LEN),
        modules: DecoderModules { embed: "transformer.wte", layers: "transformer.blocks", norm: "transformer.norm_f", head: "lm_head" },
    }
    .build())
}

/// `attn_config` (an object, or absent for `MptAttentionConfig()`): its dropout. A field that
/// would change memory and is not modelled is refused by name (`clip_qkv`'s clamped copy of the
/// fused projection; `multiquery_attention`, which transformers does not build).
fn mpt_attn_config(c: &Fields) -> Result<f64> {
    let empty = Map::new();
    let m = match c.get("attn_config") {
        None => &empty,
        Some(Value::Object(m)) => m,
        Some(v) => return Err(Fields::wrong("attn_config", "an object", v)),
    };
    let a = Fields::new(m);
    match a.str("attn_type")?.unwrap_or("multihead_attention") {
        "multihead_attention" => {}
        other => return Err(Error::Import(format!("field `attn_config.attn_type`: `{other}` is not built by transformers' MptAttention (multihead_attention)"))),
    }
    if a.get("clip_qkv").is_some() {
        return Err(Error::Import("field `attn_config.clip_qkv`: the clamped copy of the fused Q/K/V projection is not modelled (null)".into()));
    }
    let p = a.prob("attn_pdrop", 0.0)?;
    a.refuse_unknown("mpt attn_config", MPT_ATTN_INERT)?;
    Ok(p)
}
