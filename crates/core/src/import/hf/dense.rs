//! Dense decoder-only families: `mistral`, `qwen2`, `qwen3`, `gemma`, `gemma2`, `gemma3_text`,
//! `phi3` (LLaMA-like: RMSNorm, gated MLP, rotary), `phi`, `gpt_neox`, `falcon` (parallel
//! attention + MLP), `opt` and `starcoder2`, as transformers 5's `modeling_<type>.py` builds them.
//!
//! Each family reads its fields with its config class's defaults and then refuses any field it
//! neither read nor lists as irrelevant (`IGNORED_*`), so nothing is silently approximated.
//!
//! | family | what differs from LLaMA |
//! |---|---|
//! | `mistral` | explicit `head_dim`; `sliding_window` on every layer |
//! | `qwen2` | Q/K/V biases (no `o_proj` bias); sliding layers from `layer_types` |
//! | `qwen3` | explicit `head_dim`, per-head RMSNorm on Q and K (`qk_norm`) |
//! | `gemma` | `head_dim`, GELU-tanh gate, embeddings scaled by `√hidden`, tied head |
//! | `gemma2` | + norms after attention and MLP (`post_norms`), attention and final logit soft-capping, alternating sliding layers |
//! | `gemma3_text` | + `qk_norm`, five sliding layers to one full |
//! | `phi3` | fused `qkv_proj` and `gate_up_proj` (same parameters as separate ones), residual and embedding dropout |
//! | `phi` | LayerNorm, one norm feeding attention and MLP in parallel, partial rotary, `lm_head` bias |
//! | `gpt_neox` | fused biased `query_key_value`, two norms in parallel (`use_parallel_residual`), partial rotary |
//! | `falcon` | fused `query_key_value` with multi-query or grouped K/V, parallel or sequential, bias-free linears |
//! | `opt` | learned positions (offset 2), ReLU MLP, optional `project_in`/`project_out`, pre- or post-norm |
//! | `starcoder2` | LayerNorm, biased plain GELU-tanh MLP, grouped K/V, sliding window |

use crate::import::decoder::{DecoderModules, LLAMA_MODULES, MAX_DEFAULT_SEQ_LEN};
use crate::import::fields::{dropout, pick, Fields};
use crate::error::{Error, Result};
use crate::layer::activation::{LogitSoftcap, Scale};
use crate::layer::transformer::{FfnActivation, NormKind, ParallelNorms, TransformerLayer};
use crate::layer::embedding::{Embedding, PositionalEmbedding};
use crate::layer::linear::Linear;
use crate::layer::norm::{LayerNorm, RmsNorm};
use crate::presets;
use crate::spec::{InputDType, InputSpec, Layer, Loss, ModelSpec, SPEC_VERSION};
use serde_json::Value;

/// More decoder layers than this is not a real config (and would build a huge spec).
pub(super) const MAX_LAYERS: u64 = 10_000;

/// A decoder-only language model as the importers assemble it.
pub(super) struct Decoder {
    pub(super) name: String,
    pub(super) vocab: u64,
    pub(super) embed_dim: u64,
    pub(super) after_embed: Vec<Layer>,
    pub(super) layers: Vec<TransformerLayer>,
    pub(super) final_norm: Option<Layer>,
    pub(super) after_norm: Vec<Layer>,
    pub(super) head: Option<Linear>,
    pub(super) after_head: Vec<Layer>,
    pub(super) seq_len: u64,
    pub(super) modules: DecoderModules,
}

impl Decoder {
    /// The spec, its parts named `modules`.
    pub(super) fn named(self, modules: DecoderModules) -> ModelSpec {
        Decoder { modules, ..self }.build()
    }

