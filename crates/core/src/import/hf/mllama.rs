//! `mllama`: Llama 3.2 Vision, built as transformers 5.24's `modeling_mllama.py` builds
//! `MllamaForConditionalGeneration` from `MllamaConfig` (`configuration_mllama.py`):
//!
//! - `MllamaVisionModel` of `vision_config` (`MllamaVisionConfig`'s defaults: 1280 wide, 32 local
//!   and 8 global layers, 16 heads, 448-pixel tiles in 14-pixel patches, 4 tiles, 8 aspect ratios,
//!   `intermediate_layers_indices` [3, 7, 15, 23, 30]): `tiled_patch_embed` and
//!   `tiled_vision_encoder` (`layer/tiled_vision.rs`), `[T·(P+1), D·(1+k)]` out;
//! - `multi_modal_projector`: `Linear(vision_output_dim, text hidden_size)` with bias (the
//!   `tiled_vision_encoder`'s `projection_dim`); its
//!   `T·(P+1)` rows (`max_num_tiles` tiles of `(image_size / patch_size)² + 1` tokens, one image)
//!   are the image tokens the cross-attention layers read (the memory of a `token_input`);
//! - `MllamaTextModel` of `text_config` (LLaMA-3.1-8B-sized by default): `embed_tokens` of
//!   `vocab_size + 8` rows, 40 layers of which those at `cross_attention_layers` (default
//!   [3, 8, …, 38]) are `gated_cross_attention_layer`s (`layer/gated_cross.rs`) and the others
//!   LLaMA self-attention layers, the final RMSNorm; `lm_head` `Linear(hidden, vocab_size)`, never
//!   tied (`_tied_weights_keys` is commented out: `tie_word_embeddings` changes nothing).
//!
//! The spec's input is one image's tiles `[T·C, S, S]`; the prompt is [`MAX_DEFAULT_SEQ_LEN`]
//! tokens (capped by `max_position_embeddings`), replaced by the estimate's `seq_len`. Indices in
//! `cross_attention_layers` beyond the text model's layers are ignored, as `MllamaTextModel` does.

use super::parts::layer;
use super::vlm::sub;
use crate::error::{Error, Result};
use crate::import::decoder::MAX_DEFAULT_SEQ_LEN;
use crate::import::fields::Fields;
use crate::layer::embedding::Embedding;
use crate::layer::transformer::{FfnActivation, NormKind, TransformerLayer};
use crate::presets;
use crate::spec::{InputDType, InputSpec, Layer, Loss, ModelSpec, SPEC_VERSION};
use serde_json::{json, Map, Value};

/// `MllamaVisionConfig.supported_aspect_ratios`' default (for `max_num_tiles` 4).
const DEFAULT_RATIOS: usize = 8;

/// A list of integers (Python's indices may be negative), or `None` when absent.
fn ints(t: &Fields, key: &str) -> Result<Option<Vec<i64>>> {
    match t.get(key) {
        None => Ok(None),
        Some(Value::Array(a)) => a.iter().map(|v| v.as_i64().ok_or_else(|| Fields::wrong(key, "a list of integers", v))).collect::<Result<Vec<_>>>().map(Some),
        Some(v) => Err(Fields::wrong(key, "a list of integers", v)),
    }
}

/// The vision tower: `(tiled_patch_embed, the input shape, the tiled_vision_encoder's JSON)`.
fn vision(obj: &Map<String, Value>) -> Result<(Vec<Layer>, Vec<u64>, Value)> {
    let t = Fields::new(obj);
    let h = t.size("hidden_size", 1280)?;
    let heads = t.size("attention_heads", t.size("num_attention_heads", 16)?)?;
    let n = t.int("num_hidden_layers", 32)?;
    let global = t.int("num_global_layers", 8)?;
    let channels = t.size("num_channels", 3)?;
    let inter = t.size("intermediate_size", 5120)?;
    let image = t.size("image_size", 448)?;
    let patch = t.size("patch_size", 14)?;
    let eps = t.float("norm_eps", 1e-5)?;
    let tiles = t.size("max_num_tiles", 4)?;
    let act = t.activation("hidden_act", FfnActivation::Gelu)?;
    if !h.is_multiple_of(heads) {
        return Err(Error::Import(format!("vision_config: hidden_size ({h}) must be divisible by attention_heads ({heads})")));
    }
    if image < patch {
        return Err(Error::Import(format!("vision_config: `image_size` {image} is smaller than `patch_size` {patch}")));
    }
    let ratios = match t.get("supported_aspect_ratios") {
        None => None,
        Some(Value::Array(a)) => Some(a.len()),
        Some(v) => return Err(Fields::wrong("supported_aspect_ratios", "a list of [rows, columns] pairs", v)),
    };
    // `MllamaVisionConfig.validate_architecture`
    if ratios.is_none() && tiles != 4 {
        return Err(Error::Import(format!("vision_config: `max_num_tiles` ({tiles}) must be 4 with the default `supported_aspect_ratios`; give the list")));
    }
    let ratios = ratios.unwrap_or(DEFAULT_RATIOS) as u64;
    let picked = ints(&t, "intermediate_layers_indices")?.unwrap_or_else(|| vec![3, 7, 15, 23, 30]);
    let mut indices = Vec::with_capacity(picked.len());
    for i in picked {
        // `output.hidden_states[i]`: Python indexing of the `num_hidden_layers` layer outputs
        let j = if i < 0 { i + n as i64 } else { i };
        if j < 0 || j >= n as i64 {
            return Err(Error::Import(format!("vision_config: `intermediate_layers_indices` entry {i} is not one of the {n} layers")));
        }
        indices.push(j as u64);
    }
    let out = t.size("vision_output_dim", 7680)?;
    let wide = h.saturating_mul(indices.len() as u64 + 1);
    if out != wide {
        return Err(Error::Import(format!(
            "vision_config: `vision_output_dim` ({out}) must be hidden_size × (1 + len(intermediate_layers_indices)) = {wide}: the projector reads the concatenated features"
        )));
    }
    t.refuse_unknown("mllama vision_config", &["model_type", "initializer_range"])?;
    let side = image / patch;
    let tokens = side.saturating_mul(side).saturating_add(1);
    let enc = TransformerLayer {
        dropout: 0.0,
        attention_dropout: Some(0.0),
        activation: act,
        layer_norm_eps: eps,
        norm_first: true,
        bias: false,
        mlp_bias: Some(true),
        norm_bias: Some(true),
        ..presets::transformer_layer(h, heads, inter)
    };
    let layers = vec![layer(json!({"kind": "tiled_patch_embed", "hidden_size": h, "num_channels": channels, "patch_size": patch, "num_tiles": tiles, "num_aspect_ratios": ratios}))?];
    let tower = json!({"kind": "tiled_vision_encoder", "layer": enc, "num_layers": n, "num_global_layers": global, "intermediate_layers": indices,
        "num_tiles": tiles, "tile_tokens": tokens, "num_aspect_ratios": ratios});
    Ok((layers, vec![tiles.saturating_mul(channels), image, image], tower))
}

