//! `wav2vec2`: as transformers 5.24's `modeling_wav2vec2.py` builds `Wav2Vec2ForCTC` and
//! `Wav2Vec2Model`, on one clip of [`SAMPLES`] samples (10 s at 16 kHz, the input `[1, 1, samples]`):
//! - `Wav2Vec2FeatureEncoder`: `conv_dim`/`conv_kernel`/`conv_stride` `Conv1d`s (biases per
//!   `conv_bias`), with `feat_extract_norm: "group"` a `GroupNorm(C, C)` after the first only, with
//!   `"layer"` a LayerNorm over channels after each (transposed there and back), then the
//!   activation; `Wav2Vec2FeatureProjection`: LayerNorm, `projection`, dropout;
//! - the encoder: `hidden + pos_conv_embed(hidden)` (`positional_conv`: the weight-normed conv,
//!   counted as `parameters()` holds it), then post-norm layers (`do_stable_layer_norm: false`:
//!   LayerNorm, dropout, layers; attention with biases, `feed_forward` with `activation_dropout`
//!   inside) or pre-norm ones with the LayerNorm last (`true`);
//! - `Wav2Vec2ForCTC`: dropout (`final_dropout`), `lm_head` (hidden → `vocab_size`).
//!
//! Modelled as an upper bound: `layerdrop` skips layers at random in training; every layer runs
//! here. The CTC loss is counted as a cross-entropy over the frames' logits (its `[T, B, 2L + 1]`
//! alignment tables are not modelled). Refused by name: `add_adapter`, `adapter_attn_dim` (the
//! adapters), `use_weighted_layer_sum` (the classification heads' only).

use super::parts::{activation, layer, residual};
use crate::error::{Error, Result};
use crate::import::fields::{as_int, dropout, pick, Fields};
use crate::spec::{InputDType, InputSpec, Layer, Loss, ModelSpec, SPEC_VERSION};
use serde_json::{json, Value};

/// The clip the spec is built on: 10 s at 16 kHz.
pub const SAMPLES: u64 = 160_000;

fn list(c: &Fields, key: &str, default: &[u64]) -> Result<Vec<u64>> {
    match c.get(key) {
        None => Ok(default.to_vec()),
        Some(Value::Array(a)) if !a.is_empty() && a.len() <= 32 => {
            a.iter().map(|v| as_int(v).filter(|n| *n > 0 && *n <= 100_000).ok_or_else(|| Fields::wrong(key, "a list of positive integers", v))).collect()
        }
        Some(v) => Err(Fields::wrong(key, "a list of 1 to 32 positive integers", v)),
    }
}

/// Fields of `Wav2Vec2Config` read only by other heads (pre-training's quantiser, the
/// classification and x-vector heads) or by the loss and SpecAugment's masks.
const OTHER_HEADS: &[&str] = &[
    "feat_quantizer_dropout", "num_codevectors_per_group", "num_codevector_groups", "contrastive_logits_temperature",
    "num_negatives", "codevector_dim", "proj_codevector_dim", "diversity_loss_weight", "ctc_loss_reduction", "ctc_zero_infinity",
    "classifier_proj_size", "tdnn_dim", "tdnn_kernel", "tdnn_dilation", "xvector_output_dim", "apply_spec_augment",
    "mask_time_length", "mask_time_min_masks", "mask_feature_length", "mask_feature_min_masks", "num_feat_extract_layers",
    "adapter_kernel_size", "adapter_stride", "num_adapter_layers", "output_hidden_size", "layerdrop",
    // transformers 4.x wrote it into every config; nothing here is tied
    "tie_word_embeddings",
];