    pub(super) fn build(self) -> ModelSpec {
        let mut layers =
            vec![Layer::Embedding(Embedding { num_embeddings: self.vocab, embedding_dim: self.embed_dim, padding_idx: None, tied_weight: false })];
        layers.extend(self.after_embed);
        let first_run = layers.len();
        layers.extend(runs(self.layers));
        let runs = first_run..layers.len();
        let norm = self.final_norm.map(|norm| {
            layers.push(norm);
            layers.len() - 1
        });
        layers.extend(self.after_norm);
        let head = self.head.map(|h| {
            layers.push(Layer::Linear(h));
            layers.len() - 1
        });
        layers.extend(self.after_head);
        let names = self.modules.names(runs, norm, head);
        ModelSpec {
            version: SPEC_VERSION,
            name: Some(self.name),
            input: InputSpec { shape: vec![self.seq_len], dtype: InputDType::Int64, vocab_size: Some(self.vocab) },
            layers,
            loss: Loss::CrossEntropy,
            names,
            unquantised: None,
        }
    }
}

/// Consecutive equal layers as one `repeat` each, so that a sliding/full pattern stays readable
/// and every layer remains its own checkpointing unit.
fn runs(layers: Vec<TransformerLayer>) -> Vec<Layer> {
    let mut out: Vec<(u64, TransformerLayer)> = Vec::new();
    for l in layers {
        match out.last_mut() {
            Some((n, last)) if *last == l => *n += 1,
            _ => out.push((1, l)),
        }
    }
    out.into_iter().map(|(times, l)| Layer::Repeat { times, body: vec![Layer::TransformerDecoderLayer(l)] }).collect()
}

/// `key`'s layer count, refused above [`MAX_LAYERS`] (a hostile config must not build a huge spec).
pub(super) fn layer_count(c: &Fields, key: &str, default: u64) -> Result<u64> {
    let n = c.size(key, default)?;
    if n > MAX_LAYERS {
        return Err(Error::Import(format!("field `{key}` ({n}) is more than {MAX_LAYERS} layers")));
    }
    Ok(n)
}

/// Each layer's sliding window: from `layer_types` when given, else `default_sliding(i)`.
/// A `sliding_attention` layer with no `sliding_window` attends to everything (as transformers).
fn windows(c: &Fields, n: u64, window: Option<u64>, default_sliding: impl Fn(u64) -> bool) -> Result<Vec<Option<u64>>> {
    if window == Some(0) {
        return Err(Error::Import("field `sliding_window` must be at least 1".into()));
    }
    match c.get("layer_types") {
        None => Ok((0..n).map(|i| if default_sliding(i) { window } else { None }).collect()),
        Some(Value::Array(a)) if a.len() as u64 == n => a
            .iter()
            .map(|t| match t.as_str() {
                Some("full_attention") => Ok(None),
                Some("sliding_attention") => Ok(window),
                _ => Err(Error::Import(format!(
                    "field `layer_types`: `{t}` is not supported (full_attention, sliding_attention)"
                ))),
            })
            .collect(),
        Some(v) => Err(Fields::wrong("layer_types", &format!("a list of {n} layer types"), v)),
    }
}

/// `partial_rotary_factor` from `rope_parameters` (transformers 5) or the top level / `legacy`
/// key, as `int(head_dim * factor)` rotated features per head: `(rotary, rotary_dim)` for the
/// layer (no rotary at all when that is 0; `None` when it is the whole head).
pub(super) fn rotary_dim(c: &Fields, legacy: &str, default: f64, head_dim: u64) -> Result<(bool, Option<u64>)> {
    let nested = match c.get("rope_parameters") {
        Some(Value::Object(m)) => m.get("partial_rotary_factor").filter(|v| !v.is_null()).cloned(),
        _ => None,
    };
    let factor = match nested {
        Some(v) => v.as_f64().ok_or_else(|| Fields::wrong("rope_parameters.partial_rotary_factor", "a number", &v))?,
        None if c.get(legacy).is_some() => c.float(legacy, default)?,
        None => c.float("partial_rotary_factor", default)?,
    };
    if !(factor > 0.0 && factor <= 1.0) {
        return Err(Error::Import(format!("partial rotary factor {factor} must be in (0, 1]")));
    }
    let rd = (head_dim as f64 * factor) as u64;
    if !rd.is_multiple_of(2) {
        return Err(Error::Import(format!("partial rotary: {rd} rotated features per head (head_dim {head_dim} × {factor}) must be even")));
    }
    Ok((rd > 0, (rd < head_dim && rd > 0).then_some(rd)))
}

