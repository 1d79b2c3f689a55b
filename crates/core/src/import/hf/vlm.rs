//! `gemma3`: the image-text model most Gemma 3 checkpoints are, built as transformers 5.24's
//! `modeling_gemma3.py` builds `Gemma3ForConditionalGeneration`: the SigLIP vision tower
//! (`SiglipVisionModel` from `vision_config`, `modeling_siglip.py`), `Gemma3MultiModalProjector`
//! and the `gemma3_text` decoder of `text_config` (`Gemma3TextModel`, [`super::dense`]), with its
//! `lm_head` tied to the token embedding unless `tie_word_embeddings` is false.
//!
//! The spec's input is one image (`num_channels × image_size²`); the tower runs on it —
//! patch conv with bias (k = s = `patch_size`), flatten and transpose, learned positions (no class
//! token), pre-norm layers with the tanh GELU, `post_layernorm` — then the projector:
//! `token_pool` to `mm_tokens_per_image` tokens, `mm_soft_emb_norm` (RMSNorm) and the
//! `mm_input_projection_weight [Dv, Dt]` matmul. As `Gemma3Model.forward` runs them, a
//! `token_input` of the prompt's token ids and the scaled token embedding come first, then the
//! tower on the image (`image_input`: the embeddings set aside), `image_tokens` (the image rows
//! written into the image placeholders) and the decoder. The prompt is [`super::MAX_DEFAULT_SEQ_LEN`]
//! tokens (capped by the text model's context), the image's `mm_tokens_per_image` included; the
//! estimate's `seq_len` replaces it (`token_input`'s `prompt`).
//!
//! Gemma 3's bidirectional attention among an image's tokens changes the masks only: their
//! memory is `image_tokens`' `block_mask`. Not modelled (refused by name): SigLIP's pooling head
//! (`vision_use_head: true`, the `SiglipVisionConfig` default, which Gemma 3 checkpoints turn
//! off: its output is unused).

use super::dense;
use super::parts::{layer, tower_layer};
use crate::error::{Error, Result};
use crate::import::decoder::MAX_DEFAULT_SEQ_LEN;
use crate::import::fields::{invalid, Fields};
use crate::layer::transformer::FfnActivation;
use crate::spec::{InputDType, InputSpec, Layer, LayerNames, ModelSpec, SPEC_VERSION};
use serde_json::{json, Map, Value};


/// The text model's names (`text`, keyed by its own spec's paths) at their places in an
/// image-text spec: its top-level layer `j` at `at(j)`. transformers 5.24's image-text classes
/// hold the text model as `model.language_model` (`Qwen2_5_VLModel`, `LlavaModel`,
/// `Gemma3Model`, `PaliGemmaModel`: `self.language_model`) beside `lm_head`; a causal LM's
/// `model.embed_tokens` is `model.language_model.embed_tokens` there, a base model's
/// `embed_tokens` `language_model.embed_tokens`.
pub(super) fn text_names(text: &LayerNames, at: impl Fn(usize) -> usize, lm: bool) -> LayerNames {
    let mut out = LayerNames::new();
    for (key, name) in text {
        let (Some(rest), Some(name)) = (key.strip_prefix("layers["), name.as_str()) else { continue };
        let Some((index, tail)) = rest.split_once(']') else { continue };
        let Ok(j) = index.parse::<usize>() else { continue };
        let inner = name.strip_prefix("model.").unwrap_or(name);
        let renamed = match lm {
            _ if name.is_empty() || name == "lm_head" => name.to_string(),
            true => format!("model.language_model.{inner}"),
            false => format!("language_model.{inner}"),
        };
        out.insert(format!("layers[{}]{tail}", at(j)), renamed.into());
    }
    out
}

/// transformers' module names of a tower and projector (`layers`, at `first` in the spec): each
/// layer whose kind is the next of `parts` (`(kind, module)`, `"*"` any kind) is that module, a
/// `repeat` is the `ModuleList` `list` (its runs numbered on), the rest (flatten, views) are no
/// modules. Names sit under `model.` in the `…ForConditionalGeneration` class (`lm`).
pub(super) fn tower_names(layers: &[Layer], first: usize, parts: &[(&str, &str)], list: &str, lm: bool) -> LayerNames {
    use crate::layer_names::{name_module_list, name_top};
    let full = |m: &str| if lm { format!("model.{m}") } else { m.to_string() };
    let mut names = LayerNames::new();
    let mut next = parts.iter().peekable();
    for (i, l) in layers.iter().enumerate() {
        if matches!(l, Layer::Repeat { .. }) {
            name_module_list(&mut names, first + i, &full(list));
        } else if let Some((_, module)) = next.next_if(|(kind, _)| *kind == "*" || *kind == l.kind()) {
            name_top(&mut names, first + i, &full(module));
        }
    }
    names
}