/// `Wav2Vec2Config` (transformers 5.24): defaults are wav2vec2-base's.
pub(super) fn wav2vec2(c: &Fields, arch: Option<&str>) -> Result<ModelSpec> {
    let (class, name) = pick(arch, &["Wav2Vec2ForCTC", "Wav2Vec2Model"], "Wav2Vec2Model");
    let h = c.size("hidden_size", 768)?;
    let heads = c.size("num_attention_heads", 12)?;
    super::dense::divisible(h, heads)?;
    let n = super::dense::layer_count(c, "num_hidden_layers", 12)?;
    let inter = c.size("intermediate_size", 3072)?;
    let eps = c.float("layer_norm_eps", 1e-5)?;
    let (p, act_p, attn_p) = (c.prob("hidden_dropout", 0.1)?, c.prob("activation_dropout", 0.1)?, c.prob("attention_dropout", 0.1)?);
    let dims = list(c, "conv_dim", &[512; 7])?;
    let strides = list(c, "conv_stride", &[5, 2, 2, 2, 2, 2, 2])?;
    let kernels = list(c, "conv_kernel", &[10, 3, 3, 3, 3, 2, 2])?;
    if dims.len() != strides.len() || dims.len() != kernels.len() {
        return Err(Error::Import(format!("`conv_dim`, `conv_stride` and `conv_kernel` must be as long ({}, {}, {})", dims.len(), strides.len(), kernels.len())));
    }
    let conv_bias = c.flag("conv_bias", false)?;
    let norm = c.str("feat_extract_norm")?.unwrap_or("group").to_string();
    let feat_act = c.str("feat_extract_activation")?.unwrap_or("gelu").to_string();
    if feat_act != "gelu" {
        return Err(Error::Import(format!("field `feat_extract_activation`: `{feat_act}` is not modelled (gelu)")));
    }
    for (key, on) in [("add_adapter", c.flag("add_adapter", false)?), ("adapter_attn_dim", c.opt_int("adapter_attn_dim")?.is_some()), ("use_weighted_layer_sum", c.flag("use_weighted_layer_sum", false)?)] {
        if on {
            return Err(Error::Import(format!("field `{key}`: the adapters and weighted layer sums are not modelled")));
        }
    }
    // the clip as `[1, 1, samples]` (an image-like input: `--seq-len` does not resize it),
    // flattened to the conv stack's `[1, samples]` (`input_values[:, None]`, a view)
    let mut layers = vec![layer(json!({"kind": "flatten", "start_dim": 2}))?];
    let mut len = SAMPLES;
    let mut ch = 1u64;
    for (i, ((&d, &s), &k)) in dims.iter().zip(&strides).zip(&kernels).enumerate() {
        if len < k {
            return Err(Error::Import(format!("conv layer {i} (kernel {k}) gets {len} steps of a {SAMPLES}-sample clip")));
        }
        layers.push(layer(json!({"kind": "conv1d", "in_channels": ch, "out_channels": d, "kernel_size": k, "stride": s, "bias": conv_bias}))?);
        match norm.as_str() {
            "group" if i == 0 => layers.push(layer(json!({"kind": "group_norm", "num_groups": d, "num_channels": d}))?),
            "group" => {}
            "layer" => {
                layers.push(layer(json!({"kind": "transpose", "dim0": 1, "dim1": 2}))?);
                layers.push(layer(json!({"kind": "layer_norm", "normalized_shape": d}))?);
                layers.push(layer(json!({"kind": "transpose", "dim0": 1, "dim1": 2}))?);
            }
            other => return Err(Error::Import(format!("field `feat_extract_norm`: `{other}` is not one transformers builds (group, layer)"))),
        }
        layers.push(layer(json!({"kind": "gelu"}))?);
        (len, ch) = ((len - k) / s + 1, d);
    }
    layers.push(layer(json!({"kind": "transpose", "dim0": 1, "dim1": 2}))?);
    layers.push(layer(json!({"kind": "layer_norm", "normalized_shape": ch, "eps": eps}))?);
    layers.push(layer(json!({"kind": "linear", "in_features": ch, "out_features": h}))?);
    layers.push(dropout(c.prob("feat_proj_dropout", 0.0)?)?);
    let (time, feature) = (c.prob("mask_time_prob", 0.05)?, c.prob("mask_feature_prob", 0.0)?);
    let mask_embed = time > 0.0 || feature > 0.0;
    layers.push(residual(vec![layer(json!({"kind": "positional_conv", "hidden_size": h, "kernel_size": c.size("num_conv_pos_embeddings", 128)?,
        "groups": c.size("num_conv_pos_embedding_groups", 16)?, "mask_embed": mask_embed}))?]));
    let ln = || layer(json!({"kind": "layer_norm", "normalized_shape": h, "eps": eps}));
    let attention = || layer(json!({"kind": "multihead_attention", "embed_dim": h, "num_heads": heads, "dropout": attn_p, "bias": true}));
    let act = c.str("hidden_act")?.unwrap_or("gelu").to_string();
    let ff = || -> Result<Vec<Layer>> {
        Ok(vec![
            layer(json!({"kind": "linear", "in_features": h, "out_features": inter}))?,
            activation("hidden_act", &act)?,
            dropout(act_p)?,
            layer(json!({"kind": "linear", "in_features": inter, "out_features": h}))?,
            dropout(p)?,
        ])
    };
    if c.flag("do_stable_layer_norm", false)? {
        layers.push(dropout(p)?);
        let mut f = vec![ln()?];
        f.extend(ff()?);
        layers.push(Layer::Repeat { times: n, body: vec![residual(vec![ln()?, attention()?, dropout(p)?]), residual(f)] });
        layers.push(ln()?);
    } else {
        layers.push(ln()?);
        layers.push(dropout(p)?);
        layers.push(Layer::Repeat { times: n, body: vec![residual(vec![attention()?, dropout(p)?]), ln()?, residual(ff()?), ln()?] });
    }
    if class == "Wav2Vec2ForCTC" {
        let vocab = match c.opt_int("vocab_size")? {
            Some(v) if v > 0 => v,
            _ if c.0.contains_key("vocab_size") => return Err(Error::Import("Wav2Vec2ForCTC needs `vocab_size` (its lm_head's size)".into())),
            _ => 32,
        };
        layers.push(dropout(c.prob("final_dropout", 0.1)?)?);
        layers.push(layer(json!({"kind": "linear", "in_features": h, "out_features": vocab}))?);
    } else {
        c.get("vocab_size");
        c.get("final_dropout");
    }
    c.refuse_unknown("wav2vec2", OTHER_HEADS)?;
    Ok(ModelSpec {
        version: SPEC_VERSION,
        name: Some(name),
        input: InputSpec { shape: vec![1, 1, SAMPLES], dtype: InputDType::Float32, vocab_size: None },
        layers,
        loss: Loss::CrossEntropy,
        names: Default::default(),
        unquantised: None,
    })
}
