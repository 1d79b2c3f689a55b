//! `clip`: two towers, as transformers 5.24's `modeling_clip.py` builds `CLIPModel`. The spec's
//! input is the image; the vision tower (patch conv without bias, class token, positions,
//! `pre_layrnorm`, pre-norm layers, `[CLS]`, `post_layernorm`, `visual_projection`) runs first,
//! then a `token_input` of `max_position_embeddings` (77) token ids starts the text tower (token
//! and position embeddings, causal pre-norm layers, `final_layer_norm`, the pooled token,
//! `text_projection`), and `contrastive` compares the two projections (with `logit_scale`).
//! Layers use `quick_gelu` unless `hidden_act` says otherwise. The text tower pools one token per
//! sample (the end-of-text token: an advanced-indexing gather, modelled as `select_token`).

use crate::import::fields::{invalid, pick, Fields};
use crate::error::{Error, Result};
use crate::layer::transformer::{FfnActivation, TransformerLayer};
use crate::presets;
use crate::spec::{InputDType, InputSpec, Layer, Loss, ModelSpec, SPEC_VERSION};
use serde_json::{json, Map, Value};

fn layer(v: Value) -> Result<Layer> {
    let kind = v["kind"].as_str().unwrap_or("layer").to_string();
    serde_json::from_value(v).map_err(|_| invalid(&kind))
}

/// Fields of `CLIPTextConfig` / `CLIPVisionConfig` that change neither parameters nor memory.
const IGNORED_TOWER: &[&str] = &["initializer_factor", "model_type", "projection_dim", "dropout"];

/// One tower's `[D]` embedding from its config object (`text_config` / `vision_config`).
struct Tower {
    hidden: u64,
    layers: Vec<Layer>,
}

fn sub<'a>(c: &'a Fields, key: &str) -> Result<Option<&'a Map<String, Value>>> {
    match c.get(key) {
        None => Ok(None),
        Some(Value::Object(m)) => Ok(Some(m)),
        Some(v) => Err(Fields::wrong(key, "an object", v)),
    }
}

fn encoder_layers(t: &Fields, what: &str, h: u64, heads: u64, inter: u64, n: u64, eps: f64) -> Result<Layer> {
    let layer = TransformerLayer {
        dropout: 0.0,
        attention_dropout: Some(t.prob("attention_dropout", 0.0)?),
        activation: t.activation("hidden_act", FfnActivation::QuickGelu)?,
        layer_norm_eps: eps,
        norm_first: true,
        ..presets::transformer_layer(h, heads, inter)
    };
    let body = if what == "text_config" { Layer::TransformerDecoderLayer(layer) } else { Layer::TransformerEncoderLayer(layer) };
    Ok(Layer::Repeat { times: n, body: vec![body] })
}

fn ln(h: u64, eps: f64) -> Result<Layer> {
    layer(json!({"kind": "layer_norm", "normalized_shape": h, "eps": eps}))
}

fn vision(obj: &Map<String, Value>) -> Result<(Tower, Vec<u64>)> {
    let t = Fields::new(obj);
    let h = t.size("hidden_size", 768)?;
    let channels = t.size("num_channels", 3)?;
    let image = t.size("image_size", 224)?;
    let patch = t.size("patch_size", 32)?;
    if image < patch {
        return Err(Error::Import(format!("vision_config: `image_size` {image} is smaller than `patch_size` {patch}")));
    }
    let eps = t.float("layer_norm_eps", 1e-5)?;
    let positions = (image / patch).saturating_mul(image / patch).saturating_add(1);
    let n = t.size("num_hidden_layers", 12)?;
    let layers = vec![
        layer(json!({"kind": "conv2d", "in_channels": channels, "out_channels": h, "kernel_size": patch, "stride": patch, "bias": false}))?,
        layer(json!({"kind": "flatten", "start_dim": 2}))?,
        layer(json!({"kind": "transpose", "dim0": 1, "dim1": 2}))?,
        layer(json!({"kind": "cls_token", "embedding_dim": h}))?,
        layer(json!({"kind": "positional_embedding", "num_embeddings": positions, "embedding_dim": h, "index_buffer": positions}))?,
        ln(h, eps)?,
        encoder_layers(&t, "vision_config", h, t.size("num_attention_heads", 12)?, t.size("intermediate_size", 3072)?, n, eps)?,
        layer(json!({"kind": "select_token", "index": 0}))?,
        ln(h, eps)?,
    ];
    t.refuse_unknown("clip vision_config", IGNORED_TOWER)?;
    Ok((Tower { hidden: h, layers }, vec![channels, image, image]))
}

fn text(obj: &Map<String, Value>) -> Result<(Tower, u64)> {
    let t = Fields::new(obj);
    let h = t.size("hidden_size", 512)?;
    let vocab = t.size("vocab_size", 49408)?;
    let positions = t.size("max_position_embeddings", 77)?;
    let eps = t.float("layer_norm_eps", 1e-5)?;
    let n = t.size("num_hidden_layers", 12)?;
    let layers = vec![
        layer(json!({"kind": "token_input", "seq_len": positions}))?,
        layer(json!({"kind": "embedding", "num_embeddings": vocab, "embedding_dim": h}))?,
        layer(json!({"kind": "positional_embedding", "num_embeddings": positions, "embedding_dim": h, "index_buffer": positions}))?,
        encoder_layers(&t, "text_config", h, t.size("num_attention_heads", 8)?, t.size("intermediate_size", 2048)?, n, eps)?,
        ln(h, eps)?,
        layer(json!({"kind": "select_token", "index": -1}))?,
    ];
    t.refuse_unknown("clip text_config", IGNORED_TOWER)?;
    Ok((Tower { hidden: h, layers }, positions))
}

/// `CLIPConfig` (transformers 5.24): defaults are ViT-B/32 CLIP's.
pub(super) fn clip(c: &Fields, arch: Option<&str>) -> Result<ModelSpec> {
    let (_, name) = pick(arch, &["CLIPModel"], "CLIPModel");
    let empty = Map::new();
    let (v, shape) = vision(sub(c, "vision_config")?.unwrap_or(&empty))?;
    let (t, _) = text(sub(c, "text_config")?.unwrap_or(&empty))?;
    let proj = c.size("projection_dim", 512)?;
    let projection = |i: u64| layer(json!({"kind": "linear", "in_features": i, "out_features": proj, "bias": false}));
    let mut layers = v.layers;
    layers.push(projection(v.hidden)?);
    layers.extend(t.layers);
    layers.push(projection(t.hidden)?);
    layers.push(layer(json!({"kind": "contrastive", "embed_dim": proj}))?);
    c.refuse_unknown("clip", &["logit_scale_init_value", "initializer_factor", "text_config_dict", "vision_config_dict"])?;
    Ok(ModelSpec {
        version: SPEC_VERSION,
        name: Some(name),
        input: InputSpec { shape, dtype: InputDType::Float32, vocab_size: None },
        layers,
        loss: Loss::CrossEntropy,
        names: Default::default(),
        unquantised: None,
    })
}