/// A positive soft-capping value, or `None` when absent/`null`.
fn softcap(c: &Fields, key: &str, default: Option<f64>) -> Result<Option<f64>> {
    match c.get(key) {
        None if c.0.contains_key(key) => Ok(None),
        None => Ok(default),
        Some(v) => v.as_f64().filter(|f| f.is_finite() && *f > 0.0).map(Some).ok_or_else(|| Fields::wrong(key, "a positive number", v)),
    }
}

pub(super) fn divisible(h: u64, heads: u64) -> Result<()> {
    if !h.is_multiple_of(heads) {
        return Err(Error::Import(format!("hidden_size ({h}) must be divisible by num_attention_heads ({heads})")));
    }
    Ok(())
}

/// A decoder with `n` equal layers, a final biased LayerNorm and an unbiased or biased head.
pub(super) fn layer_norm_decoder(
    name: String,
    vocab: u64,
    after_embed: Vec<Layer>,
    layer: TransformerLayer,
    n: u64,
    head: Option<Linear>,
    max_pos: u64,
) -> Decoder {
    let (h, eps) = (layer.d_model, layer.layer_norm_eps);
    Decoder {
        name,
        vocab,
        embed_dim: h,
        after_embed,
        layers: vec![layer; n as usize],
        final_norm: Some(Layer::LayerNorm(LayerNorm { normalized_shape: h, eps, elementwise_affine: true, bias: true })),
        after_norm: vec![],
        head,
        after_head: vec![],
        seq_len: max_pos.min(MAX_DEFAULT_SEQ_LEN),
        modules: LLAMA_MODULES,
    }
}

pub(super) fn head_for(class: &str, causal_lm: &str, h: u64, vocab: u64, tied: bool, bias: bool) -> Option<Linear> {
    (class == causal_lm).then_some(Linear { in_features: h, out_features: vocab, bias, tied_weight: tied })
}

/// Fields of the LLaMA-like families that change neither parameters nor memory.
pub(super) const IGNORED_LLAMA_LIKE: &[&str] = &[
    "pretraining_tp", "query_pre_attn_scalar", "rope_local_base_freq", "cache_implementation",
    "original_max_position_embeddings",
];

