//! Hugging Face `GPT2LMHeadModel` (transformers 5), written as a spec: token + position
//! embeddings, dropout, pre-norm causal layers (fused `c_attn`, `gelu_new`), the final
//! `ln_f`, and the `lm_head` tied to the token embedding; cross-entropy per token over the vocabulary.

use crate::layer::transformer::{FfnActivation, TransformerLayer};
use crate::layer::embedding::{Embedding, PositionalEmbedding};
use crate::layer::linear::Linear;
use crate::layer::norm::LayerNorm;
use crate::spec::{Layer, Loss, ModelSpec};
use serde_json::json;

/// The `config.json` fields a GPT-2 spec needs. `Default` is GPT-2 small
/// (<https://huggingface.co/openai-community/gpt2/blob/main/config.json>).
#[derive(Debug, Clone, PartialEq)]
pub struct Gpt2Config {
    pub vocab_size: u64,
    pub n_positions: u64,
    pub n_embd: u64,
    pub n_layer: u64,
    pub n_head: u64,
    /// `n_inner`; `None` means `4 * n_embd`.
    pub n_inner: Option<u64>,
    pub activation_function: FfnActivation,
    pub resid_pdrop: f64,
    pub embd_pdrop: f64,
    pub attn_pdrop: f64,
    pub layer_norm_epsilon: f64,
    pub tie_word_embeddings: bool,
    pub seq_len: u64,
}

impl Default for Gpt2Config {
    fn default() -> Self {
        Gpt2Config {
            vocab_size: 50257,
            n_positions: 1024,
            n_embd: 768,
            n_layer: 12,
            n_head: 12,
            n_inner: None,
            activation_function: FfnActivation::GeluNew,
            resid_pdrop: 0.1,
            embd_pdrop: 0.1,
            attn_pdrop: 0.1,
            layer_norm_epsilon: 1e-5,
            tie_word_embeddings: true,
            seq_len: 1024,
        }
    }
}

/// `GPT2LMHeadModel` when `lm_head`, else `GPT2Model` (hidden states out).
pub fn gpt2(c: &Gpt2Config, lm_head: bool) -> Option<ModelSpec> {
    let d = c.n_embd;
    let mut layers = vec![
        Layer::Embedding(Embedding { num_embeddings: c.vocab_size, embedding_dim: d, padding_idx: None, tied_weight: false }),
        Layer::PositionalEmbedding(PositionalEmbedding {
            num_embeddings: c.n_positions,
            embedding_dim: d,
            per_sample: false,
            index_buffer: 0,
            inplace: false,
            batched: false,
        }),
        serde_json::from_value(json!({"kind": "dropout", "p": c.embd_pdrop})).ok()?,
        Layer::Repeat {
            times: c.n_layer,
            body: vec![Layer::TransformerDecoderLayer(TransformerLayer {
                dropout: c.resid_pdrop,
                attention_dropout: Some(c.attn_pdrop),
                activation: c.activation_function,
                layer_norm_eps: c.layer_norm_epsilon,
                norm_first: true,
                fused_qkv: true,
                ..super::parts::transformer_layer(d, c.n_head, c.n_inner.unwrap_or(d.saturating_mul(4)))
            })],
        },
        Layer::LayerNorm(LayerNorm { normalized_shape: d, eps: c.layer_norm_epsilon, elementwise_affine: true, bias: true }),
    ];
    if lm_head {
        layers.push(Layer::Linear(Linear {
            in_features: d,
            out_features: c.vocab_size,
            bias: false,
            tied_weight: c.tie_word_embeddings,
        }));
    }
    let name = if lm_head { "GPT2LMHeadModel" } else { "GPT2Model" };
    let mut spec = super::parts::token_model(name, c.seq_len, c.vocab_size, layers);
    // `modeling_gpt2.py`: `transformer.wte`, …, `transformer.h.<i>`, `lm_head`
    let inner = if lm_head { "transformer." } else { "" };
    for (i, own) in ["wte", "wpe", "drop", "h", "ln_f"].into_iter().enumerate() {
        crate::layer_names::name_top(&mut spec.names, i, &format!("{inner}{own}"));
    }
    crate::layer_names::name_module_list(&mut spec.names, 3, &format!("{inner}h"));
    if lm_head {
        crate::layer_names::name_top(&mut spec.names, 5, "lm_head");
    }
    if lm_head {
        // `GPT2LMHeadModel.forward` calls `self.loss_function` = transformers' `ForCausalLMLoss`
        spec.loss = Loss::CausalLm;
    }
    Some(spec)
}