/// `MllamaConfig` (transformers 5.24).
pub(super) fn mllama(c: &Fields, arch: Option<&str>) -> Result<ModelSpec> {
    if let Some(a) = arch.filter(|a| *a != "MllamaForConditionalGeneration") {
        return Err(Error::Import(format!("`{a}`: mllama imports MllamaForConditionalGeneration")));
    }
    let (mut layers, input, mut tower) = vision(&sub(c, "vision_config")?)?;
    let obj = sub(c, "text_config")?;
    let t = Fields::new(&obj);
    let vocab = t.size("vocab_size", 128256)?;
    let h = t.size("hidden_size", 4096)?;
    let n = t.int("num_hidden_layers", 40)?;
    let heads = t.size("num_attention_heads", 32)?;
    let kv = t.size("num_key_value_heads", 8)?;
    let inter = t.size("intermediate_size", 14336)?;
    let eps = t.float("rms_norm_eps", 1e-5)?;
    let max_pos = t.size("max_position_embeddings", 131072)?;
    let dropout = t.prob("dropout", 0.0)?;
    // the gated MLP's memory does not depend on which activation gates it
    t.activation("hidden_act", FfnActivation::Silu)?;
    if !h.is_multiple_of(heads) || !heads.is_multiple_of(kv) {
        return Err(Error::Import(format!(
            "text_config: hidden_size ({h}) must be divisible by num_attention_heads ({heads}), and that by num_key_value_heads ({kv})"
        )));
    }
    let cross = ints(&t, "cross_attention_layers")?.unwrap_or_else(|| vec![3, 8, 13, 18, 23, 28, 33, 38]);
    // never tied (see the module docs); read, not refused
    t.flag("tie_word_embeddings", false)?;
    t.refuse_unknown("mllama text_config", &["model_type"])?;
    let decoder = Layer::TransformerDecoderLayer(TransformerLayer {
        dropout: 0.0,
        attention_dropout: Some(dropout),
        activation: FfnActivation::Silu,
        layer_norm_eps: eps,
        norm_first: true,
        bias: false,
        norm: NormKind::RmsNorm,
        gated_mlp: true,
        num_kv_heads: (kv != heads).then_some(kv),
        rotary: true,
        ..presets::transformer_layer(h, heads, inter)
    });
    let cross_layer = layer(json!({"kind": "gated_cross_attention_layer", "hidden_size": h, "num_heads": heads, "num_kv_heads": kv,
        "intermediate_size": inter, "eps": eps, "dropout": dropout}))?;
    for key in ["image_token_index", "image_token_id", "vision_config", "text_config"] {
        c.get(key);
    }
    c.refuse_unknown("mllama", &[])?;
    // the projector runs inside the tower's layer (it, too, is skipped in a decode step)
    tower["projection_dim"] = json!(h);
    layers.push(layer(tower)?);
    layers.push(layer(json!({"kind": "token_input", "seq_len": MAX_DEFAULT_SEQ_LEN.min(max_pos), "prompt": true}))?);
    layers.push(Layer::Embedding(Embedding { num_embeddings: vocab.saturating_add(8), embedding_dim: h, padding_idx: None, tied_weight: false }));
    let mut run = 0u64;
    for i in 0..n {
        if cross.contains(&(i as i64)) {
            if run > 0 {
                layers.push(Layer::Repeat { times: run, body: vec![decoder.clone()] });
                run = 0;
            }
            layers.push(cross_layer.clone());
        } else {
            run += 1;
        }
    }
    if run > 0 {
        layers.push(Layer::Repeat { times: run, body: vec![decoder] });
    }
    layers.push(layer(json!({"kind": "rms_norm", "normalized_shape": h, "eps": eps}))?);
    layers.push(layer(json!({"kind": "linear", "in_features": h, "out_features": vocab, "bias": false}))?);
    Ok(ModelSpec {
        version: SPEC_VERSION,
        name: Some("MllamaForConditionalGeneration".to_string()),
        input: InputSpec { shape: input, dtype: InputDType::Float32, vocab_size: Some(vocab) },
        layers,
        loss: Loss::CausalLm,
        names: Default::default(),
        unquantised: None,
    })
}