/// `SiglipVisionModel` (transformers 5.24: `embeddings`, `encoder.layers`, `post_layernorm`
/// directly under `vision_tower`) as [`siglip`] lays it out.
pub(super) const SIGLIP_PARTS: [(&str, &str); 3] = [
    ("conv2d", "vision_tower.embeddings.patch_embedding"),
    ("positional_embedding", "vision_tower.embeddings.position_embedding"),
    ("layer_norm", "vision_tower.post_layernorm"),
];

/// A sub-config object (`text_config`, `vision_config`), empty when absent.
pub(super) fn sub(c: &Fields, key: &str) -> Result<Map<String, Value>> {
    match c.get(key) {
        None => Ok(Map::new()),
        Some(Value::Object(m)) => Ok(m.clone()),
        Some(v) => Err(Fields::wrong(key, "an object", v)),
    }
}

/// `SiglipVisionTransformer` without its head: `(layers, channels, image size, hidden, patches per side, eps)`.
/// `ignored`: the fields of `vision_config` the image-text model `what` writes and never reads.
pub(super) fn siglip(obj: &Map<String, Value>, what: &str, ignored: &[&str]) -> Result<(Vec<Layer>, u64, u64, u64, u64, f64)> {
    let t = Fields::new(obj);
    let h = t.size("hidden_size", 768)?;
    let heads = t.size("num_attention_heads", 12)?;
    let channels = t.size("num_channels", 3)?;
    let image = t.size("image_size", 224)?;
    let patch = t.size("patch_size", 16)?;
    if image < patch {
        return Err(Error::Import(format!("vision_config: `image_size` {image} is smaller than `patch_size` {patch}")));
    }
    if t.flag("vision_use_head", true)? && what != "siglip" {
        return Err(Error::Import(format!(
            "{what} vision_config: field `vision_use_head` (true, SiglipVisionConfig's default): the pooling head's output is unused by {what} and not modelled; {what} checkpoints set it false"
        )));
    }
    let eps = t.float("layer_norm_eps", 1e-6)?;
    let side = image / patch;
    let patches = side.saturating_mul(side);
    let inter = t.size("intermediate_size", 3072)?;
    let enc = tower_layer(&t, h, heads, inter, eps, FfnActivation::GeluTanh)?;
    let mut layers = vec![
        layer(json!({"kind": "conv2d", "in_channels": channels, "out_channels": h, "kernel_size": patch, "stride": patch}))?,
        layer(json!({"kind": "flatten", "start_dim": 2}))?,
        layer(json!({"kind": "transpose", "dim0": 1, "dim1": 2}))?,
        // `position_embedding(self.position_ids)`; `position_ids` is a non-persistent int64 buffer
        layer(json!({"kind": "positional_embedding", "num_embeddings": patches, "embedding_dim": h, "index_buffer": patches}))?,
        Layer::Repeat { times: t.size("num_hidden_layers", 12)?, body: vec![Layer::TransformerEncoderLayer(enc)] },
        layer(json!({"kind": "layer_norm", "normalized_shape": h, "eps": eps}))?,
    ];
    // SiglipModel's tower keeps its pooling head (the image embedding)
    if what == "siglip" && t.flag("vision_use_head", true)? {
        layers.push(layer(json!({"kind": "attention_pool", "embed_dim": h, "num_heads": heads, "intermediate_size": inter}))?);
    }
    let mut known = vec!["model_type", "initializer_range", "projection_dim"];
    known.extend_from_slice(ignored);
    t.refuse_unknown(&format!("{what} vision_config"), &known)?;
    Ok((layers, channels, image, h, side, eps))
}

