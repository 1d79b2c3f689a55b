//! `swin`: as transformers 5.24's `modeling_swin.py` builds `SwinForImageClassification` and
//! `SwinModel` (with its pooler): the patch `projection` (k = s = `patch_size`), flattened to
//! tokens, `embeddings.norm` (LayerNorm, eps 1e-5), absolute `position_embeddings` with
//! `use_absolute_embeddings`, dropout; per stage `i` of `depths`, blocks of `embed_dim · 2^i`
//! channels and `num_heads[i]` heads (`swin_block`: window attention, every odd block shifted by
//! `window_size // 2`, stochastic depth `drop_path_rate · k / (Σ depths − 1)` for block `k`), and
//! `patch_merging` after every stage but the last; the final `layernorm`, the mean over tokens
//! and `classifier` (`nn.Identity` with 0 labels).
//!
//! Each stage's resolution is what `forward` sees (the patch grid, then `(side + 1) // 2` after
//! a merge); a stage no wider than the window attends within one window unshifted
//! (`set_shift_and_window_size`). Refused by name: an image not a whole number of patches (the
//! padded copy is not modelled) and a stage narrower than `window_size` (its relative position
//! bias, sized for `window_size`, no longer matches: transformers' forward fails).

use super::parts::layer;
use crate::error::{Error, Result};
use crate::import::fields::{dropout, pick, Fields};
use crate::layer::transformer::FfnActivation;
use crate::spec::{InputDType, InputSpec, Loss, ModelSpec, SPEC_VERSION};
use serde_json::{json, Value};

/// A list of positive integers (`depths`, `num_heads`).
fn list(c: &Fields, key: &str, default: &[u64]) -> Result<Vec<u64>> {
    match c.get(key) {
        None => Ok(default.to_vec()),
        Some(Value::Array(a)) if !a.is_empty() && a.len() <= 16 => a
            .iter()
            .map(|v| crate::import::fields::as_int(v).filter(|n| *n > 0 && *n <= 1000).ok_or_else(|| Fields::wrong(key, "a list of positive integers", v)))
            .collect(),
        Some(v) => Err(Fields::wrong(key, "a list of 1 to 16 positive integers", v)),
    }
}

/// `SwinConfig` (transformers 5.24): defaults are Swin-T's (224 px, patches of 4, window 7).
pub(super) fn swin(c: &Fields, arch: Option<&str>) -> Result<ModelSpec> {
    let (class, name) = pick(arch, &["SwinForImageClassification", "SwinModel"], "SwinModel");
    let image = c.pair("image_size", 224)?;
    let patch = c.pair("patch_size", 4)?;
    let channels = c.size("num_channels", 3)?;
    let embed = c.size("embed_dim", 96)?;
    let depths = list(c, "depths", &[2, 2, 6, 2])?;
    let heads = list(c, "num_heads", &[3, 6, 12, 24])?;
    if heads.len() != depths.len() {
        return Err(Error::Import(format!("`num_heads` has {} entries for {} stages (`depths`)", heads.len(), depths.len())));
    }
    let window = c.size("window_size", 7)?;
    let mlp_ratio = c.float("mlp_ratio", 4.0)?;
    let qkv_bias = c.flag("qkv_bias", true)?;
    let p = c.prob("hidden_dropout_prob", 0.0)?;
    let attn_p = c.prob("attention_probs_dropout_prob", 0.0)?;
    let rate = c.prob("drop_path_rate", 0.1)?;
    let activation = match c.str("hidden_act")?.unwrap_or("gelu") {
        "gelu" => FfnActivation::Gelu,
        "relu" => FfnActivation::Relu,
        "silu" | "swish" => FfnActivation::Silu,
        other => return Err(Error::Import(format!("field `hidden_act`: `{other}` is not supported (gelu, relu, silu)"))),
    };
    let eps = c.float("layer_norm_eps", 1e-5)?;
    if image[0] % patch[0] != 0 || image[1] % patch[1] != 0 {
        return Err(Error::Import(format!("`image_size` {image:?} is not a whole number of `patch_size` {patch:?} patches: the padded image copy is not modelled")));
    }
    let (mut hh, mut ww) = (image[0] / patch[0], image[1] / patch[1]);
    let mut layers = vec![
        layer(json!({"kind": "conv2d", "in_channels": channels, "out_channels": embed, "kernel_size": patch, "stride": patch}))?,
        layer(json!({"kind": "flatten", "start_dim": 2}))?,
        layer(json!({"kind": "transpose", "dim0": 1, "dim1": 2}))?,
        layer(json!({"kind": "layer_norm", "normalized_shape": embed}))?,
    ];
    if c.flag("use_absolute_embeddings", false)? {
        layers.push(layer(json!({"kind": "positional_embedding", "num_embeddings": hh.saturating_mul(ww), "embedding_dim": embed}))?);
    }
    layers.push(dropout(p)?);
    let total: u64 = depths.iter().sum();
    let mut k = 0u64;
    let mut dim = embed;
    for (i, (&depth, &nh)) in depths.iter().zip(&heads).enumerate() {
        if !dim.is_multiple_of(nh) {
            return Err(Error::Import(format!("stage {i}: {dim} channels are not divisible by num_heads {nh}")));
        }
        let side = hh.min(ww);
        if side < window {
            return Err(Error::Import(format!(
                "stage {i} is {hh}×{ww} tokens, narrower than `window_size` ({window}): its relative position bias no longer fits (transformers' forward fails)"
            )));
        }
        let shifts = side > window;
        for j in 0..depth {
            let drop_path = rate * k as f64 / (total.saturating_sub(1).max(1)) as f64;
            layers.push(layer(json!({"kind": "swin_block", "dim": dim, "num_heads": nh, "resolution": [hh, ww], "window_size": window,
                "shift": shifts && j % 2 == 1, "intermediate_size": (mlp_ratio * dim as f64) as u64, "qkv_bias": qkv_bias,
                "dropout": p, "attention_dropout": attn_p, "drop_path": drop_path, "activation": activation, "layer_norm_eps": eps}))?);
            k += 1;
        }
        if i + 1 < depths.len() {
            layers.push(layer(json!({"kind": "patch_merging", "dim": dim, "resolution": [hh, ww]}))?);
            (hh, ww, dim) = (hh.div_ceil(2), ww.div_ceil(2), dim.saturating_mul(2));
        }
    }
    layers.push(layer(json!({"kind": "layer_norm", "normalized_shape": dim, "eps": eps}))?);
    layers.push(layer(json!({"kind": "token_mean"}))?);
    if class == "SwinForImageClassification" {
        let labels = c.num_labels()?;
        if labels > 0 {
            layers.push(layer(json!({"kind": "linear", "in_features": dim, "out_features": labels}))?);
        }
    }
    // `hidden_size`, `num_layers`, `stage_names` are derived by `__post_init__`; the rest serve
    // other heads (masked image modelling, the backbone); `tie_word_embeddings` is transformers
    // 4.x's generic field (nothing is tied here)
    c.refuse_unknown("swin", &["tie_word_embeddings", "hidden_size", "num_layers", "stage_names", "encoder_stride", "_out_features", "_out_indices", "out_features", "out_indices", "path_norm"])?;
    Ok(ModelSpec {
        version: SPEC_VERSION,
        name: Some(name),
        input: InputSpec { shape: vec![channels, image[0], image[1]], dtype: InputDType::Float32, vocab_size: None },
        layers,
        loss: Loss::CrossEntropy,
        names: Default::default(),
        unquantised: None,
    })
}
