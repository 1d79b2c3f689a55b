//! `siglip`: two towers, as transformers 5.24's `modeling_siglip.py` builds `SiglipModel`. The
//! spec's input is the image; the vision tower (`SiglipVisionModel`: patch conv with bias,
//! positions, pre-norm layers with the tanh GELU, `post_layernorm`, and the attention-pooling head
//! `attention_pool` when `vision_use_head`, its default) gives the image embedding; a `token_input`
//! of `max_position_embeddings` (64) token ids starts the text tower (`SiglipTextModel`: token and
//! position embeddings, bidirectional pre-norm layers, `final_layer_norm`, the last token,
//! `head: Linear(D, projection_size)`), and `contrastive` compares the two with `logit_scale` and
//! `logit_bias` (the sigmoid loss's memory as CLIP's). `projection_size` defaults to the text
//! width and must equal the vision width (the similarity is a dot product of the two).

use super::parts::{image_model, layer, tower_layer};
use super::vlm::{siglip as vision_tower, sub};
use crate::error::{Error, Result};
use crate::import::fields::{pick, Fields};
use crate::layer::transformer::FfnActivation;
use crate::spec::{Layer, ModelSpec};
use serde_json::{json, Map, Value};

/// `SiglipTextConfig` (transformers 5.24): `(layers, hidden, projection)`.
fn text(obj: &Map<String, Value>) -> Result<(Vec<Layer>, u64)> {
    let t = Fields::new(obj);
    let h = t.size("hidden_size", 768)?;
    let heads = t.size("num_attention_heads", 12)?;
    let vocab = t.size("vocab_size", 32000)?;
    let positions = t.size("max_position_embeddings", 64)?;
    let eps = t.float("layer_norm_eps", 1e-6)?;
    let proj = t.size("projection_size", h)?;
    let enc = tower_layer(&t, h, heads, t.size("intermediate_size", 3072)?, eps, FfnActivation::GeluTanh)?;
    let layers = vec![
        layer(json!({"kind": "token_input", "seq_len": positions}))?,
        layer(json!({"kind": "embedding", "num_embeddings": vocab, "embedding_dim": h}))?,
        layer(json!({"kind": "positional_embedding", "num_embeddings": positions, "embedding_dim": h, "index_buffer": positions}))?,
        Layer::Repeat { times: t.size("num_hidden_layers", 12)?, body: vec![Layer::TransformerEncoderLayer(enc)] },
        layer(json!({"kind": "layer_norm", "normalized_shape": h, "eps": eps}))?,
        layer(json!({"kind": "select_token", "index": -1}))?,
        layer(json!({"kind": "linear", "in_features": h, "out_features": proj}))?,
    ];
    t.refuse_unknown("siglip text_config", &["model_type", "initializer_range", "initializer_factor", "projection_dim"])?;
    Ok((layers, proj))
}

/// `SiglipConfig` (transformers 5.24).
pub(super) fn siglip(c: &Fields, arch: Option<&str>) -> Result<ModelSpec> {
    let (_, name) = pick(arch, &["SiglipModel"], "SiglipModel");
    let vision = sub(c, "vision_config")?;
    if !Fields::new(&vision).flag("vision_use_head", true)? {
        return Err(Error::Import("vision_config: `vision_use_head: false`: SiglipModel's image embedding is its pooling head's output".into()));
    }
    let (mut layers, channels, image, hv, _, _) = vision_tower(&vision, "siglip", &["vision_use_head"])?;
    let (text_layers, proj) = text(&sub(c, "text_config")?)?;
    if proj != hv {
        return Err(Error::Import(format!("text_config: `projection_size` ({proj}) must equal the vision tower's hidden_size ({hv})")));
    }
    layers.extend(text_layers);
    layers.push(layer(json!({"kind": "contrastive", "embed_dim": proj, "bias": true}))?);
    for key in ["vision_config", "text_config"] {
        c.get(key);
    }
    c.refuse_unknown("siglip", &["initializer_factor"])?;
    Ok(image_model(name, channels, image, layers))
}
