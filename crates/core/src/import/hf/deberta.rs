//! `deberta-v2`: as transformers 5.24's `modeling_deberta_v2.py` builds
//! `DebertaV2ForSequenceClassification` and `DebertaV2Model`:
//! - `DebertaV2Embeddings`: `word_embeddings` (`embedding_size`, default hidden), absolute
//!   `position_embeddings` only with `position_biased_input`, `token_type_embeddings` when
//!   `type_vocab_size > 0`, `embed_proj` when `embedding_size` differs, LayerNorm, `* mask`,
//!   dropout;
//! - `DebertaV2Encoder`: `rel_embeddings` (`2 × span` rows) and its LayerNorm per `norm_rel_ebd`
//!   with `relative_attention` (the `relative_embeddings` layer), then post-norm BERT layers whose
//!   attention is `DisentangledSelfAttention` (the `disentangled_attention` layer: `pos_att_type`,
//!   `share_att_key`, `position_buckets`, `max_relative_positions`);
//! - the classifier: `ContextPooler` (`[CLS]`, dropout, `dense`, `pooler_hidden_act`), dropout
//!   (`cls_dropout`, default `hidden_dropout_prob`), `classifier`.
//!
//! Refused by name: `conv_kernel_size` > 0 (the `ConvLayer` after the first layer, DeBERTa-v2
//! xlarge's), an `attention_head_size` other than `hidden / heads` and a `pooler_hidden_size`
//! other than `hidden_size` (with either the class does not run), unknown `pos_att_type` entries.

use super::parts::{activation, layer, residual};
use crate::error::{Error, Result};
use crate::import::fields::{dropout, pick, Fields};
use crate::presets;
use crate::spec::{Layer, ModelSpec};
use serde_json::{json, Value};

