//! `bart`: as transformers 5.24's `modeling_bart.py` builds `BartForConditionalGeneration` and
//! `BartModel`. The spec's input is the encoder's source tokens (default: `max_position_embeddings`,
//! 1024 — the estimate's `seq_len` overrides it); a `token_input` of [`BART_TARGET_LEN`] target
//! tokens starts the decoder, whose `cross_attention` layers read the encoder's output.
//!
//! Per stack: `embed_tokens` (the `shared` embedding, tied: encoder, decoder and `lm_head` are one
//! parameter), `× √d_model` when `scale_embedding`, `BartLearnedPositionalEmbedding`
//! (`max_position_embeddings + 2` rows: the offset of 2; looked up per sample, `[B, S, D]`), `layernorm_embedding`, dropout, then
//! post-norm layers: `x = LN(x + dropout(self_attn(x)))`, in the decoder `LN(x + dropout(encoder_attn(x)))`,
//! then `LN(x + dropout(fc2(dropout(act(fc1(x))))))`; every projection has a bias. No final
//! LayerNorm (that is mBART's). The head adds `final_logits_bias`, a buffer: written here as a
//! `scale` by 1 (the same new logits-sized tensor, nothing saved; no parameter).
//!
//! Refused by name: `tie_word_embeddings: false` (then `shared` is a fourth, unused copy of the
//! embedding), `encoder_layerdrop`/`decoder_layerdrop` above 0 (layers skipped at random).

use super::parts::{activation, layer, residual};
use crate::error::{Error, Result};
use crate::import::fields::{dropout, pick, Fields};
use crate::spec::{InputDType, InputSpec, Layer, Loss, ModelSpec, SPEC_VERSION};
use serde_json::json;

/// BART's default target length here (the decoder's tokens, T5's), capped at `max_position_embeddings`.
pub const BART_TARGET_LEN: u64 = 128;

const IGNORED_BART: &[&str] = &["classifier_dropout", "num_hidden_layers", "normalize_before", "add_final_layer_norm", "add_bias_logits", "static_position_embeddings", "extra_pos_embeddings", "normalize_embedding"];

/// `BartConfig` (transformers 5.24): defaults are bart-large's.
pub(super) fn bart(c: &Fields, arch: Option<&str>) -> Result<ModelSpec> {
    let (class, name) = pick(arch, &["BartForConditionalGeneration", "BartModel"], "BartModel");
    let d = c.size("d_model", 1024)?;
    let vocab = c.size("vocab_size", 50265)?;
    let max_pos = c.size("max_position_embeddings", 1024)?;
    let p = c.prob("dropout", 0.1)?;
    let attn_p = c.prob("attention_dropout", 0.0)?;
    let act_p = c.prob("activation_dropout", 0.0)?;
    if !c.flag("tie_word_embeddings", true)? {
        return Err(Error::Import(
            "field `tie_word_embeddings`: false is not supported (BART then has separate encoder, decoder and head embeddings beside an unused `shared` one)".into(),
        ));
    }
    for key in ["encoder_layerdrop", "decoder_layerdrop"] {
        if c.prob(key, 0.0)? > 0.0 {
            return Err(Error::Import(format!("field `{key}`: above 0 (layers skipped at random) is not supported")));
        }
    }
    let act = activation("activation_function", c.str("activation_function")?.unwrap_or("gelu"))?;
    let scale = c.flag("scale_embedding", false)?;
    let norm = || layer(json!({"kind": "layer_norm", "normalized_shape": d, "eps": 1e-5}));
    let stack = |heads_key: &str, ffn_key: &str, layers_key: &str, decoder: bool| -> Result<Layer> {
        let heads = c.size(heads_key, 16)?;
        let ffn = c.size(ffn_key, 4096)?;
        let n = c.size(layers_key, 12)?;
        let attn = json!({"kind": "multihead_attention", "embed_dim": d, "num_heads": heads, "dropout": attn_p, "causal": decoder, "contiguous_heads": true});
        let mut block = vec![residual(vec![layer(attn)?, dropout(p)?]), norm()?];
        if decoder {
            let cross = json!({"kind": "cross_attention", "embed_dim": d, "num_heads": heads, "dropout": attn_p, "contiguous_heads": true});
            block.extend([residual(vec![layer(cross)?, dropout(p)?]), norm()?]);
        }
        let lin = |i: u64, o: u64| layer(json!({"kind": "linear", "in_features": i, "out_features": o}));
        block.push(residual(vec![lin(d, ffn)?, act.clone(), dropout(act_p)?, lin(ffn, d)?, dropout(p)?]));
        block.push(norm()?);
        Ok(Layer::Repeat { times: n, body: block })
    };
    let embed = |tied: bool| -> Result<Vec<Layer>> {
        let mut v = vec![layer(json!({"kind": "embedding", "num_embeddings": vocab, "embedding_dim": d, "tied_weight": tied}))?];
        if scale {
            v.push(layer(json!({"kind": "scale", "factor": (d as f64).sqrt()}))?);
        }
        // `arange(past, past + S).expand(bsz, -1) + 2`: looked up per sample
        v.push(layer(json!({"kind": "positional_embedding", "num_embeddings": max_pos.saturating_add(2), "embedding_dim": d, "batched": true}))?);
        v.push(norm()?);
        v.push(dropout(p)?);
        Ok(v)
    };
    let mut layers = embed(false)?;
    layers.push(stack("encoder_attention_heads", "encoder_ffn_dim", "encoder_layers", false)?);
    layers.push(layer(json!({"kind": "token_input", "seq_len": BART_TARGET_LEN.min(max_pos)}))?);
    layers.extend(embed(true)?);
    layers.push(stack("decoder_attention_heads", "decoder_ffn_dim", "decoder_layers", true)?);
    if class == "BartForConditionalGeneration" {
        layers.push(layer(json!({"kind": "linear", "in_features": d, "out_features": vocab, "bias": false, "tied_weight": true}))?);
        // `lm_logits + self.final_logits_bias` (a buffer)
        layers.push(layer(json!({"kind": "scale", "factor": 1.0}))?);
    }
    c.refuse_unknown("bart", IGNORED_BART)?;
    Ok(ModelSpec {
        version: SPEC_VERSION,
        name: Some(name),
        input: InputSpec { shape: vec![max_pos], dtype: InputDType::Int64, vocab_size: Some(vocab) },
        layers,
        loss: Loss::CrossEntropy,
        names: Default::default(),
        unquantised: None,
    })
}
