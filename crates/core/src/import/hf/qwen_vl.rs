//! `qwen2_5_vl`: Qwen2.5-VL, built as transformers 5.24's `modeling_qwen2_5_vl.py` builds
//! `Qwen2_5_VLForConditionalGeneration`: the vision tower
//! (`Qwen2_5_VisionTransformerPretrainedModel` from `vision_config`), its patch merger, the
//! Qwen2 decoder of `text_config` (`Qwen2_5_VLTextModel`: Q/K/V biases, no output bias, SwiGLU,
//! RMSNorm) and `lm_head`, tied to the token embedding when `tie_word_embeddings` (the
//! top-level's or the text config's) is true.
//!
//! Hub configs of Qwen2.5-VL write the text fields at the top level (no `text_config`);
//! `Qwen2_5_VLConfig.__post_init__` then reads them from there, and so does this importer. Fields
//! a config leaves out take `Qwen2_5_VLTextConfig`'s / `Qwen2_5_VLVisionConfig`'s defaults
//! (a 72B-sized decoder, a 3584-wide tower), as `from_pretrained` would.
//!
//! The spec's input is one image of `[in_channels·temporal_patch_size, H, W]` at the size the
//! image processor resizes it to ([`smart_resize`] of [`DEFAULT_IMAGE`], `Qwen2VLImageProcessor`'s
//! `min_pixels`/`max_pixels`); another image's spec comes from
//! [`super::from_config_with_image`], or edit the input shape (H and W multiples of
//! `patch_size · spatial_merge_size`). The tower:
//! - `Qwen2_5_VisionPatchEmbed`: `Conv3d(C, D, [T, P, P], stride = kernel, bias=False)` on the
//!   processor's `[N, C·T·P·P]` patches, written as a `conv2d` of `C·T` channels with k = s = P on
//!   the image (the same weights and the same output, `[N, D]` after flatten and transpose);
//! - `depth` × `Qwen2_5_VLVisionBlock`: RMSNorm (eps 1e-6), fused `qkv` with bias, `proj` with bias,
//!   rotary, RMSNorm, a SwiGLU MLP with biases (`hidden_act`);
//! - `Qwen2_5_VLPatchMerger`: `ln_q` (RMSNorm), `view(-1, D·merge²)` (`merge_tokens`),
//!   `Linear(D·m², D·m²)`, GELU, `Linear(D·m², out_hidden_size)`: `H·W / (P·m)²` image tokens.
//!
//! The layers run as `Qwen2_5_VLModel.forward` runs them: the prompt's `token_input` and
//! embedding first, then `image_input` and the tower (the embeddings alive through it; the patches
//! permuted into window order, `index_tokens`), the merger and its output permuted back; the
//! tower's `last_hidden_state` and `pooler_output` are returned in `image_outputs` (`keep`);
//! `image_tokens` `torch.cat`s the features (`concat`) and writes them, then the decoder.
//!
//! The blocks outside `fullatt_block_indexes` attend within windows of `window_size` pixels, the
//! others over the whole image, each span in turn and the outputs concatenated (`windows`, from
//! `get_vision_window_index`). Modelled approximately (memory only, the parameters are exact):
//! the multimodal rotary positions (`mrope_section`) are the decoder's plain rotary.

use super::parts::layer;
use super::vlm::sub;
use crate::error::{Error, Result};
use crate::import::decoder::MAX_DEFAULT_SEQ_LEN;
use crate::import::fields::{invalid, Fields};
use crate::layer::transformer::{FfnActivation, NormKind, TransformerLayer};
use crate::presets;
use crate::spec::{InputDType, InputSpec, Layer, ModelSpec, SPEC_VERSION};
use serde_json::{json, Map, Value};

/// The image the spec is built for when none is given: 1024 × 1024 pixels (width, height).
pub const DEFAULT_IMAGE: (u64, u64) = (1024, 1024);
/// `Qwen2VLImageProcessor.size`'s defaults (transformers 5.24, `image_processing_qwen2_vl.py`):
/// `shortest_edge` 56·56 and `longest_edge` 28·28·1280 pixels.
pub const MIN_PIXELS: u64 = 56 * 56;
pub const MAX_PIXELS: u64 = 28 * 28 * 1280;