/// `mistral`, `qwen2`, `qwen3`, `gemma`, `gemma2`, `gemma3_text`, `phi3`.
pub(super) fn llama_like(c: &Fields, arch: Option<&str>, model_type: &str) -> Result<ModelSpec> {
    // (CausalLM class, base class, vocab, hidden, intermediate, layers, heads, kv heads, head_dim, max positions, eps, tied)
    type D = (&'static str, &'static str, u64, u64, u64, u64, u64, Option<u64>, Option<u64>, u64, f64, bool);
    let d: D = match model_type {
        "mistral" => ("MistralForCausalLM", "MistralModel", 32000, 4096, 14336, 32, 32, Some(8), None, 131072, 1e-6, false),
        "qwen2" => ("Qwen2ForCausalLM", "Qwen2Model", 151936, 4096, 22016, 32, 32, Some(32), None, 32768, 1e-6, false),
        "qwen3" => ("Qwen3ForCausalLM", "Qwen3Model", 151936, 4096, 22016, 32, 32, Some(32), Some(128), 32768, 1e-6, false),
        "gemma" => ("GemmaForCausalLM", "GemmaModel", 256000, 3072, 24576, 28, 16, Some(16), Some(256), 8192, 1e-6, true),
        "gemma2" => ("Gemma2ForCausalLM", "Gemma2Model", 256000, 2304, 9216, 26, 8, Some(4), Some(256), 8192, 1e-6, true),
        "gemma3_text" => ("Gemma3ForCausalLM", "Gemma3TextModel", 262208, 2304, 9216, 26, 8, Some(4), Some(256), 131072, 1e-6, true),
        _ => ("Phi3ForCausalLM", "Phi3Model", 32064, 3072, 8192, 32, 32, None, None, 4096, 1e-5, false),
    };
    let (causal_lm, base, vocab, h, inter, n, heads, kv, hd, max_pos, eps, tied) = d;
    let (class, name) = pick(arch, &[causal_lm, base], base);
    let gemma = model_type.starts_with("gemma");
    let h = c.size("hidden_size", h)?;
    let heads = c.size("num_attention_heads", heads)?;
    let kv_heads = c.size("num_key_value_heads", kv.unwrap_or(heads))?;
    let head_dim = match c.opt_int("head_dim")? {
        Some(0) => return Err(Error::Import("field `head_dim` must be at least 1".into())),
        Some(x) => Some(x),
        None => hd,
    };
    let head_dim_value = head_dim.unwrap_or(h / heads);
    if head_dim.is_none() && !h.is_multiple_of(heads) {
        return Err(Error::Import(format!("hidden_size ({h}) must be divisible by num_attention_heads ({heads}) when `head_dim` is not given")));
    }
    let vocab = c.size("vocab_size", vocab)?;
    let n = layer_count(c, "num_hidden_layers", n)?;
    let eps = c.float("rms_norm_eps", eps)?;
    let max_pos = c.size("max_position_embeddings", max_pos)?;
    let tied = c.flag("tie_word_embeddings", tied)?;
    let act_default = if gemma { FfnActivation::GeluTanh } else { FfnActivation::Silu };
    // Gemma reads `hidden_activation`, falling back to `hidden_act`
    let fallback = c.activation("hidden_act", act_default)?;
    let activation = c.activation("hidden_activation", fallback)?;
    // biases: qwen2 has Q/K/V biases only; qwen3 and gemma an `attention_bias` switch for all four
    let (qkv_bias, out_bias) = match model_type {
        "qwen2" => (true, false),
        "mistral" => (false, false),
        "phi3" => {
            // published Phi-3 configs carry `attention_bias: false`; `Phi3Attention` reads no such field
            c.get("attention_bias");
            (false, false)
        }
        _ => {
            let b = c.flag("attention_bias", false)?;
            (b, b)
        }
    };
    if c.flag("mlp_bias", false)? {
        return Err(Error::Import(format!("field `mlp_bias`: true is not part of `{model_type}`")));
    }
    if c.flag("use_bidirectional_attention", false)? {
        return Err(Error::Import("field `use_bidirectional_attention`: bidirectional Gemma is not supported".into()));
    }
    let (resid, embd) = if model_type == "phi3" { (c.prob("resid_pdrop", 0.0)?, c.prob("embd_pdrop", 0.0)?) } else { (0.0, 0.0) };
    let (rotary, rotary_part) =
        if model_type == "phi3" { rotary_dim(c, "partial_rotary_factor", 1.0, head_dim_value)? } else { (true, None) };
    let window_default = match model_type {
        "mistral" | "gemma2" | "gemma3_text" | "qwen2" | "qwen3" => Some(4096),
        _ => None,
    };
    let window = match model_type {
        "gemma" => None,
        "qwen2" | "qwen3" if !c.flag("use_sliding_window", false)? => {
            c.get("sliding_window");
            None
        }
        _ => c.opt_int("sliding_window")?.or(if c.0.contains_key("sliding_window") { None } else { window_default }),
    };
    let max_window_layers = if model_type.starts_with("qwen") { c.int("max_window_layers", 28)? } else { 0 };
    // transformers 5 writes the legacy pattern as `_sliding_window_pattern`
    let pattern = if model_type == "gemma3_text" {
        let legacy = c.size("_sliding_window_pattern", 6)?;
        c.size("sliding_window_pattern", legacy)?
    } else {
        6
    };
    let windows = windows(c, n, window, |i| match model_type {
        "gemma2" => i % 2 == 0,
        "gemma3_text" => !(i + 1).is_multiple_of(pattern),
        "qwen2" | "qwen3" => i >= max_window_layers,
        _ => true,
    })?;
    let attn_cap = if model_type == "gemma2" { softcap(c, "attn_logit_softcapping", Some(50.0))? } else if model_type == "gemma3_text" { softcap(c, "attn_logit_softcapping", None)? } else { None };
    let final_cap = match model_type {
        "gemma2" => softcap(c, "final_logit_softcapping", Some(30.0))?,
        "gemma3_text" => softcap(c, "final_logit_softcapping", None)?,
        _ => None,
    };
    let layer = TransformerLayer {
        dropout: resid,
        attention_dropout: Some(c.prob("attention_dropout", 0.0)?),
        activation,
        layer_norm_eps: eps,
        norm_first: true,
        bias: qkv_bias,
        out_bias: (out_bias != qkv_bias).then_some(out_bias),
        mlp_bias: qkv_bias.then_some(false),
        norm: NormKind::RmsNorm,
        gated_mlp: true,
        num_kv_heads: (kv_heads != heads).then_some(kv_heads),
        rotary,
        rotary_dim: rotary_part,
        fused_qkv: model_type == "phi3",
        fused_gate_up: model_type == "phi3",
        head_dim,
        qk_norm: matches!(model_type, "qwen3" | "gemma3_text"),
        post_norms: matches!(model_type, "gemma2" | "gemma3_text"),
        logit_softcap: attn_cap,
        ..presets::transformer_layer(h, heads, c.size("intermediate_size", inter)?)
    };
    // Gemma 3's sliding layers read the local rotary pair (`rope_local_base_freq`), made beside
    // the global one when both layer types are there (`Gemma3TextModel.forward`)
    let two_tables = model_type == "gemma3_text" && windows.iter().any(Option::is_some) && windows.iter().any(Option::is_none);
    let layers = windows
        .into_iter()
        .map(|w| TransformerLayer { sliding_window: w, rotary_local: two_tables && w.is_some(), ..layer.clone() })
        .collect();
    let mut after_embed = Vec::new();
    if gemma {
        // `hidden_states * normalizer` (Gemma 3: `embed_tokens` scales by `embed_scale`)
        after_embed.push(Layer::Scale(Scale { factor: (h as f64).sqrt(), rebinds_embeds: false }));
    }
    if embd > 0.0 {
        after_embed.push(dropout(embd)?);
    }
    c.refuse_unknown(model_type, IGNORED_LLAMA_LIKE)?;
    Ok(Decoder {
        name,
        vocab,
        embed_dim: h,
        after_embed,
        layers,
        final_norm: Some(Layer::RmsNorm(RmsNorm { normalized_shape: h, eps, t5: false })),
        after_norm: vec![],
        head: head_for(class, causal_lm, h, vocab, tied, false),
        after_head: final_cap.map(|cap| Layer::LogitSoftcap(LogitSoftcap { cap })).into_iter().collect(),
        seq_len: max_pos.min(MAX_DEFAULT_SEQ_LEN),
        modules: LLAMA_MODULES,
    }
    .build())
}

