//! More of LLaMA's shape, each with its own switches, as transformers 5.24 builds them on
//! [`super::dense::Decoder`]: `ernie4_5` (`modeling_ernie4_5.py`: one `use_bias` on every
//! projection, `head_dim` 128, tied head by default) and `hunyuan_v1_dense`
//! (`modeling_hunyuan_v1_dense.py`: biases by `attention_bias` on the four attention
//! projections, none in the MLP, per-head RMSNorms `query_layernorm` / `key_layernorm`).

use super::dense::{head_for, layer_count, Decoder, IGNORED_LLAMA_LIKE};
use super::llama_variants::llama_layer;
use crate::error::{Error, Result};
use crate::import::decoder::{LLAMA_MODULES, MAX_DEFAULT_SEQ_LEN};
use crate::import::fields::{pick, Fields};
use crate::layer::norm::{NormKind, RmsNorm};
use crate::layer::transformer::{FfnActivation, TransformerLayer};
use crate::presets;
use crate::spec::{Layer, ModelSpec};

/// What differs between the families built here.
struct Shape {
    lm: &'static str,
    base: &'static str,
    model_type: &'static str,
    /// (vocab, hidden, intermediate, layers, heads, eps, max positions, tied)
    defaults: (u64, u64, u64, u64, u64, f64, u64, bool),
    /// `head_dim`'s class default (`None`: `hidden_size / num_attention_heads`)
    head_dim: Option<u64>,
    /// `num_key_value_heads`' class default (`None`: `num_attention_heads`)
    kv_heads: Option<u64>,
}

/// A LLaMA-like decoder of `shape` with the given biases and per-head Q/K norms.
fn build(c: &Fields, arch: Option<&str>, s: Shape, attn_bias: bool, mlp_bias: bool, qk_norm: bool) -> Result<ModelSpec> {
    let (lm, base) = (s.lm, s.base);
    let (class, name) = pick(arch, &[lm, base], base);
    let (vocab, h, inter, n, heads, eps, max_pos, tied) = s.defaults;
    let h = c.size("hidden_size", h)?;
    let heads = c.size("num_attention_heads", heads)?;
    let kv = c.size("num_key_value_heads", s.kv_heads.unwrap_or(heads))?;
    let hd = match c.opt_int("head_dim")?.or(s.head_dim) {
        Some(0) => return Err(Error::Import("field `head_dim` must be at least 1".into())),
        Some(hd) => hd,
        // `getattr(config, "head_dim", …)` finds the class's `None`: transformers cannot build it
        None if c.0.contains_key("head_dim") || s.model_type == "hunyuan_v1_dense" => {
            return Err(Error::Import(format!("field `head_dim` must be set: {base} with `head_dim: null` does not build")))
        }
        None => h / heads,
    };
    let n = layer_count(c, "num_hidden_layers", n)?;
        let vocab = c.size("vocab_size", vocab)?;
    let eps = c.float("rms_norm_eps", eps)?;
    c.activation("hidden_act", FfnActivation::Silu)?;
    let layer = TransformerLayer {
        rotary: true,
        head_dim: (hd.checked_mul(heads) != Some(h)).then_some(hd),
        qk_norm,
        ..llama_layer(c, (h, heads, kv), eps, (attn_bias, mlp_bias), c.size("intermediate_size", inter)?)?
    };
    let max_pos = c.size("max_position_embeddings", max_pos)?;
    let tied = c.flag("tie_word_embeddings", tied)?;
    c.refuse_unknown(s.model_type, &[IGNORED_LLAMA_LIKE, &["eod_token_id"]].concat())?;
    Ok(Decoder {
        name,
        vocab,
        embed_dim: h,
        after_embed: vec![],
        layers: vec![layer; n as usize],
        final_norm: Some(Layer::RmsNorm(RmsNorm { normalized_shape: h, eps, t5: false })),
        after_norm: vec![],
        head: head_for(class, lm, h, vocab, tied, false),
        after_head: vec![],
        seq_len: max_pos.min(MAX_DEFAULT_SEQ_LEN),
        modules: LLAMA_MODULES,
    }
    .build())
}

/// `Ernie4_5Config` (transformers): defaults are ERNIE-4.5-0.3B's.
pub(super) fn ernie4_5(c: &Fields, arch: Option<&str>) -> Result<ModelSpec> {
    let bias = c.flag("use_bias", false)?;
    let s = Shape {
        lm: "Ernie4_5ForCausalLM",
        base: "Ernie4_5Model",
        model_type: "ernie4_5",
        defaults: (103424, 1024, 3072, 18, 16, 1e-5, 131072, true),
        head_dim: Some(128),
        kv_heads: Some(2),
    };
    build(c, arch, s, bias, bias, false)
}

