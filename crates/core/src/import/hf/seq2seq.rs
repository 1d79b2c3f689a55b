//! Encoder–decoders: `t5` and `whisper`, as transformers 5.24's `modeling_t5.py` and
//! `modeling_whisper.py` build them. The spec lists the encoder's layers, a `token_input` (the
//! decoder's ids; the encoder's output becomes the memory its `cross_attention` layers read),
//! then the decoder's layers and the LM head. Each encoder or decoder block is one repetition of
//! a `repeat` (one checkpointing unit) made of pre-norm `residual` blocks.
//!
//! Training input: the spec's input is the encoder's (`seq_len` overrides it: T5's source
//! tokens, default [`T5_SOURCE_LEN`]; Whisper's log-mel frames, default `2 × max_source_positions`
//! = 3000, and fewer are allowed — transformers insists on 3000, a shorter clip only shortens
//! the encoder). The decoder's length is fixed in the spec's `token_input`: T5
//! [`T5_TARGET_LEN`] target tokens, Whisper `max_target_positions` (448, its longest
//! transcript). The loss is cross-entropy of the logits against the labels, as
//! `T5ForConditionalGeneration` and `WhisperForConditionalGeneration` compute it.
//!
//! | family | built as |
//! |---|---|
//! | `t5` | shared embedding; per stack a `relative_position_bias` (bidirectional in the encoder), RMS-norm blocks without biases (`d_kv` heads), ReLU / GELU or gated-GELU (`feed_forward_proj`) MLP; the LM head is always `shared` (transformers 5.24 `T5Config` forces `tie_word_embeddings = True`; `false` only drops the `d_model^-0.5` scaling before it) |
//! | `whisper` | conv1d (k 3) + GELU, conv1d (k 3, stride 2) + GELU on `[frames, num_mel_bins]`, sinusoidal positions (a frozen table, counted as a parameter), pre-LayerNorm blocks (K projection without bias), decoder with learned positions, `proj_out` tied to the token embedding |

use crate::import::fields::{dropout, invalid, pick, Fields};
use crate::error::{Error, Result};
use crate::spec::{InputDType, InputSpec, Layer, Loss, ModelSpec, SPEC_VERSION};
use serde_json::{json, Value};

/// T5's default source length (its pre-training inputs).
pub const T5_SOURCE_LEN: u64 = 512;
/// T5's default target length (the decoder's tokens).
pub const T5_TARGET_LEN: u64 = 128;
/// More layers than this per stack is not a real config.
const MAX_LAYERS: u64 = 10_000;

fn layer(v: Value) -> Result<Layer> {
    let kind = v["kind"].as_str().unwrap_or("layer").to_string();
    serde_json::from_value(v).map_err(|_| invalid(&kind))
}

fn residual(body: Vec<Layer>) -> Layer {
    Layer::Residual { body, shortcut: None, inplace: false }
}

fn layers(c: &Fields, key: &str, default: u64) -> Result<u64> {
    let n = c.size(key, default)?;
    if n > MAX_LAYERS {
        return Err(Error::Import(format!("field `{key}` ({n}) is more than {MAX_LAYERS} layers")));
    }
    Ok(n)
}

fn model(name: String, input: InputSpec, layers: Vec<Layer>) -> ModelSpec {
    ModelSpec { version: SPEC_VERSION, name: Some(name), input, layers, loss: Loss::CrossEntropy, names: Default::default(), unquantised: None }
}

/// Fields of `T5Config` that change neither parameters nor training memory (`dense_act_fn`,
/// `is_gated_act` and `scale_decoder_outputs` are derived from the others by `__post_init__`).
const IGNORED_T5: &[&str] = &[
    "relative_attention_max_distance", "initializer_factor", "n_positions", "output_past", "dense_act_fn",
    "is_gated_act", "scale_decoder_outputs", "classifier_dropout", "feed_forward_proj_type",
];