/// `smart_resize` (`image_processing_qwen2_vl.py`): the `(height, width)` an image of `height ×
/// width` is resized to — multiples of `factor` (patch · merge, 28), its pixels within
/// `[min_pixels, max_pixels]`, its aspect ratio kept as closely as possible. Python's `round`
/// rounds halves to even, as here. An error when the aspect ratio exceeds 200, as there.
pub fn smart_resize(height: u64, width: u64, factor: u64, min_pixels: u64, max_pixels: u64) -> Result<(u64, u64)> {
    if height == 0 || width == 0 || factor == 0 {
        return Err(Error::Import(format!("image size {width} × {height}: both sides must be at least 1 pixel")));
    }
    if height.max(width) as f64 / height.min(width) as f64 > 200.0 {
        return Err(Error::Import(format!("image size {width} × {height}: the aspect ratio must be smaller than 200")));
    }
    let round_even = |x: u64| {
        let (q, r) = (x / factor, x % factor);
        if 2 * r > factor || (2 * r == factor && q % 2 == 1) { q + 1 } else { q }
    };
    let (h, w, f) = (height as f64, width as f64, factor as f64);
    let (mut hb, mut wb) = (round_even(height) * factor, round_even(width) * factor);
    if hb.saturating_mul(wb) > max_pixels {
        let beta = (h * w / max_pixels as f64).sqrt();
        hb = factor.max((h / beta / f).floor() as u64 * factor);
        wb = factor.max((w / beta / f).floor() as u64 * factor);
    } else if hb.saturating_mul(wb) < min_pixels {
        let beta = (min_pixels as f64 / (h * w)).sqrt();
        hb = (h * beta / f).ceil() as u64 * factor;
        wb = (w * beta / f).ceil() as u64 * factor;
    }
    Ok((hb, wb))
}

