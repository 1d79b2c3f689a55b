//! `dinov2`: as transformers 5.24's `modeling_dinov2.py` builds `Dinov2ForImageClassification`
//! and `Dinov2Model`. The spec's input is one `num_channels × image_size²` image:
//! - `Dinov2Embeddings`: patch conv with bias (k = s = `patch_size`), flatten and transpose,
//!   `cls_token`, `position_embeddings` (`patches + 1` rows; `interpolate_pos_encoding` returns
//!   the table itself for a square image of the configured size), dropout. `mask_token` (with
//!   `use_mask_token`) is only read with `bool_masked_pos`, which a training step of the
//!   classifier never passes: its `[D]` parameter is counted as one more row of the position table
//!   (the same count; one unused row).
//! - `Dinov2Layer`: `x + layer_scale1(attn(norm1(x)))` (Q/K/V bias per `qkv_bias`, the output
//!   projection always with one; the output dropout `hidden_dropout_prob`), then `x +
//!   layer_scale2(mlp(norm2(x)))`, the MLP `fc1, act, fc2` of `int(hidden · mlp_ratio)` or, with
//!   `use_swiglu_ffn`, `Dinov2SwiGLUFFN` (`(int(int(hidden·mlp_ratio)·2/3) + 7) // 8 · 8` wide,
//!   biases, SiLU gate).
//! - `layernorm`; the classifier: `cat([CLS], mean of the patch tokens)` (`cls_mean_pool`) and
//!   `Linear(2·hidden, num_labels)` (`nn.Identity` at 0 labels); the bare model ends with its
//!   pooler output, `[CLS]`.
//!
//! Refused by name: `drop_path_rate` above 0 (stochastic depth's random masks).

use super::parts::{activation, image_model, layer, residual};
use crate::error::{Error, Result};
use crate::import::fields::{dropout, pick, Fields};
use crate::spec::{Layer, ModelSpec};
use serde_json::json;

const IGNORED_DINOV2: &[&str] = &["_out_features", "_out_indices", "out_features", "out_indices", "stage_names", "apply_layernorm", "reshape_hidden_states", "layerscale_value"];

/// `Dinov2Config` (transformers 5.24): defaults are DINOv2-base's at 224 × 224.
pub(super) fn dinov2(c: &Fields, arch: Option<&str>) -> Result<ModelSpec> {
    let (class, name) = pick(arch, &["Dinov2ForImageClassification", "Dinov2Model"], "Dinov2Model");
    let h = c.size("hidden_size", 768)?;
    let heads = c.size("num_attention_heads", 12)?;
    let n = c.size("num_hidden_layers", 12)?;
    let ratio = c.float("mlp_ratio", 4.0)?;
    let eps = c.float("layer_norm_eps", 1e-6)?;
    let p = c.prob("hidden_dropout_prob", 0.0)?;
    let attn_p = c.prob("attention_probs_dropout_prob", 0.0)?;
    let channels = c.size("num_channels", 3)?;
    let image = c.size("image_size", 224)?;
    let patch = c.size("patch_size", 14)?;
    let qkv_bias = c.flag("qkv_bias", true)?;
    if c.prob("drop_path_rate", 0.0)? > 0.0 {
        return Err(Error::Import("field `drop_path_rate`: above 0 (stochastic depth) is not supported".into()));
    }
    if image < patch {
        return Err(Error::Import(format!("`image_size` {image} is smaller than `patch_size` {patch}")));
    }
    if !(ratio.is_finite() && ratio > 0.0) {
        return Err(Error::Import(format!("field `mlp_ratio` ({ratio}) must be a positive number")));
    }
    let act = activation("hidden_act", c.str("hidden_act")?.unwrap_or("gelu"))?;
    let patches = (image / patch).saturating_mul(image / patch);
    let mask_token = u64::from(c.flag("use_mask_token", true)?);
    let norm = || layer(json!({"kind": "layer_norm", "normalized_shape": h, "eps": eps}));
    let scale = || layer(json!({"kind": "layer_scale", "dim": h}));
    let hidden = (h as f64 * ratio) as u64;
    let mlp = if c.flag("use_swiglu_ffn", false)? {
        let wide = ((hidden as f64 * 2.0 / 3.0) as u64).div_ceil(8) * 8;
        vec![layer(json!({"kind": "gated_mlp", "hidden_size": h, "intermediate_size": wide, "bias": true}))?]
    } else {
        let lin = |i: u64, o: u64| layer(json!({"kind": "linear", "in_features": i, "out_features": o}));
        vec![lin(h, hidden)?, act, lin(hidden, h)?]
    };
    let attn = json!({"kind": "multihead_attention", "embed_dim": h, "num_heads": heads, "dropout": attn_p, "bias": qkv_bias, "out_bias": true});
    let mut ffn = vec![norm()?];
    ffn.extend(mlp);
    ffn.push(scale()?);
    let block = vec![residual(vec![norm()?, layer(attn)?, dropout(p)?, scale()?]), residual(ffn)];
    let mut layers = vec![
        layer(json!({"kind": "conv2d", "in_channels": channels, "out_channels": h, "kernel_size": patch, "stride": patch}))?,
        layer(json!({"kind": "flatten", "start_dim": 2}))?,
        layer(json!({"kind": "transpose", "dim0": 1, "dim1": 2}))?,
        layer(json!({"kind": "cls_token", "embedding_dim": h}))?,
        layer(json!({"kind": "positional_embedding", "num_embeddings": patches + 1 + mask_token, "embedding_dim": h}))?,
        dropout(p)?,
        Layer::Repeat { times: n, body: block },
        norm()?,
    ];
    if class == "Dinov2ForImageClassification" {
        layers.push(layer(json!({"kind": "cls_mean_pool"}))?);
        let labels = c.num_labels()?;
        if labels > 0 {
            layers.push(layer(json!({"kind": "linear", "in_features": 2 * h, "out_features": labels}))?);
        }
    } else {
        layers.push(layer(json!({"kind": "select_token", "index": 0}))?);
    }
    c.refuse_unknown("dinov2", IGNORED_DINOV2)?;
    Ok(image_model(name, channels, image, layers))
}
