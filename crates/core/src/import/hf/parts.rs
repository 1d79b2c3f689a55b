//! Pieces the image and encoder–decoder importers of issue 25 share: a spec layer from its JSON,
//! a tower's encoder layer, a residual block, an activation by its transformers name, and the spec of a model on one image.

use crate::error::{Error, Result};
use crate::import::fields::{invalid, Fields};
use crate::layer::transformer::{FfnActivation, TransformerLayer};
use crate::presets;
use crate::spec::{InputDType, InputSpec, Layer, Loss, ModelSpec, SPEC_VERSION};
use serde_json::{json, Value};

/// A spec layer from its JSON (`{"kind": …, …}`); an importer's own mistake if it does not parse.
pub(super) fn layer(v: Value) -> Result<Layer> {
    let kind = v["kind"].as_str().unwrap_or("layer").to_string();
    serde_json::from_value(v).map_err(|_| invalid(&kind))
}

/// A vision or text tower's pre-norm encoder layer (CLIP's, SigLIP's): no dropout but
/// `attention_dropout`, `hidden_act` (default `act`), LayerNorm with `eps`.
pub(super) fn tower_layer(t: &Fields, h: u64, heads: u64, inter: u64, eps: f64, act: FfnActivation) -> Result<TransformerLayer> {
    Ok(TransformerLayer {
        dropout: 0.0,
        attention_dropout: Some(t.prob("attention_dropout", 0.0)?),
        activation: t.activation("hidden_act", act)?,
        layer_norm_eps: eps,
        norm_first: true,
        ..presets::transformer_layer(h, heads, inter)
    })
}

/// `body(x) + x`.
pub(super) fn residual(body: Vec<Layer>) -> Layer {
    Layer::Residual { body, shortcut: None, inplace: false }
}

/// The activation `ACT2FN[name]` as a spec layer; `field` names the config field in the error.
pub(super) fn activation(field: &str, name: &str) -> Result<Layer> {
    layer(match name {
        "gelu" => json!({"kind": "gelu"}),
        "gelu_new" | "gelu_pytorch_tanh" | "gelu_fast" => json!({"kind": "gelu", "approximate": "tanh"}),
        "relu" => json!({"kind": "relu"}),
        "silu" | "swish" => json!({"kind": "silu"}),
        other => return Err(Error::Import(format!("field `{field}`: `{other}` is not supported (gelu, gelu_new, gelu_pytorch_tanh, relu, silu)"))),
    })
}

/// A classifier (or bare model) on one `channels × image²` image.
pub(super) fn image_model(name: String, channels: u64, image: u64, layers: Vec<Layer>) -> ModelSpec {
    ModelSpec {
        version: SPEC_VERSION,
        name: Some(name),
        input: InputSpec { shape: vec![channels, image, image], dtype: InputDType::Float32, vocab_size: None },
        layers,
        loss: Loss::CrossEntropy,
        names: Default::default(),
        unquantised: None,
    }
}