/// `Qwen2_5_VLTextConfig`'s defaults where they differ from `Qwen2Config`'s, which
/// [`super::dense::llama_like`] takes for a missing field.
fn text_defaults() -> [(&'static str, Value); 9] {
    [
        ("vocab_size", json!(152064)),
        ("hidden_size", json!(8192)),
        ("intermediate_size", json!(29568)),
        ("num_hidden_layers", json!(80)),
        ("num_attention_heads", json!(64)),
        ("num_key_value_heads", json!(8)),
        ("rms_norm_eps", json!(1e-5)),
        ("max_window_layers", json!(80)),
        ("max_position_embeddings", json!(32768)),
    ]
}

/// The fields `Qwen2_5_VLConfig` itself has (the rest of a flat config is the text model's).
const OWN: &[&str] = &[
    "vision_config", "text_config", "image_token_id", "video_token_id", "vision_start_token_id", "vision_end_token_id",
    "vision_token_id", "tie_word_embeddings",
];

/// The vision tower and merger: `(layers, image input shape, image tokens, out_hidden_size)`.
fn tower(obj: &Map<String, Value>, image: (u64, u64)) -> Result<(Vec<Layer>, Vec<u64>, u64, u64)> {
    let t = Fields::new(obj);
    let h = t.size("hidden_size", 3584)?;
    let heads = t.size("num_heads", t.size("num_attention_heads", 16)?)?;
    let depth = t.size("depth", t.size("num_hidden_layers", 32)?)?;
    let channels = t.size("in_channels", 3)?;
    let patch = t.size("patch_size", 14)?;
    let temporal = t.size("temporal_patch_size", 2)?;
    let merge = t.size("spatial_merge_size", 2)?;
    let out = t.size("out_hidden_size", 3584)?;
    let inter = t.size("intermediate_size", 3420)?;
    let act = t.activation("hidden_act", FfnActivation::Silu)?;
    let window = t.size("window_size", 112)?;
    let full_blocks = full_attention_blocks(&t)?;
    // read, not modelled: the video positions
    for key in ["tokens_per_second", "in_chans", "spatial_patch_size"] {
        t.get(key);
    }
    t.refuse_unknown("qwen2_5_vl vision_config", &["model_type", "initializer_range", "rope_parameters"])?;
    if !h.is_multiple_of(heads) {
        return Err(Error::Import(format!("vision_config: hidden_size ({h}) must be divisible by num_heads ({heads})")));
    }
    let factor = patch.saturating_mul(merge);
    let (rh, rw) = smart_resize(image.1, image.0, factor, MIN_PIXELS, MAX_PIXELS)?;
    let tokens = (rh / factor).saturating_mul(rw / factor);
    let block = TransformerLayer {
        dropout: 0.0,
        attention_dropout: Some(0.0),
        activation: act,
        layer_norm_eps: 1e-6,
        norm_first: true,
        bias: true,
        norm: NormKind::RmsNorm,
        gated_mlp: true,
        rotary: true,
        fused_qkv: true,
        ..presets::transformer_layer(h, heads, inter)
    };
    let wide = h.saturating_mul(merge.saturating_mul(merge));
    let (gh, gw) = (rh / patch, rw / patch);
    let spans = windows((gh / merge, gw / merge), merge, window / merge / patch.max(1))?;
    let mut layers = vec![
        layer(json!({"kind": "conv2d", "in_channels": channels.saturating_mul(temporal), "out_channels": h, "kernel_size": patch, "stride": patch, "bias": false}))?,
        layer(json!({"kind": "flatten", "start_dim": 2}))?,
        layer(json!({"kind": "transpose", "dim0": 1, "dim1": 2}))?,
        // `permute_input_for_window_attn`: `hidden_states[window_index, :, :]`, a copy
        layer(json!({"kind": "index_tokens"}))?,
    ];
    // runs of blocks alike: windowed, or one span over the image (`fullatt_block_indexes`)
    let mut runs: Vec<(u64, bool)> = Vec::new();
    for i in 0..depth {
        let full = full_blocks.contains(&i);
        match runs.last_mut() {
            Some((n, f)) if *f == full => *n += 1,
            _ => runs.push((1, full)),
        }
    }
    for (times, full) in runs {
        let windows = Some(if full { vec![gh.saturating_mul(gw)] } else { spans.clone() });
        layers.push(Layer::Repeat { times, body: vec![Layer::TransformerEncoderLayer(TransformerLayer { windows, ..block.clone() })] });
    }
    layers.extend([
        // the last block's output is the tower's `last_hidden_state`, returned in `image_outputs`
        layer(json!({"kind": "keep"}))?,
        layer(json!({"kind": "rms_norm", "normalized_shape": h, "eps": 1e-6}))?,
        layer(json!({"kind": "merge_tokens", "group": merge.saturating_mul(merge)}))?,
        layer(json!({"kind": "linear", "in_features": wide, "out_features": wide}))?,
        layer(json!({"kind": "gelu"}))?,
        layer(json!({"kind": "linear", "in_features": wide, "out_features": out}))?,
        // `merged_hidden_states[reverse_indices, :]` (a copy): the `pooler_output`, returned too
        layer(json!({"kind": "index_tokens"}))?,
        layer(json!({"kind": "keep"}))?,
    ]);
    Ok((layers, vec![channels.saturating_mul(temporal), rh, rw], tokens, out))
}

/// `fullatt_block_indexes` (`Qwen2_5_VLVisionConfig`'s default `(7, 15, 23, 31)`): the blocks
/// that attend over the whole image. An index past the depth matches no block, as there.
fn full_attention_blocks(t: &Fields) -> Result<Vec<u64>> {
    match t.get("fullatt_block_indexes") {
        None | Some(Value::Null) => Ok(vec![7, 15, 23, 31]),
        Some(Value::Array(a)) => a.iter().map(|v| v.as_u64().ok_or_else(|| Fields::wrong("vision_config.fullatt_block_indexes", "a list of block indexes", v))).collect(),
        Some(v) => Err(Fields::wrong("vision_config.fullatt_block_indexes", "a list of block indexes", v)),
    }
}

/// The windows' lengths in patches, in the order the tower attends them
/// (`vision_utils.get_vision_window_index`, transformers 5.24): the `(h, w)` grid of merged
/// tokens cut into `side × side` windows row by row (the last row and column shorter; the
/// padding's empty windows dropped by `unique_consecutive`), `merge²` patches per merged token.
fn windows((h, w): (u64, u64), merge: u64, side: u64) -> Result<Vec<u64>> {
    if side == 0 {
        return Err(Error::Import("vision_config: `window_size` must be at least patch_size · spatial_merge_size (transformers divides by window_size // spatial_merge_size // patch_size)".into()));
    }
    let cuts = |n: u64| (0..n.div_ceil(side)).map(move |i| side.min(n - i * side));
    let unit = merge.saturating_mul(merge);
    Ok(cuts(h).flat_map(|r| cuts(w).map(move |c| r * c * unit)).collect())
}

/// `Qwen2_5_VLConfig` (transformers 5.24) for an image of `image` = `(width, height)` pixels.
pub(super) fn qwen2_5_vl(c: &Fields, arch: Option<&str>, image: (u64, u64)) -> Result<ModelSpec> {
    let lm = match arch {
        None | Some("Qwen2_5_VLForConditionalGeneration") => true,
        Some("Qwen2_5_VLModel") => false,
        Some(other) => return Err(Error::Import(format!("`{other}`: qwen2_5_vl imports Qwen2_5_VLForConditionalGeneration or Qwen2_5_VLModel"))),
    };
    let (vision, shape, tokens, out) = tower(&sub(c, "vision_config")?, image)?;
    // the text model: `text_config`, or the top-level fields that are not the VLM's own
    let mut text = match c.get("text_config") {
        Some(Value::Object(m)) => m.clone(),
        None | Some(Value::Null) => c.0.iter().filter(|(k, _)| !OWN.contains(&k.as_str())).map(|(k, v)| (k.clone(), v.clone())).collect(),
        Some(v) => return Err(Fields::wrong("text_config", "an object", v)),
    };
    if c.get("text_config").is_none() {
        // every top-level field is the text model's: read there, not refused here
        for k in c.0.keys() {
            c.get(k);
        }
    }
    for (k, v) in text_defaults() {
        text.entry(k.to_string()).or_insert(v);
    }
    let tied = c.flag("tie_word_embeddings", false)? || Fields::new(&text).flag("tie_word_embeddings", false)?;
    text.insert("model_type".into(), json!("qwen2"));
    text.insert("tie_word_embeddings".into(), json!(tied));
    text.remove("architectures");
    let tc = Fields::new(&text);
    let decoder = super::dense::llama_like(&tc, Some(if lm { "Qwen2ForCausalLM" } else { "Qwen2Model" }), "qwen2")?;
    for key in OWN {
        c.get(key);
    }
    c.refuse_unknown("qwen2_5_vl", &[])?;
    let ht = match decoder.layers.first() {
        Some(Layer::Embedding(e)) => e.embedding_dim,
        _ => return Err(invalid("qwen2_5_vl text model")),
    };
    if out != ht {
        return Err(Error::Import(format!("vision_config: `out_hidden_size` ({out}) must equal the text model's hidden_size ({ht})")));
    }
    let vocab = decoder.input.vocab_size.ok_or_else(|| invalid("qwen2_5_vl text model"))?;
    let seq = decoder.input.shape.first().copied().unwrap_or(MAX_DEFAULT_SEQ_LEN).max(tokens);
    // `Qwen2_5_VLModel.forward`: the prompt's embedding first, then the tower, then the image
    // rows (`image_embeds = torch.cat(pooler_output)`, `masked_scatter`), then the decoder
    let mut layers = vec![layer(json!({"kind": "token_input", "seq_len": seq, "prompt": true}))?];
    let mut text_layers = decoder.layers.into_iter();
    layers.extend(text_layers.by_ref().take(1));
    layers.push(layer(json!({"kind": "image_input"}))?);
    let first = layers.len();
    // `Qwen2_5_VisionTransformerPretrainedModel` under `visual`: the Conv3d, `blocks`, the merger
    let parts = [("conv2d", "visual.patch_embed.proj"), ("rms_norm", "visual.merger.ln_q"), ("linear", "visual.merger.mlp.0"), ("gelu", "visual.merger.mlp.1"), ("linear", "visual.merger.mlp.2")];
    let mut names = super::vlm::tower_names(&vision, first, &parts, "visual.blocks", lm);
    let after = first + vision.len() + 1;
    layers.extend(vision);
    layers.push(layer(json!({"kind": "image_tokens", "embed_dim": ht, "concat": true}))?);
    layers.extend(text_layers);
    names.extend(super::vlm::text_names(&decoder.names, |j| if j == 0 { 1 } else { after + j - 1 }, lm));
    let name = if lm { "Qwen2_5_VLForConditionalGeneration" } else { "Qwen2_5_VLModel" };
    Ok(ModelSpec {
        version: SPEC_VERSION,
        name: Some(name.to_string()),
        input: InputSpec { shape, dtype: InputDType::Float32, vocab_size: Some(vocab) },
        layers,
        loss: decoder.loss,
        names,
        unquantised: None,
    })
}

/// An fp8 checkpoint's `modules_to_not_convert` as the loader reads it: transformers 5.24's
/// `FineGrainedFP8HfQuantizer._normalize_modules_to_not_convert` puts each entry through the
/// class's checkpoint renamings (`conversion_mapping.py`, `Qwen2VLForConditionalGeneration`:
/// `^visual` → `model.visual`, `^model(?!\.(language_model|visual))` → `model.language_model`), so
/// a hub list's `visual` keeps `model.visual.*` (measured: `tests/data/vlm_quant_layouts.json`).
/// The other quantisers match the list as written.
pub(super) fn fp8_skip_names(modules: &mut [String]) {
    for m in modules.iter_mut() {
        let renamed = match (m.strip_prefix("visual"), m.strip_prefix("model")) {
            (Some(rest), _) => format!("model.visual{rest}"),
            (_, Some(rest)) if !rest.starts_with(".language_model") && !rest.starts_with(".visual") => format!("model.language_model{rest}"),
            _ => continue,
        };
        *m = renamed;
    }
}