/// `T5Config` (transformers 5.24): defaults are t5-small's.
pub(super) fn t5(c: &Fields, arch: Option<&str>) -> Result<ModelSpec> {
    let (class, name) = pick(arch, &["T5ForConditionalGeneration", "T5Model", "T5EncoderModel"], "T5Model");
    let d = c.size("d_model", 512)?;
    let dkv = c.size("d_kv", 64)?;
    let ff = c.size("d_ff", 2048)?;
    let heads = c.size("num_heads", 8)?;
    let n_enc = layers(c, "num_layers", 6)?;
    let n_dec = match c.opt_int("num_decoder_layers")? {
        Some(0) => return Err(Error::Import("field `num_decoder_layers` must be at least 1".into())),
        Some(n) if n > MAX_LAYERS => return Err(Error::Import(format!("field `num_decoder_layers` ({n}) is more than {MAX_LAYERS} layers"))),
        Some(n) => n,
        None => n_enc,
    };
    let buckets = c.size("relative_attention_num_buckets", 32)?;
    let vocab = c.size("vocab_size", 32128)?;
    let p = c.prob("dropout_rate", 0.1)?;
    let eps = c.float("layer_norm_epsilon", 1e-6)?;
    let proj = c.str("feed_forward_proj")?.unwrap_or("relu").to_string();
    let (gated, act) = match proj.split('-').collect::<Vec<_>>().as_slice() {
        [act] => (false, *act),
        ["gated", act] => (true, *act),
        _ => return Err(Error::Import(format!("field `feed_forward_proj`: `{proj}` is not `ACT` or `gated-ACT`"))),
    };
    // the decoder's output is scaled by d_model^-0.5 unless `tie_word_embeddings` is false
    let scale = c.flag("tie_word_embeddings", true)?;
    let norm = || layer(json!({"kind": "rms_norm", "normalized_shape": d, "eps": eps, "t5": true}));
    let attention = |causal: bool| {
        layer(json!({"kind": "multihead_attention", "embed_dim": d, "num_heads": heads, "head_dim": dkv, "bias": false,
            "dropout": p, "causal": causal, "position_bias": true}))
    };
    let ffn = || -> Result<Vec<Layer>> {
        let lin = |i: u64, o: u64| layer(json!({"kind": "linear", "in_features": i, "out_features": o, "bias": false}));
        Ok(match (gated, act) {
            // `gated-gelu` runs `gelu_new` (T5Config.__post_init__)
            (true, "gelu" | "gelu_new") => vec![norm()?, layer(json!({"kind": "gated_mlp", "hidden_size": d, "intermediate_size": ff, "gelu_new_dropout": p}))?, dropout(p)?],
            (false, "relu" | "gelu" | "gelu_new") => {
                let a = match act {
                    "relu" => layer(json!({"kind": "relu"}))?,
                    "gelu" => layer(json!({"kind": "gelu"}))?,
                    _ => layer(json!({"kind": "gelu", "approximate": "new"}))?,
                };
                vec![norm()?, lin(d, ff)?, a, dropout(p)?, lin(ff, d)?, dropout(p)?]
            }
            _ => return Err(Error::Import(format!("field `feed_forward_proj`: `{proj}` is not supported (relu, gelu, gelu_new, gated-gelu)"))),
        })
    };
    let stack = |n: u64, decoder: bool| -> Result<Vec<Layer>> {
        let mut block = vec![residual(vec![norm()?, attention(decoder)?, dropout(p)?])];
        if decoder {
            let cross = json!({"kind": "cross_attention", "embed_dim": d, "num_heads": heads, "head_dim": dkv, "bias": false,
                "dropout": p, "position_bias": true});
            block.push(residual(vec![norm()?, layer(cross)?, dropout(p)?]));
        }
        block.push(residual(ffn()?));
        Ok(vec![
            layer(json!({"kind": "relative_position_bias", "num_buckets": buckets, "num_heads": heads, "bidirectional": !decoder}))?,
            dropout(p)?,
            Layer::Repeat { times: n, body: block },
            norm()?,
            dropout(p)?,
        ])
    };
    let mut spec = vec![layer(json!({"kind": "embedding", "num_embeddings": vocab, "embedding_dim": d}))?];
    spec.extend(stack(n_enc, false)?);
    if class != "T5EncoderModel" {
        spec.push(layer(json!({"kind": "token_input", "seq_len": T5_TARGET_LEN}))?);
        spec.push(layer(json!({"kind": "embedding", "num_embeddings": vocab, "embedding_dim": d, "tied_weight": true}))?);
        spec.extend(stack(n_dec, true)?);
    }
    if class == "T5ForConditionalGeneration" {
        if scale {
            spec.push(layer(json!({"kind": "scale", "factor": (d as f64).powf(-0.5)}))?);
        }
        spec.push(layer(json!({"kind": "linear", "in_features": d, "out_features": vocab, "bias": false, "tied_weight": true}))?);
    }
    c.refuse_unknown("t5", IGNORED_T5)?;
    let input = InputSpec { shape: vec![T5_SOURCE_LEN], dtype: InputDType::Int64, vocab_size: Some(vocab) };
    Ok(model(name, input, spec))
}

/// Fields of `WhisperConfig` that change neither parameters nor training memory (SpecAugment,
/// generation and the classifier head's settings).
const IGNORED_WHISPER: &[&str] = &[
    "encoder_layerdrop", "decoder_layerdrop", "apply_spec_augment", "mask_time_prob", "mask_time_length",
    "mask_time_min_masks", "mask_feature_prob", "mask_feature_length", "mask_feature_min_masks", "median_filter_width",
    "classifier_proj_size", "use_weighted_layer_sum", "num_hidden_layers", "alignment_heads", "lang_ids",
];

