//! `convnext`: as transformers 5.24's `modeling_convnext.py` builds
//! `ConvNextForImageClassification` and `ConvNextModel`. The spec's input is one
//! `num_channels × image_size²` image:
//! - `ConvNextEmbeddings`: `Conv2d(C, hidden_sizes[0], patch_size, stride=patch_size)` and a
//!   channels-first `ConvNextLayerNorm` (eps 1e-6: `permute(0, 2, 3, 1)`, LayerNorm,
//!   `permute(0, 3, 1, 2)`, the permutes written as two `transpose` views each);
//! - per stage `i`: from the second on, the downsampling channels-first LayerNorm and
//!   `Conv2d(in, out, 2, stride=2)`; then `depths[i]` × `ConvNextLayer`: `x + layer_scale(
//!   pwconv2(act(pwconv1(LN(dwconv(x).permute)))) ).permute` with the 7 × 7 depthwise conv
//!   (`groups = dim`, padding 3), `Linear(dim, 4·dim)`, `hidden_act`, `Linear(4·dim, dim)` and
//!   the `[dim]` layer scale when `layer_scale_init_value > 0`;
//! - the pooler: the mean over H and W (an `adaptive_avg_pool2d` to 1 and a flatten),
//!   `layernorm` (`layer_norm_eps`), and the classifier `Linear(hidden_sizes[-1], num_labels)`
//!   (`nn.Identity` at 0 labels).
//!
//! Refused by name: `drop_path_rate` above 0 (stochastic depth's random masks).

use super::parts::{activation, image_model, layer, residual};
use crate::error::{Error, Result};
use crate::import::fields::{pick, Fields};
use crate::spec::{Layer, ModelSpec};
use serde_json::{json, Value};

const IGNORED_CONVNEXT: &[&str] = &["_out_features", "_out_indices", "out_features", "out_indices", "stage_names"];

/// A list of positive sizes (`hidden_sizes`, `depths`), `default` when absent.
fn sizes(c: &Fields, key: &str, default: &[u64]) -> Result<Vec<u64>> {
    match c.get(key) {
        None | Some(Value::Null) => Ok(default.to_vec()),
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| v.as_u64().filter(|&x| x > 0).ok_or_else(|| Fields::wrong(key, "a list of positive integers", v)))
            .collect(),
        Some(v) => Err(Fields::wrong(key, "a list of positive integers", v)),
    }
}

/// `[C, H, W]` → `[H, W, C]` (`permute(0, 2, 3, 1)`) and back, as two transposes each.
fn to_last() -> Result<Vec<Layer>> {
    Ok(vec![layer(json!({"kind": "transpose", "dim0": 1, "dim1": 2}))?, layer(json!({"kind": "transpose", "dim0": 2, "dim1": 3}))?])
}
fn to_first() -> Result<Vec<Layer>> {
    Ok(vec![layer(json!({"kind": "transpose", "dim0": 2, "dim1": 3}))?, layer(json!({"kind": "transpose", "dim0": 1, "dim1": 2}))?])
}

/// A channels-first `ConvNextLayerNorm`.
fn ln_first(dim: u64) -> Result<Vec<Layer>> {
    let mut v = to_last()?;
    v.push(layer(json!({"kind": "layer_norm", "normalized_shape": dim, "eps": 1e-6}))?);
    v.extend(to_first()?);
    Ok(v)
}

/// `ConvNextConfig` (transformers 5.24): defaults are ConvNeXt-T's at 224 × 224.
pub(super) fn convnext(c: &Fields, arch: Option<&str>) -> Result<ModelSpec> {
    let (class, name) = pick(arch, &["ConvNextForImageClassification", "ConvNextModel"], "ConvNextModel");
    let channels = c.size("num_channels", 3)?;
    let patch = c.size("patch_size", 4)?;
    let image = c.size("image_size", 224)?;
    let hidden = sizes(c, "hidden_sizes", &[96, 192, 384, 768])?;
    let depths = sizes(c, "depths", &[3, 3, 9, 3])?;
    let stages = c.size("num_stages", 4)?;
    if hidden.len() as u64 != stages || depths.len() as u64 != stages {
        return Err(Error::Import(format!(
            "`hidden_sizes` ({}) and `depths` ({}) must have `num_stages` ({stages}) entries",
            hidden.len(),
            depths.len()
        )));
    }
    if c.prob("drop_path_rate", 0.0)? > 0.0 {
        return Err(Error::Import("field `drop_path_rate`: above 0 (stochastic depth) is not supported".into()));
    }
    let scale = c.float("layer_scale_init_value", 1e-6)? > 0.0;
    let eps = c.float("layer_norm_eps", 1e-12)?;
    let act = activation("hidden_act", c.str("hidden_act")?.unwrap_or("gelu"))?;
    let conv = |i: u64, o: u64, k: u64, s: u64, p: u64, g: u64| {
        layer(json!({"kind": "conv2d", "in_channels": i, "out_channels": o, "kernel_size": k, "stride": s, "padding": p, "groups": g}))
    };
    let mut layers = vec![conv(channels, hidden[0], patch, patch, 0, 1)?];
    layers.extend(ln_first(hidden[0])?);
    let mut prev = hidden[0];
    for (i, (&dim, &depth)) in hidden.iter().zip(&depths).enumerate() {
        if i > 0 {
            layers.extend(ln_first(prev)?);
            layers.push(conv(prev, dim, 2, 2, 0, 1)?);
        }
        let mut body = vec![conv(dim, dim, 7, 1, 3, dim)?];
        body.extend(to_last()?);
        body.push(layer(json!({"kind": "layer_norm", "normalized_shape": dim, "eps": 1e-6}))?);
        body.push(layer(json!({"kind": "linear", "in_features": dim, "out_features": 4 * dim}))?);
        body.push(act.clone());
        body.push(layer(json!({"kind": "linear", "in_features": 4 * dim, "out_features": dim}))?);
        if scale {
            body.push(layer(json!({"kind": "layer_scale", "dim": dim}))?);
        }
        body.extend(to_first()?);
        layers.push(Layer::Repeat { times: depth, body: vec![residual(body)] });
        prev = dim;
    }
    layers.push(layer(json!({"kind": "adaptive_avg_pool2d", "output_size": 1}))?);
    layers.push(layer(json!({"kind": "flatten"}))?);
    layers.push(layer(json!({"kind": "layer_norm", "normalized_shape": prev, "eps": eps}))?);
    if class == "ConvNextForImageClassification" {
        let labels = c.num_labels()?;
        if labels > 0 {
            layers.push(layer(json!({"kind": "linear", "in_features": prev, "out_features": labels}))?);
        }
    }
    c.refuse_unknown("convnext", IGNORED_CONVNEXT)?;
    Ok(image_model(name, channels, image, layers))
}
