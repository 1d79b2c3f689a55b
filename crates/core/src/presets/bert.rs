//! Hugging Face `BertModel` / `BertForSequenceClassification` (transformers 5), written as specs:
//! embeddings (word + token type, `+=` positions, LayerNorm, dropout), post-norm encoder layers
//! with exact GELU, the tanh pooler over `[CLS]`, and optionally dropout + a classifier.

use crate::layer::transformer::{FfnActivation, TransformerLayer};
use crate::layer::embedding::{Embedding, PositionalEmbedding};
use crate::layer::norm::LayerNorm;
use crate::spec::{Layer, ModelSpec};
use serde_json::json;

/// The `config.json` fields a BERT spec needs. `Default` is BERT-base
/// (<https://huggingface.co/google-bert/bert-base-uncased/blob/main/config.json>).
#[derive(Debug, Clone, PartialEq)]
pub struct BertConfig {
    pub vocab_size: u64,
    pub hidden_size: u64,
    pub num_hidden_layers: u64,
    pub num_attention_heads: u64,
    pub intermediate_size: u64,
    pub max_position_embeddings: u64,
    pub type_vocab_size: u64,
    pub hidden_dropout_prob: f64,
    pub attention_probs_dropout_prob: f64,
    pub layer_norm_eps: f64,
    pub hidden_act: FfnActivation,
    pub num_labels: u64,
    pub seq_len: u64,
}

impl BertConfig {
    pub fn base() -> Self {
        BertConfig {
            vocab_size: 30522,
            hidden_size: 768,
            num_hidden_layers: 12,
            num_attention_heads: 12,
            intermediate_size: 3072,
            max_position_embeddings: 512,
            type_vocab_size: 2,
            hidden_dropout_prob: 0.1,
            attention_probs_dropout_prob: 0.1,
            layer_norm_eps: 1e-12,
            hidden_act: FfnActivation::Gelu,
            num_labels: 2,
            seq_len: 128,
        }
    }

    /// BERT-large (<https://huggingface.co/google-bert/bert-large-uncased/blob/main/config.json>).
    pub fn large() -> Self {
        BertConfig { hidden_size: 1024, num_hidden_layers: 24, num_attention_heads: 16, intermediate_size: 4096, ..Self::base() }
    }
}

impl Default for BertConfig {
    fn default() -> Self {
        Self::base()
    }
}

/// `BertModel` (with pooler), or `BertForSequenceClassification` when `classifier`.
pub fn bert(c: &BertConfig, classifier: bool) -> Option<ModelSpec> {
    let d = c.hidden_size;
    let mut layers = vec![
        Layer::Embedding(Embedding { num_embeddings: c.vocab_size, embedding_dim: d, padding_idx: Some(0), tied_weight: false }),
        Layer::PositionalEmbedding(PositionalEmbedding {
            num_embeddings: c.type_vocab_size,
            embedding_dim: d,
            per_sample: true,
            index_buffer: c.max_position_embeddings,
            inplace: false,
            batched: false,
        }),
        Layer::PositionalEmbedding(PositionalEmbedding {
            num_embeddings: c.max_position_embeddings,
            embedding_dim: d,
            per_sample: false,
            index_buffer: c.max_position_embeddings,
            inplace: true,
            batched: false,
        }),
        Layer::LayerNorm(LayerNorm { normalized_shape: d, eps: c.layer_norm_eps, elementwise_affine: true, bias: true }),
        serde_json::from_value(json!({"kind": "dropout", "p": c.hidden_dropout_prob})).ok()?,
        Layer::Repeat {
            times: c.num_hidden_layers,
            body: vec![Layer::TransformerEncoderLayer(TransformerLayer {
                dropout: c.hidden_dropout_prob,
                attention_dropout: Some(c.attention_probs_dropout_prob),
                activation: c.hidden_act,
                layer_norm_eps: c.layer_norm_eps,
                ..super::parts::transformer_layer(d, c.num_attention_heads, c.intermediate_size)
            })],
        },
        serde_json::from_value(json!({"kind": "select_token", "index": 0})).ok()?,
        serde_json::from_value(json!({"kind": "linear", "in_features": d, "out_features": d})).ok()?,
        Layer::Tanh,
    ];
    if classifier {
        layers.push(serde_json::from_value(json!({"kind": "dropout", "p": c.hidden_dropout_prob})).ok()?);
        layers.push(serde_json::from_value(json!({"kind": "linear", "in_features": d, "out_features": c.num_labels})).ok()?);
    }
    let name = if classifier { "BertForSequenceClassification" } else { "BertModel" };
    let mut spec = super::parts::token_model(name, c.seq_len, c.vocab_size, layers);
    // `modeling_bert.py`'s modules; the first token is taken inside `pooler`'s forward
    let inner = if classifier { "bert." } else { "" };
    let own = [
        "embeddings.word_embeddings", "embeddings.token_type_embeddings", "embeddings.position_embeddings", "embeddings.LayerNorm",
        "embeddings.dropout", "encoder.layer", "pooler", "pooler.dense", "pooler.activation",
    ];
    for (i, n) in own.into_iter().enumerate() {
        crate::layer_names::name_top(&mut spec.names, i, &format!("{inner}{n}"));
    }
    crate::layer_names::name_module_list(&mut spec.names, 5, &format!("{inner}encoder.layer"));
    if classifier {
        crate::layer_names::name_top(&mut spec.names, 9, "dropout");
        crate::layer_names::name_top(&mut spec.names, 10, "classifier");
    }
    Some(spec)
}