/// `PhiConfig` (transformers): defaults are phi-2's.
pub(super) fn phi(c: &Fields, arch: Option<&str>) -> Result<ModelSpec> {
    let (class, name) = pick(arch, &["PhiForCausalLM", "PhiModel"], "PhiModel");
    let h = c.size("hidden_size", 2048)?;
    let heads = c.size("num_attention_heads", 32)?;
    let kv_heads = c.size("num_key_value_heads", heads)?;
    divisible(h, heads)?;
    let vocab = c.size("vocab_size", 51200)?;
    let eps = c.float("layer_norm_eps", 1e-5)?;
    let resid = c.prob("resid_pdrop", 0.0)?;
    let (rotary, rotary_dim) = rotary_dim(c, "partial_rotary_factor", 0.5, h / heads)?;
    let layer = TransformerLayer {
        dropout: resid,
        attention_dropout: Some(c.prob("attention_dropout", 0.0)?),
        activation: c.activation("hidden_act", FfnActivation::GeluNew)?,
        layer_norm_eps: eps,
        norm_first: true,
        num_kv_heads: (kv_heads != heads).then_some(kv_heads),
        rotary,
        rotary_dim,
        qk_norm: c.flag("qk_layernorm", false)?,
        parallel: Some(ParallelNorms::Shared),
        ..presets::transformer_layer(h, heads, c.size("intermediate_size", 8192)?)
    };
    let n = layer_count(c, "num_hidden_layers", 24)?;
    let max_pos = c.size("max_position_embeddings", 2048)?;
    let embd = c.prob("embd_pdrop", 0.0)?;
    let tied = c.flag("tie_word_embeddings", false)?;
    c.refuse_unknown("phi", &[])?;
    Ok(layer_norm_decoder(name, vocab, vec![dropout(embd)?], layer, n, head_for(class, "PhiForCausalLM", h, vocab, tied, true), max_pos).named(DecoderModules { norm: "model.final_layernorm", ..LLAMA_MODULES }))
}