/// `HunYuanDenseV1Config` (transformers): defaults as the class (its `head_dim` must be given).
pub(super) fn hunyuan_v1_dense(c: &Fields, arch: Option<&str>) -> Result<ModelSpec> {
    let bias = c.flag("attention_bias", false)?;
    let s = Shape {
        lm: "HunYuanDenseV1ForCausalLM",
        base: "HunYuanDenseV1Model",
        model_type: "hunyuan_v1_dense",
        defaults: (290943, 4096, 11008, 32, 32, 1e-5, 2048, false),
        head_dim: None,
        kv_heads: None,
    };
    build(c, arch, s, bias, false, true)
}

/// `NemotronConfig` (transformers 5.24, `modeling_nemotron.py`): Nemotron-4's layers —
/// `NemotronLayerNorm1P` (a biased LayerNorm applied with `weight + 1`: the same parameters),
/// GQA with partial rotary (`partial_rotary_factor`, default 0.5), biases by `attention_bias`,
/// and a plain `down(relu²(up(x)))` MLP (`mlp_bias`): `ReLUSquaredActivation`, the ReLU's
/// output and its square's both kept for the backward ([`FfnActivation::Relu2`]; measured:
/// `tests/generate_dense2.rs`).
pub(super) fn nemotron(c: &Fields, arch: Option<&str>) -> Result<ModelSpec> {
    use crate::layer::norm::LayerNorm;
    let (lm, base) = ("NemotronForCausalLM", "NemotronModel");
    let (class, name) = pick(arch, &[lm, base], base);
    let h = c.size("hidden_size", 6144)?;
    let heads = c.size("num_attention_heads", 48)?;
    // `NemotronAttention` divides by `num_key_value_heads`, whose class default is `None`
    if c.get("num_key_value_heads").is_none() {
        return Err(Error::Import(format!("field `num_key_value_heads` must be set: {base} with `null` does not build")));
    }
    let kv = c.size("num_key_value_heads", heads)?;
    let hd = match c.opt_int("head_dim")? {
        Some(0) => return Err(Error::Import("field `head_dim` must be at least 1".into())),
        Some(hd) => hd,
        None => h / heads,
    };
    if hd == 0 {
        return Err(Error::Import(format!("hidden_size ({h}) is smaller than num_attention_heads ({heads})")));
    }
    match c.str("hidden_act")?.unwrap_or("relu2") {
        "relu2" => {}
        other => return Err(Error::Import(format!("field `hidden_act`: `{other}` is not modelled (relu2)"))),
    }
    let n = layer_count(c, "num_hidden_layers", 32)?;
        let vocab = c.size("vocab_size", 256000)?;
    let eps = c.float("norm_eps", 1e-5)?;
    let (rotary, rotary_dim) = super::dense::rotary_dim(c, "partial_rotary_factor", 0.5, hd)?;
    let (attn_bias, mlp_bias) = (c.flag("attention_bias", false)?, c.flag("mlp_bias", false)?);
    let layer = TransformerLayer {
        dropout: 0.0,
        attention_dropout: Some(c.prob("attention_dropout", 0.0)?),
        activation: FfnActivation::Relu2,
        layer_norm_eps: eps,
        norm_first: true,
        bias: attn_bias,
        mlp_bias: (mlp_bias != attn_bias).then_some(mlp_bias),
        norm_bias: (!attn_bias).then_some(true),
        norm: NormKind::LayerNorm,
        num_kv_heads: (kv != heads).then_some(kv),
        rotary,
        rotary_dim,
        head_dim: (hd.checked_mul(heads) != Some(h)).then_some(hd),
        ..presets::transformer_layer(h, heads, c.size("intermediate_size", 24576)?)
    };
    let max_pos = c.size("max_position_embeddings", 4096)?;
    let tied = c.flag("tie_word_embeddings", false)?;
    c.refuse_unknown("nemotron", IGNORED_LLAMA_LIKE)?;
    Ok(Decoder {
        name,
        vocab,
        embed_dim: h,
        after_embed: vec![],
        layers: vec![layer; n as usize],
        final_norm: Some(Layer::LayerNorm(LayerNorm { normalized_shape: h, eps, elementwise_affine: true, bias: true })),
        after_norm: vec![],
        head: head_for(class, lm, h, vocab, tied, false),
        after_head: vec![],
        seq_len: max_pos.min(MAX_DEFAULT_SEQ_LEN),
        modules: LLAMA_MODULES,
    }
    .build())
}
