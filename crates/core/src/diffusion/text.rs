//! The pipelines' text encoders as the core's transformer specs: transformers'
//! `CLIPTextModel` / `CLIPTextModelWithProjection` (`models/clip/modeling_clip.py`: pre-norm
//! causal layers, `quick_gelu` for CLIP-L, `gelu` for OpenCLIP-bigG), `T5EncoderModel`
//! (through the importer, `import/hf/seq2seq.rs`) and `UMT5EncoderModel`
//! (`models/umt5/modeling_umt5.py`: T5 v1.1 with a relative position bias in every layer).

use super::cfg::Cfg;
use crate::error::{Error, Result};
use crate::layer::activation::FfnActivation;
use crate::spec::{InputDType, InputSpec, Layer, Loss, ModelSpec, SPEC_VERSION};
use serde_json::{json, Map, Value};

/// Which text encoder a config is.
#[derive(Debug, Clone, PartialEq)]
pub struct TextEncoder {
    pub class: String,
    pub spec: ModelSpec,
    /// The encoder's own sequence length (77 for CLIP; T5's is the pipeline's `max_sequence_length`).
    pub max_len: Option<u64>,
    /// T5 and UMT5: `d_model`, and whether every layer computes its position bias (UMT5).
    pub t5: Option<(u64, bool)>,
}

impl TextEncoder {
    /// Bytes live while T5's `_relative_position_bucket` runs (`compute_bias`, transformers
    /// `modeling_t5.py` / `modeling_umt5.py`), read from the source and checked against the
    /// measured records: at its `torch.min(..., torch.full_like(...))` six `[S, S]` int64
    /// tensors (the relative positions, their `abs`, the bidirectional bucket offset, the
    /// large-distance buckets, the `full_like`, the minimum) and the `is_small` bool mask are
    /// alive, beside the layer's input, its norm, Q, K and V (`[S, D]` each, per sample);
    /// UMT5 keeps its `log_ratio` (an `[S, S]` fp32 local) and, past the first layer, one more
    /// `[S, D]` (the residual). Returns `(fixed, per_sample)` bytes besides the weights.
    pub fn bucket_bytes(&self, seq: u64, dtype_size: u64) -> Option<(u64, u64)> {
        let (d, umt5) = self.t5?;
        let ss = seq.saturating_mul(seq);
        let (sq, rows) = if umt5 { (ss.saturating_mul(6 * 8 + 1 + 4), 6) } else { (ss.saturating_mul(6 * 8 + 1), 5) };
        let per_sample = seq.saturating_mul(8).saturating_add(seq.saturating_mul(d).saturating_mul(dtype_size).saturating_mul(rows));
        Some((sq, per_sample))
    }
}

fn layer(v: Value) -> Result<Layer> {
    serde_json::from_value(v).map_err(|e| Error::Import(format!("internal layer: {e}")))
}

/// `CLIPTextModel(WithProjection)` from a `CLIPTextConfig`.
pub fn clip(c: &Cfg, projection: bool) -> Result<TextEncoder> {
    let h = c.size("hidden_size", 512)?;
    let heads = c.size("num_attention_heads", 8)?;
    let inter = c.size("intermediate_size", 2048)?;
    let n = c.size("num_hidden_layers", 12)?;
    let vocab = c.size("vocab_size", 49408)?;
    let pos = c.size("max_position_embeddings", 77)?;
    let activation = match c.str("hidden_act")?.unwrap_or("quick_gelu") {
        "quick_gelu" => FfnActivation::QuickGelu,
        "gelu" => FfnActivation::Gelu,
        other => return Err(Error::Import(format!("{}: `hidden_act` {other} is not supported (quick_gelu, gelu)", c.class))),
    };
    let tl = crate::layer::transformer::TransformerLayer {
        dropout: 0.0,
        attention_dropout: Some(0.0),
        activation,
        layer_norm_eps: 1e-5,
        norm_first: true,
        ..crate::presets::transformer_layer(h, heads, inter)
    };
    let mut layers = vec![
        layer(json!({"kind": "embedding", "num_embeddings": vocab, "embedding_dim": h}))?,
        layer(json!({"kind": "positional_embedding", "num_embeddings": pos, "embedding_dim": h, "index_buffer": pos}))?,
        Layer::Repeat { times: n, body: vec![Layer::TransformerDecoderLayer(tl)] },
        layer(json!({"kind": "layer_norm", "normalized_shape": h, "eps": 1e-5}))?,
    ];
    if projection {
        let proj = c.size("projection_dim", 512)?;
        layers.push(layer(json!({"kind": "select_token", "index": -1}))?);
        layers.push(layer(json!({"kind": "linear", "in_features": h, "out_features": proj, "bias": false}))?);
    }
    Ok(TextEncoder {
        class: c.class.clone(),
        spec: ModelSpec {
            version: SPEC_VERSION,
            name: Some(c.class.clone()),
            input: InputSpec { shape: vec![pos], dtype: InputDType::Int64, vocab_size: Some(vocab) },
            layers,
            loss: Loss::CrossEntropy,
            names: Default::default(),
            unquantised: None,
        },
        max_len: Some(pos),
        t5: None,
    })
}

/// `T5EncoderModel` through the T5 importer, or `UMT5EncoderModel`: the same stack with the
/// relative position bias moved into every layer (`UMT5Attention(has_relative_attention_bias=True)`).
pub fn t5(obj: &Map<String, Value>, umt5: bool) -> Result<TextEncoder> {
    let mut o = obj.clone();
    o.insert("architectures".into(), json!(["T5EncoderModel"]));
    o.insert("model_type".into(), json!("t5"));
    // decoder-only and tokenizer fields of a UMT5 config change nothing in the encoder
    for k in ["num_decoder_layers", "scalable_attention", "tokenizer_class", "is_encoder_decoder", "use_cache", "decoder_start_token_id", "eos_token_id", "pad_token_id", "torch_dtype", "dtype", "transformers_version", "_name_or_path"] {
        o.remove(k);
    }
    let mut spec = crate::import::hf::t5_from_config(&o)?;
    if umt5 {
        let at = spec.layers.iter().position(|l| l.kind() == "relative_position_bias").ok_or_else(|| Error::Import("UMT5: no position bias in the T5 stack".into()))?;
        let bias = spec.layers.remove(at);
        for l in spec.layers.iter_mut() {
            if let Layer::Repeat { body, .. } = l {
                body.insert(0, bias.clone());
            }
        }
        spec.name = Some("UMT5EncoderModel".into());
    }
    let d = obj.get("d_model").and_then(Value::as_u64).unwrap_or(512);
    Ok(TextEncoder { class: if umt5 { "UMT5EncoderModel".into() } else { "T5EncoderModel".into() }, spec, max_len: None, t5: Some((d, umt5)) })
}