/// `DebertaV2Config` (transformers 5.24): defaults are DeBERTa-v2-xlarge's sizes.
pub(super) fn deberta_v2(c: &Fields, arch: Option<&str>) -> Result<ModelSpec> {
    let (class, name) = pick(arch, &["DebertaV2ForSequenceClassification", "DebertaV2Model"], "DebertaV2Model");
    let h = c.size("hidden_size", 1536)?;
    let heads = c.size("num_attention_heads", 24)?;
    super::dense::divisible(h, heads)?;
    if let Some(hd) = c.opt_int("attention_head_size")? {
        if hd != h / heads {
            return Err(Error::Import(format!("field `attention_head_size` ({hd}): DebertaV2SelfOutput's dense is hidden × hidden, so only hidden / heads ({}) runs", h / heads)));
        }
    }
    let n = super::dense::layer_count(c, "num_hidden_layers", 24)?;
    let inter = c.size("intermediate_size", 6144)?;
    let vocab = c.size("vocab_size", 128100)?;
    let eps = c.float("layer_norm_eps", 1e-7)?;
    let p = c.prob("hidden_dropout_prob", 0.1)?;
    let attn_p = c.prob("attention_probs_dropout_prob", 0.1)?;
    let max_pos = c.size("max_position_embeddings", 512)?;
    let emb = c.size("embedding_size", h)?;
    let types = c.int("type_vocab_size", 0)?;
    let pad = c.opt_int("pad_token_id")?.or(Some(0));
    if c.int("conv_kernel_size", 0)? > 0 {
        return Err(Error::Import("field `conv_kernel_size`: DeBERTa's ConvLayer after the first layer is not modelled (0)".into()));
    }
    c.get("conv_groups");
    c.get("conv_act");
    let relative = c.flag("relative_attention", false)?;
    // `getattr(config, "max_relative_positions", -1)`, below 1: `max_position_embeddings`
    let signed = |key: &str, default: i64| -> Result<i64> {
        match c.get(key) {
            None => Ok(default),
            Some(v) => v.as_i64().ok_or_else(|| Fields::wrong(key, "an integer", v)),
        }
    };
    let max_rel = match signed("max_relative_positions", -1)? {
        m if m < 1 => max_pos,
        m => m as u64,
    };
    let buckets = signed("position_buckets", -1)?;
    let span = if buckets > 0 { buckets as u64 } else { max_rel };
    let pos_att: Vec<String> = match c.get("pos_att_type") {
        None => vec![],
        Some(Value::String(s)) => s.to_lowercase().split('|').map(|x| x.trim().to_string()).collect(),
        Some(Value::Array(a)) => a.iter().map(|x| x.as_str().map(|s| s.trim().to_lowercase()).ok_or_else(|| Fields::wrong("pos_att_type", "a list of strings", x))).collect::<Result<_>>()?,
        Some(v) => return Err(Fields::wrong("pos_att_type", "\"c2p|p2c\" or a list", v)),
    };
    if let Some(bad) = pos_att.iter().find(|t| !matches!(t.as_str(), "c2p" | "p2c" | "")) {
        return Err(Error::Import(format!("field `pos_att_type`: `{bad}` is not modelled (c2p, p2c)")));
    }
    let (c2p, p2c) = (pos_att.iter().any(|t| t == "c2p"), pos_att.iter().any(|t| t == "p2c"));
    let norm_rel = match c.str("norm_rel_ebd")? {
        None => false,
        Some(s) => s.to_lowercase().split('|').any(|x| x.trim() == "layer_norm"),
    };
    let share = c.flag("share_att_key", false)?;
    let act = c.str("hidden_act")?.unwrap_or("gelu");
    let norm = || layer(json!({"kind": "layer_norm", "normalized_shape": h, "eps": eps}));
    let mut layers = vec![layer(json!({"kind": "embedding", "num_embeddings": vocab, "embedding_dim": emb, "padding_idx": pad}))?];
    if c.flag("position_biased_input", true)? {
        layers.push(layer(json!({"kind": "positional_embedding", "num_embeddings": max_pos, "embedding_dim": emb, "index_buffer": max_pos}))?);
    }
    if types > 0 {
        // `token_type_ids = torch.zeros(...)`, looked up per sample
        layers.push(layer(json!({"kind": "positional_embedding", "num_embeddings": types, "embedding_dim": emb, "per_sample": true}))?);
    }
    if emb != h {
        layers.push(layer(json!({"kind": "linear", "in_features": emb, "out_features": h, "bias": false}))?);
    }
    layers.push(norm()?);
    // `embeddings * mask`: a new tensor
    layers.push(layer(json!({"kind": "scale", "factor": 1.0}))?);
    layers.push(dropout(p)?);
    if relative || norm_rel {
        let rows = if relative { span.saturating_mul(2) } else { 0 };
        layers.push(layer(json!({"kind": "relative_embeddings", "num_embeddings": rows, "hidden_size": h, "layer_norm": norm_rel, "eps": eps}))?);
    }
    let attention = layer(json!({"kind": "disentangled_attention", "hidden_size": h, "num_heads": heads, "relative": relative, "c2p": c2p,
        "p2c": p2c, "share_att_key": share, "dropout": attn_p, "pos_dropout": p}))?;
    let linear = |i: u64, o: u64| layer(json!({"kind": "linear", "in_features": i, "out_features": o}));
    let body = vec![
        residual(vec![attention, linear(h, h)?, dropout(p)?]),
        norm()?,
        residual(vec![linear(h, inter)?, activation("hidden_act", act)?, linear(inter, h)?, dropout(p)?]),
        norm()?,
    ];
    layers.push(Layer::Repeat { times: n, body });
    let pooler = c.size("pooler_hidden_size", h)?;
    if class == "DebertaV2ForSequenceClassification" {
        if pooler != h {
            return Err(Error::Import(format!("field `pooler_hidden_size` ({pooler}): ContextPooler's dense reads the hidden_size ({h}) token, so only {h} runs")));
        }
        let labels = c.num_labels()?;
        if labels == 0 {
            return Err(Error::Import("DebertaV2ForSequenceClassification needs at least 1 label (`num_labels` / `id2label`)".into()));
        }
        layers.push(layer(json!({"kind": "select_token", "index": 0}))?);
        layers.push(dropout(c.prob("pooler_dropout", 0.0)?)?);
        layers.push(linear(h, h)?);
        layers.push(activation("pooler_hidden_act", c.str("pooler_hidden_act")?.unwrap_or("gelu"))?);
        layers.push(dropout(c.prob("cls_dropout", p)?)?);
        layers.push(linear(h, labels)?);
    } else {
        for key in ["pooler_dropout", "pooler_hidden_act", "cls_dropout"] {
            c.get(key);
        }
    }
    c.refuse_unknown("deberta-v2", &["legacy", "tie_word_embeddings", "hidden_act"])?;
    Ok(presets::token_model(&name, presets::BertConfig::base().seq_len.min(max_pos), vocab, layers))
}