/// `GPTNeoXConfig` (transformers): defaults are GPT-NeoX-20B's.
pub(super) fn gpt_neox(c: &Fields, arch: Option<&str>) -> Result<ModelSpec> {
    let (class, name) = pick(arch, &["GPTNeoXForCausalLM", "GPTNeoXModel"], "GPTNeoXModel");
    let h = c.size("hidden_size", 6144)?;
    let heads = c.size("num_attention_heads", 64)?;
    divisible(h, heads)?;
    let vocab = c.size("vocab_size", 50432)?;
    let eps = c.float("layer_norm_eps", 1e-5)?;
    let hidden_dropout = c.prob("hidden_dropout", 0.0)?;
    let attention_bias = c.flag("attention_bias", true)?;
    let (rotary, rotary_dim) = rotary_dim(c, "rotary_pct", 0.25, h / heads)?;
    let layer = TransformerLayer {
        dropout: hidden_dropout,
        attention_dropout: Some(c.prob("attention_dropout", 0.0)?),
        activation: c.activation("hidden_act", FfnActivation::Gelu)?,
        layer_norm_eps: eps,
        norm_first: true,
        bias: attention_bias,
        mlp_bias: (!attention_bias).then_some(true),
        norm_bias: (!attention_bias).then_some(true),
        rotary,
        rotary_dim,
        fused_qkv: true,
        parallel: c.flag("use_parallel_residual", true)?.then_some(ParallelNorms::Separate),
        ..presets::transformer_layer(h, heads, c.size("intermediate_size", 24576)?)
    };
    let n = layer_count(c, "num_hidden_layers", 44)?;
    let max_pos = c.size("max_position_embeddings", 2048)?;
    let tied = c.flag("tie_word_embeddings", false)?;
    c.refuse_unknown("gpt_neox", &["rotary_emb_base", "classifier_dropout"])?;
    Ok(layer_norm_decoder(name, vocab, vec![dropout(hidden_dropout)?], layer, n, head_for(class, "GPTNeoXForCausalLM", h, vocab, tied, false), max_pos).named(DecoderModules { embed: "gpt_neox.embed_in", layers: "gpt_neox.layers", norm: "gpt_neox.final_layer_norm", head: "embed_out" }))
}