/// `WhisperConfig` (transformers 5.24): defaults are whisper-tiny's.
pub(super) fn whisper(c: &Fields, arch: Option<&str>) -> Result<ModelSpec> {
    let (class, name) = pick(arch, &["WhisperForConditionalGeneration", "WhisperModel"], "WhisperModel");
    let d = c.size("d_model", 384)?;
    let mels = c.size("num_mel_bins", 80)?;
    let vocab = c.size("vocab_size", 51865)?;
    let source = c.size("max_source_positions", 1500)?;
    let target = c.size("max_target_positions", 448)?;
    let p = c.prob("dropout", 0.0)?;
    let attn_p = c.prob("attention_dropout", 0.0)?;
    let act_p = c.prob("activation_dropout", 0.0)?;
    if c.flag("scale_embedding", false)? {
        return Err(Error::Import("field `scale_embedding`: true is not supported (only false)".into()));
    }
    let gelu = match c.str("activation_function")?.unwrap_or("gelu") {
        "gelu" => json!({"kind": "gelu"}),
        "gelu_new" => json!({"kind": "gelu", "approximate": "new"}),
        "relu" => json!({"kind": "relu"}),
        other => return Err(Error::Import(format!("field `activation_function`: `{other}` is not supported (gelu, gelu_new, relu)"))),
    };
    let norm = || layer(json!({"kind": "layer_norm", "normalized_shape": d, "eps": 1e-5}));
    let stack = |heads_key: &str, ffn_key: &str, layers_key: &str, decoder: bool| -> Result<Layer> {
        let heads = c.size(heads_key, 6)?;
        let ffn = c.size(ffn_key, 1536)?;
        let n = layers(c, layers_key, 4)?;
        let attn = json!({"kind": "multihead_attention", "embed_dim": d, "num_heads": heads, "dropout": attn_p, "causal": decoder,
            "key_bias": false, "contiguous_heads": true});
        let mut block = vec![residual(vec![norm()?, layer(attn)?, dropout(p)?])];
        if decoder {
            let cross = json!({"kind": "cross_attention", "embed_dim": d, "num_heads": heads, "dropout": attn_p, "key_bias": false,
                "contiguous_heads": true});
            block.push(residual(vec![norm()?, layer(cross)?, dropout(p)?]));
        }
        let lin = |i: u64, o: u64| layer(json!({"kind": "linear", "in_features": i, "out_features": o}));
        block.push(residual(vec![norm()?, lin(d, ffn)?, layer(gelu.clone())?, dropout(act_p)?, lin(ffn, d)?, dropout(p)?]));
        Ok(Layer::Repeat { times: n, body: block })
    };
    let positions = |n: u64| layer(json!({"kind": "positional_embedding", "num_embeddings": n, "embedding_dim": d}));
    let mut spec = vec![
        layer(json!({"kind": "transpose", "dim0": 1, "dim1": 2}))?,
        layer(json!({"kind": "conv1d", "in_channels": mels, "out_channels": d, "kernel_size": 3, "padding": 1}))?,
        layer(json!({"kind": "gelu"}))?,
        layer(json!({"kind": "conv1d", "in_channels": d, "out_channels": d, "kernel_size": 3, "stride": 2, "padding": 1}))?,
        layer(json!({"kind": "gelu"}))?,
        layer(json!({"kind": "transpose", "dim0": 1, "dim1": 2}))?,
        positions(source)?,
        dropout(p)?,
        stack("encoder_attention_heads", "encoder_ffn_dim", "encoder_layers", false)?,
        norm()?,
        layer(json!({"kind": "token_input", "seq_len": target}))?,
        layer(json!({"kind": "embedding", "num_embeddings": vocab, "embedding_dim": d}))?,
        positions(target)?,
        dropout(p)?,
        stack("decoder_attention_heads", "decoder_ffn_dim", "decoder_layers", true)?,
        norm()?,
    ];
    let tied = c.flag("tie_word_embeddings", true)?;
    if class == "WhisperForConditionalGeneration" {
        spec.push(layer(json!({"kind": "linear", "in_features": d, "out_features": vocab, "bias": false, "tied_weight": tied}))?);
    }
    c.refuse_unknown("whisper", IGNORED_WHISPER)?;
    let input = InputSpec { shape: vec![source.saturating_mul(2), mels], dtype: InputDType::Float32, vocab_size: None };
    Ok(model(name, input, spec))
}
