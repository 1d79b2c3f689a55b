//! The word-level LSTM language model of Zaremba et al. (2014) as PyTorch's
//! `examples/word_language_model` writes it: `Embedding → Dropout → LSTM(num_layers, dropout) →
//! Dropout → Linear` with the decoder weight tied to the encoder (`--tied`), cross-entropy per token.

use crate::layer::embedding::Embedding;
use crate::layer::linear::Linear;
use crate::layer::recurrent::Recurrent;
use crate::spec::{Layer, ModelSpec};
use serde_json::json;

/// Sizes of the model. `Default` is PTB "medium": 10,000 words, 2 × 650 LSTM, dropout 0.5,
/// 35 unrolled steps.
#[derive(Debug, Clone, PartialEq)]
pub struct LstmLmConfig {
    pub vocab_size: u64,
    /// Embedding size (`emsize`); equals `hidden_size` when tied.
    pub embedding_dim: u64,
    pub hidden_size: u64,
    pub num_layers: u64,
    pub dropout: f64,
    pub tied: bool,
    /// Back-propagation-through-time length (`bptt`).
    pub seq_len: u64,
}

impl Default for LstmLmConfig {
    fn default() -> Self {
        LstmLmConfig { vocab_size: 10000, embedding_dim: 650, hidden_size: 650, num_layers: 2, dropout: 0.5, tied: true, seq_len: 35 }
    }
}

/// `RNNModel('LSTM', ntoken, ninp, nhid, nlayers, dropout, tie_weights)`.
pub fn lstm_lm(c: &LstmLmConfig) -> Option<ModelSpec> {
    let drop = || serde_json::from_value::<Layer>(json!({"kind": "dropout", "p": c.dropout})).ok();
    let layers = vec![
        Layer::Embedding(Embedding { num_embeddings: c.vocab_size, embedding_dim: c.embedding_dim, padding_idx: None, tied_weight: false }),
        drop()?,
        Layer::Lstm(Recurrent {
            input_size: c.embedding_dim,
            hidden_size: c.hidden_size,
            num_layers: c.num_layers,
            bias: true,
            bidirectional: false,
            dropout: c.dropout,
        }),
        drop()?,
        Layer::Linear(Linear { in_features: c.hidden_size, out_features: c.vocab_size, bias: true, tied_weight: c.tied }),
    ];
    Some(super::parts::token_model("LSTM language model (PTB medium)", c.seq_len, c.vocab_size, layers))
}