/// `FalconConfig` (transformers): defaults are Falcon-7B's (multi-query, parallel attention).
pub(super) fn falcon(c: &Fields, arch: Option<&str>) -> Result<ModelSpec> {
    let (class, name) = pick(arch, &["FalconForCausalLM", "FalconModel"], "FalconModel");
    if c.flag("alibi", false)? {
        return Err(Error::Import("field `alibi`: ALiBi attention is not modelled".into()));
    }
    let h = c.size("hidden_size", 4544)?;
    let heads = c.size("num_attention_heads", 71)?;
    divisible(h, heads)?;
    let new_arch = c.flag("new_decoder_architecture", false)?;
    let multi_query = c.flag("multi_query", true)?;
    let parallel_attn = c.flag("parallel_attn", true)?;
    let kv_config = c.size("num_kv_heads", heads)?;
    // FalconAttention's `qkv_out_dim`: grouped K/V only with the new architecture, else one
    // shared K/V head (multi-query) or `3 × hidden` (`num_kv_heads` then unused)
    let kv_heads = match (new_arch, multi_query) {
        (true, _) => kv_config,
        (false, true) => 1,
        (false, false) => heads,
    };
    // FalconDecoderLayer: `num_ln_in_parallel_attn` defaults to 2 with the new architecture
    let num_ln = c.opt_int("num_ln_in_parallel_attn")?.unwrap_or(if new_arch { 2 } else { 1 });
    let parallel = match (new_arch, parallel_attn, num_ln) {
        (false, false, _) => None,
        (false, true, _) | (true, true, 1) => Some(ParallelNorms::Shared),
        (true, true, 2) => Some(ParallelNorms::Separate),
        _ => {
            return Err(Error::Import(format!(
                "new_decoder_architecture {new_arch} with parallel_attn {parallel_attn} and num_ln_in_parallel_attn {num_ln} is not a layout transformers builds"
            )))
        }
    };
    let hidden_dropout = c.prob("hidden_dropout", 0.0)?;
    let attention_dropout = c.prob("attention_dropout", 0.0)?;
    if parallel.is_some() && hidden_dropout > 0.0 {
        return Err(Error::Import("field `hidden_dropout`: Falcon's one dropout on the sum of parallel attention and MLP is not modelled (only 0)".into()));
    }
    if parallel.is_none() && attention_dropout != hidden_dropout {
        return Err(Error::Import("fields `attention_dropout` and `hidden_dropout` differ: sequential Falcon's residual dropouts are modelled only when equal".into()));
    }
    let vocab = c.size("vocab_size", 65024)?;
    let eps = c.float("layer_norm_epsilon", 1e-5)?;
    let bias = c.flag("bias", false)?;
    let ffn = match c.opt_int("ffn_hidden_size")? {
        Some(0) => return Err(Error::Import("field `ffn_hidden_size` must be at least 1".into())),
        Some(f) => f,
        None => h.saturating_mul(4),
    };
    let layer = TransformerLayer {
        dropout: hidden_dropout,
        attention_dropout: Some(attention_dropout),
        activation: c.activation("activation", FfnActivation::Gelu)?,
        layer_norm_eps: eps,
        norm_first: true,
        bias,
        norm_bias: (!bias).then_some(true),
        num_kv_heads: (kv_heads != heads).then_some(kv_heads),
        rotary: true,
        fused_qkv: true,
        parallel,
        ..presets::transformer_layer(h, heads, ffn)
    };
    let n = layer_count(c, "num_hidden_layers", 32)?;
    let max_pos = c.size("max_position_embeddings", 2048)?;
    let tied = c.flag("tie_word_embeddings", true)?;
    c.refuse_unknown("falcon", &[])?;
    Ok(layer_norm_decoder(name, vocab, vec![], layer, n, head_for(class, "FalconForCausalLM", h, vocab, tied, false), max_pos).named(DecoderModules { embed: "transformer.word_embeddings", layers: "transformer.h", norm: "transformer.ln_f", head: "lm_head" }))
}