/// `Gemma3Config` (transformers): `text_config` a `Gemma3TextConfig`, `vision_config` a
/// `SiglipVisionConfig`, `mm_tokens_per_image` 256.
pub(super) fn gemma3(c: &Fields, arch: Option<&str>) -> Result<ModelSpec> {
    let lm = match arch {
        None | Some("Gemma3ForConditionalGeneration") => true,
        Some("Gemma3Model") => false,
        Some(other) => return Err(Error::Import(format!("`{other}`: gemma3 imports Gemma3ForConditionalGeneration or Gemma3Model"))),
    };
    let (vision, channels, image, hv, side, eps) = siglip(&sub(c, "vision_config")?, "gemma3", &[])?;
    let tokens = c.size("mm_tokens_per_image", 256)?;
    let per_side = (tokens as f64).sqrt() as u64;
    if per_side * per_side != tokens || per_side == 0 || side % per_side != 0 {
        return Err(Error::Import(format!(
            "field `mm_tokens_per_image` ({tokens}) must be a square whose side divides the {side} × {side} patch grid"
        )));
    }
    // the text model: its own config with Gemma3Config's `tie_word_embeddings`
    let mut text = sub(c, "text_config")?;
    text.insert("model_type".into(), json!("gemma3_text"));
    text.insert("tie_word_embeddings".into(), json!(c.flag("tie_word_embeddings", true)?));
    let tc = Fields::new(&text);
    let decoder = dense::llama_like(&tc, Some(if lm { "Gemma3ForCausalLM" } else { "Gemma3TextModel" }), "gemma3_text")?;
    let loss = decoder.loss;
    let dt = decoder.input.vocab_size.ok_or_else(|| invalid("gemma3 text model"))?;
    let Some(Layer::Embedding(embed)) = decoder.layers.first() else { return Err(invalid("gemma3 text model")) };
    let ht = embed.embedding_dim;
    for key in ["image_token_index", "boi_token_index", "eoi_token_index", "image_token_id", "boi_token_id", "eoi_token_id"] {
        c.get(key);
    }
    c.refuse_unknown("gemma3", &[])?;
    let seq = decoder.input.shape.first().copied().unwrap_or(MAX_DEFAULT_SEQ_LEN).max(tokens);
    // `Gemma3Model.forward`: the prompt's embedding (`Gemma3TextScaledWordEmbedding`: the
    // embedding and its `embed_scale`) first, then the tower and projector, then the image rows
    // `Gemma3Processor` returns `token_type_ids` (1 at the image tokens)
    let mut layers = vec![layer(json!({"kind": "token_input", "seq_len": seq, "prompt": true, "token_type_ids": true}))?];
    let mut text_layers = decoder.layers.into_iter();
    layers.extend(text_layers.by_ref().take(2));
    layers.push(layer(json!({"kind": "image_input"}))?);
    layers.extend(vision);
    // the tower's `last_hidden_state`, returned in `image_outputs`
    layers.push(layer(json!({"kind": "keep"}))?);
    layers.push(layer(json!({"kind": "token_pool", "grid": side, "kernel": side / per_side}))?);
    // Gemma3RMSNorm (`x · (1 + w)`): as an RMSNorm's memory and parameters
    layers.push(layer(json!({"kind": "rms_norm", "normalized_shape": hv, "eps": eps}))?);
    // torch.matmul(normed, mm_input_projection_weight): a linear without bias
    layers.push(layer(json!({"kind": "linear", "in_features": hv, "out_features": ht, "bias": false}))?);
    // the projector's output is the `pooler_output`, returned too
    layers.push(layer(json!({"kind": "keep"}))?);
    let first = layers.iter().position(|l| matches!(l, Layer::ImageInput(_))).map_or(0, |i| i + 1);
    let tower = &layers[first..];
    // `Gemma3MultiModalProjector`: `avg_pool`, `mm_soft_emb_norm`, and the projection is its own
    // `mm_input_projection_weight` parameter (no `nn.Linear`: quantisers leave it as it is)
    let parts = [
        SIGLIP_PARTS[0], SIGLIP_PARTS[1], SIGLIP_PARTS[2],
        ("token_pool", "multi_modal_projector.avg_pool"), ("rms_norm", "multi_modal_projector.mm_soft_emb_norm"), ("linear", "multi_modal_projector"),
    ];
    let mut names = tower_names(tower, first, &parts, "vision_tower.encoder.layers", lm);
    let after = layers.len() + 1;
    layers.push(layer(json!({"kind": "image_tokens", "embed_dim": ht, "block_mask": true}))?);
    layers.extend(text_layers);
    names.extend(text_names(&decoder.names, |j| if j < 2 { 1 + j } else { after + j - 2 }, lm));
    let name = if lm { "Gemma3ForConditionalGeneration" } else { "Gemma3Model" };
    Ok(ModelSpec {
        version: SPEC_VERSION,
        name: Some(name.to_string()),
        input: InputSpec { shape: vec![channels, image, image], dtype: InputDType::Float32, vocab_size: Some(dt) },
        layers,
        loss,
        names,
        unquantised: None,
    })
}
