//! `modernbert`: as transformers 5.24's `modeling_modernbert.py` builds
//! `ModernBertForSequenceClassification` and `ModernBertModel`:
//! - `ModernBertEmbeddings`: `tok_embeddings`, `norm` (LayerNorm, bias per `norm_bias`), dropout;
//! - `ModernBertEncoderLayer`: `x + attn(attn_norm(x))` — `attn_norm` is `nn.Identity` in layer 0
//!   — with the fused `Wqkv` and `Wo` (biases per `attention_bias`), rotary; then
//!   `x + mlp(mlp_norm(x))`, the GLU MLP `Wo(act(input) · gate)` of `Wi: [D → 2·intermediate]`
//!   (written as a `gated_mlp`: the same weights, biases per `mlp_bias`);
//! - `final_norm`; the classifier: `[CLS]` (`classifier_pooling: "cls"`), `ModernBertPredictionHead`
//!   (`dense` with `classifier_bias`, `classifier_activation`, LayerNorm), dropout, `classifier`.
//!
//! The local layers (`layer_types`' `sliding_attention`; without it every layer but each
//! `global_attn_every_n_layers`-th, `ModernBertConfig.__post_init__`) attend within
//! `local_attention // 2` tokens either side (`ModernBertAttention.sliding_window =
//! config.sliding_window + 1`): a `sliding_window` on their attention, so that under SDPA a
//! sequence longer than the window takes the explicit-mask path, as
//! `create_bidirectional_sliding_window_mask` makes it (eager attention materialises the whole
//! `[H, S, S]` scores either way). Refused by name: `classifier_pooling: "mean"`, `mlp_dropout`
//! above 0.

use super::parts::{activation, layer, residual};
use crate::error::{Error, Result};
use crate::import::fields::{dropout, pick, Fields};
use crate::presets;
use crate::spec::{Layer, ModelSpec};
use serde_json::json;

const IGNORED_MODERNBERT: &[&str] = &[
    "initializer_cutoff_factor", "global_rope_theta",
    "local_rope_theta", "deterministic_flash_attn", "sparse_prediction", "sparse_pred_ignore_index", "decoder_bias",
    "tie_word_embeddings", "reference_compile", "repad_logits_with_grad", "hidden_act",
];

/// `ModernBertConfig` (transformers 5.24): defaults are ModernBERT-base's.
pub(super) fn modernbert(c: &Fields, arch: Option<&str>) -> Result<ModelSpec> {
    let (class, name) = pick(arch, &["ModernBertForSequenceClassification", "ModernBertModel"], "ModernBertModel");
    let h = c.size("hidden_size", 768)?;
    let heads = c.size("num_attention_heads", 12)?;
    let inter = c.size("intermediate_size", 1152)?;
    let n = super::dense::layer_count(c, "num_hidden_layers", 22)?;
    let vocab = c.size("vocab_size", 50368)?;
    let eps = c.float("norm_eps", 1e-5)?;
    let norm_bias = c.flag("norm_bias", false)?;
    let attn_bias = c.flag("attention_bias", false)?;
    let mlp_bias = c.flag("mlp_bias", false)?;
    let max_pos = c.size("max_position_embeddings", 8192)?;
    c.activation("hidden_activation", crate::layer::transformer::FfnActivation::Gelu)?;
    super::dense::divisible(h, heads)?;
    let norm = || layer(json!({"kind": "layer_norm", "normalized_shape": h, "eps": eps, "bias": norm_bias}));
    let attn_p = c.prob("attention_dropout", 0.0)?;
    if c.prob("mlp_dropout", 0.0)? > 0.0 {
        return Err(Error::Import("field `mlp_dropout`: above 0 is not supported (a dropout inside the GLU)".into()));
    }
    // `sliding_window` is `local_attention // 2` (a property of the config class)
    let half = match c.opt_int("sliding_window")? {
        Some(w) => w,
        None => c.size("local_attention", 128)? / 2,
    };
    let every = c.size("global_attn_every_n_layers", 3)?;
    let sliding: Vec<bool> = match c.get("layer_types") {
        None => (0..n).map(|i| i % every != 0).collect(),
        Some(serde_json::Value::Array(a)) if a.len() as u64 == n => a
            .iter()
            .map(|t| match t.as_str() {
                Some("sliding_attention") => Ok(true),
                Some("full_attention") => Ok(false),
                _ => Err(Error::Import(format!("field `layer_types`: `{t}` is not a ModernBERT layer type (full_attention, sliding_attention)"))),
            })
            .collect::<Result<_>>()?,
        Some(v) => return Err(Fields::wrong("layer_types", &format!("a list of {n} layer types"), v)),
    };
    let attn = |local: bool| {
        let mut a = json!({"kind": "multihead_attention", "embed_dim": h, "num_heads": heads, "dropout": attn_p, "bias": attn_bias,
            "fused_qkv": true, "rotary": true});
        if local {
            a["sliding_window"] = json!(half.saturating_add(1));
        }
        layer(a)
    };
    let block = |first: bool, local: bool| -> Result<Vec<Layer>> {
        let mut a = if first { vec![] } else { vec![norm()?] };
        a.push(attn(local)?);
        if attn_p > 0.0 {
            // `out_drop` on the attention output
            a.push(dropout(attn_p)?);
        }
        let mlp = vec![norm()?, layer(json!({"kind": "gated_mlp", "hidden_size": h, "intermediate_size": inter, "bias": mlp_bias}))?];
        Ok(vec![residual(a), residual(mlp)])
    };
    let mut layers = vec![
        layer(json!({"kind": "embedding", "num_embeddings": vocab, "embedding_dim": h}))?,
        norm()?,
        dropout(c.prob("embedding_dropout", 0.0)?)?,
    ];
    // layer 0 (no attn_norm), then runs of equal layers as `repeat`s
    layers.extend(block(true, sliding[0])?);
    let mut i = 1;
    while i < sliding.len() {
        let run = sliding[i..].iter().take_while(|&&s| s == sliding[i]).count();
        layers.push(Layer::Repeat { times: run as u64, body: block(false, sliding[i])? });
        i += run;
    }
    layers.push(norm()?);
    if class == "ModernBertForSequenceClassification" {
        if c.str("classifier_pooling")?.unwrap_or("cls") != "cls" {
            return Err(Error::Import("field `classifier_pooling`: only \"cls\" is supported (the masked mean is not modelled)".into()));
        }
        let labels = c.num_labels()?;
        if labels == 0 {
            return Err(Error::Import("ModernBertForSequenceClassification needs at least 1 label (`num_labels` / `id2label`)".into()));
        }
        layers.push(layer(json!({"kind": "select_token", "index": 0}))?);
        layers.push(layer(json!({"kind": "linear", "in_features": h, "out_features": h, "bias": c.flag("classifier_bias", false)?}))?);
        layers.push(activation("classifier_activation", c.str("classifier_activation")?.unwrap_or("gelu"))?);
        layers.push(norm()?);
        layers.push(dropout(c.prob("classifier_dropout", 0.0)?)?);
        layers.push(layer(json!({"kind": "linear", "in_features": h, "out_features": labels}))?);
    } else {
        for key in ["classifier_pooling", "classifier_bias", "classifier_activation", "classifier_dropout"] {
            c.get(key);
        }
    }
    c.refuse_unknown("modernbert", IGNORED_MODERNBERT)?;
    Ok(presets::token_model(&name, crate::presets::BertConfig::base().seq_len.min(max_pos), vocab, layers))
}