/// `OPTConfig` (transformers): defaults are OPT-125m's.
pub(super) fn opt(c: &Fields, arch: Option<&str>) -> Result<ModelSpec> {
    let (class, name) = pick(arch, &["OPTForCausalLM", "OPTModel"], "OPTModel");
    if !c.flag("layer_norm_elementwise_affine", true)? {
        return Err(Error::Import("field `layer_norm_elementwise_affine`: false is not supported".into()));
    }
    let h = c.size("hidden_size", 768)?;
    let heads = c.size("num_attention_heads", 12)?;
    divisible(h, heads)?;
    let proj = c.size("word_embed_proj_dim", h)?;
    let vocab = c.size("vocab_size", 50272)?;
    let pre_norm = c.flag("do_layer_norm_before", true)?;
    let p = c.prob("dropout", 0.1)?;
    let layer = TransformerLayer {
        dropout: p,
        attention_dropout: Some(c.prob("attention_dropout", 0.0)?),
        activation: c.activation("activation_function", FfnActivation::Relu)?,
        norm_first: pre_norm,
        bias: c.flag("enable_bias", true)?,
        norm_bias: Some(true),
        ..presets::transformer_layer(h, heads, c.size("ffn_dim", 3072)?)
    };
    let n = layer_count(c, "num_hidden_layers", 12)?;
    let max_pos = c.size("max_position_embeddings", 2048)?;
    let mut after_embed = Vec::new();
    let project = |i, o| Layer::Linear(Linear { in_features: i, out_features: o, bias: false, tied_weight: false });
    if proj != h {
        after_embed.push(project(proj, h));
    }
    // OPTLearnedPositionalEmbedding: `max_position_embeddings + 2` rows, ids from the attention mask
    after_embed.push(Layer::PositionalEmbedding(PositionalEmbedding {
        num_embeddings: max_pos.saturating_add(2),
        embedding_dim: h,
        per_sample: true,
        index_buffer: 0,
        inplace: false,
        batched: false,
    }));
    let remove_final = c.flag("_remove_final_layer_norm", false)?;
    let final_norm = (pre_norm && !remove_final)
        .then_some(Layer::LayerNorm(LayerNorm { normalized_shape: h, eps: 1e-5, elementwise_affine: true, bias: true }));
    let tied = c.flag("tie_word_embeddings", true)?;
    c.refuse_unknown("opt", &["layerdrop"])?;
    let spec = Decoder {
        name,
        vocab,
        embed_dim: proj,
        after_embed,
        layers: vec![layer; n as usize],
        final_norm,
        after_norm: if proj != h { vec![project(h, proj)] } else { vec![] },
        head: head_for(class, "OPTForCausalLM", proj, vocab, tied, false),
        after_head: vec![],
        seq_len: max_pos.min(MAX_DEFAULT_SEQ_LEN),
        modules: DecoderModules { embed: "model.decoder.embed_tokens", layers: "model.decoder.layers", norm: "model.decoder.final_layer_norm", head: "lm_head" },
    }
    .build();
    Ok(spec)
}

/// `Starcoder2Config` (transformers): defaults are StarCoder2-7B's.
pub(super) fn starcoder2(c: &Fields, arch: Option<&str>) -> Result<ModelSpec> {
    let (class, name) = pick(arch, &["Starcoder2ForCausalLM", "Starcoder2Model"], "Starcoder2Model");
    let h = c.size("hidden_size", 3072)?;
    let heads = c.size("num_attention_heads", 24)?;
    divisible(h, heads)?;
    let kv_heads = c.size("num_key_value_heads", 2)?;
    let vocab = c.size("vocab_size", 49152)?;
    let eps = c.float("norm_epsilon", 1e-5)?;
    let use_bias = c.flag("use_bias", true)?;
    let n = layer_count(c, "num_hidden_layers", 30)?;
    let window = c.opt_int("sliding_window")?;
    let layer = TransformerLayer {
        dropout: c.prob("residual_dropout", 0.0)?,
        attention_dropout: Some(c.prob("attention_dropout", 0.0)?),
        activation: c.activation("hidden_act", FfnActivation::GeluTanh)?,
        layer_norm_eps: eps,
        norm_first: true,
        bias: use_bias,
        norm_bias: (!use_bias).then_some(true),
        num_kv_heads: (kv_heads != heads).then_some(kv_heads),
        rotary: true,
        sliding_window: window,
        ..presets::transformer_layer(h, heads, c.size("intermediate_size", 12288)?)
    };
    if window == Some(0) {
        return Err(Error::Import("field `sliding_window` must be at least 1".into()));
    }
    let max_pos = c.size("max_position_embeddings", 4096)?;
    let embd = c.prob("embedding_dropout", 0.0)?;
    let tied = c.flag("tie_word_embeddings", true)?;
    c.refuse_unknown("starcoder2", &[])?;
    Ok(layer_norm_decoder(name, vocab, vec![dropout(embd)?], layer, n, head_for(class, "Starcoder2ForCausalLM", h, vocab, tied, false), max_pos).named(LLAMA_MODULES))
}
