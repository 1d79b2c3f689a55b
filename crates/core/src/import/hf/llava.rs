//! `llava` and `paligemma`: a vision tower, a projector and a decoder of any supported
//! `text_config` (`AutoModel.from_config`), with `lm_head` — as transformers 5.24's
//! `modeling_llava.py` builds `LlavaForConditionalGeneration` and `modeling_paligemma.py`
//! `PaliGemmaForConditionalGeneration`.
//!
//! - LLaVA: `CLIPVisionModel` of `vision_config` (`LlavaConfig`'s defaults: CLIP ViT-L/14 at 336,
//!   hidden 1024, 24 layers, 16 heads, intermediate 4096): patch conv without bias, class token,
//!   positions, `pre_layrnorm`, the encoder layers, `post_layernorm`; the features of
//!   `vision_feature_layer` with the class token dropped (`vision_feature_select_strategy =
//!   "default"`) or kept (`"full"`); `LlavaMultiModalProjector` (`linear_1`, `projector_hidden_act`,
//!   `linear_2`, biases per `multimodal_projector_bias`); the text model (LLaMA-7B by default),
//!   `lm_head` untied unless `tie_word_embeddings` (LlavaConfig's or the text config's).
//! - PaliGemma: `SiglipVisionModel` without its head (`vision_use_head: false`, PaliGemmaConfig's
//!   default), `PaliGemmaMultiModalProjector` (`Linear(Dv, projection_dim)` with bias; its output is the
//!   image features as it is: 5.24 divides by nothing), the Gemma text model (PaliGemma
//!   3B's by default when `text_config` is absent: `init_kwargs` apply only then), `lm_head` tied
//!   unless `tie_word_embeddings` is false.
//!
//! The spec's input is one image; a `token_input` of the prompt (the estimate's `seq_len`) and its
//! embedding (a Gemma text model's with its `embed_scale`) come first, then the tower on the image
//! (`image_input`), and the image tokens are written into the embeddings (`image_tokens`). The
//! tower outputs `get_image_features` returns are held to the end of the forward (`keep`; and by
//! `generate()` to its end, `mm_encoder_outputs`: `tests/generate_vlm2.rs`). The tower layers
//! after `vision_feature_layer` (the last one at the default −2) and CLIP's `post_layernorm` (of
//! the pooled `[CLS]` token) run, but nothing LLaVA computes reads them: a `discarded` block,
//! whose saved tensors die with the forward's outputs and whose parameters get no gradient and
//! no optimizer state (`tests/import_vlm.rs`). PaliGemma's bidirectional attention over the image and prefix changes a mask only.

use super::parts::{activation, layer, tower_layer};
use super::vlm::{siglip, sub, text_names, tower_names, SIGLIP_PARTS};
use crate::error::{Error, Result};
use crate::import::fields::{invalid, Fields};
use crate::layer::transformer::FfnActivation;
use crate::spec::{InputDType, InputSpec, Layer, ModelSpec, SPEC_VERSION};
use serde_json::{json, Map, Value};

/// The decoder of `text`: its layers (no head), vocabulary, width and prompt length.
struct Text {
    layers: Vec<Layer>,
    /// The text model's module names (a base model's: `embed_tokens`, `layers`, `norm`).
    names: crate::spec::LayerNames,
    vocab: u64,
    hidden: u64,
    seq: u64,
}

/// The importer's entry point (`hf::from_config`), passed in so that this file does not import its parent.
pub(super) type Build = fn(&Map<String, Value>) -> Result<ModelSpec>;

/// The bare text model of a `text_config` (`AutoModel.from_config`), built by `build`.
fn text_model(build: Build, mut text: Map<String, Value>, default_type: &str, drop: &[&str]) -> Result<Text> {
    text.remove("architectures");
    for key in drop {
        text.remove(*key);
    }
    text.entry("model_type".to_string()).or_insert(json!(default_type));
    let spec = build(&text).map_err(|e| Error::Import(format!("text_config: {e}")))?;
    let hidden = match spec.layers.first() {
        Some(Layer::Embedding(e)) => e.embedding_dim,
        _ => return Err(invalid("text model")),
    };
    Ok(Text {
        vocab: spec.input.vocab_size.ok_or_else(|| invalid("text model"))?,
        seq: spec.input.shape.first().copied().unwrap_or(crate::import::decoder::MAX_DEFAULT_SEQ_LEN),
        layers: spec.layers,
        names: spec.names,
        hidden,
    })
}

/// The image-text model in the order `LlavaModel.forward` and `PaliGemmaModel.forward` run it:
/// the prompt's embedding, the tower and projector (`get_image_features`; LLaVA then
/// `torch.cat`s the features, `concat`), the image rows, the decoder, `lm_head`.
/// `parts`: the tower's and projector's module names ([`tower_names`]).
#[allow(clippy::too_many_arguments)]
fn assemble(name: &str, input: Vec<u64>, tower: Vec<Layer>, text: Text, tokens: u64, tied: bool, concat: bool, parts: &[(&str, &str)]) -> Result<ModelSpec> {
    let mut layers = vec![layer(json!({"kind": "token_input", "seq_len": text.seq.max(tokens), "prompt": true}))?];
    let mut rest = text.layers.into_iter().peekable();
    layers.extend(rest.next());
    // a Gemma text model's `embed_scale` is its embedding's (`GemmaTextScaledWordEmbedding`,
    // transformers 5.24): the prompt's rows are scaled before the image rows are written
    layers.extend(rest.next_if(|l| matches!(l, Layer::Scale(_))));
    let head = layers.len() - 1;
    layers.push(layer(json!({"kind": "image_input"}))?);
    let mut names = tower_names(&tower, layers.len(), parts, "vision_tower.encoder.layers", true);
    let after = layers.len() + tower.len() + 1;
    layers.extend(tower);
    layers.push(layer(json!({"kind": "image_tokens", "embed_dim": text.hidden, "concat": concat}))?);
    layers.extend(rest);
    names.extend(text_names(&text.names, |j| if j < head { 1 + j } else { after + j - head }, true));
    crate::layer_names::name_top(&mut names, layers.len(), "lm_head");
    layers.push(layer(json!({"kind": "linear", "in_features": text.hidden, "out_features": text.vocab, "bias": false, "tied_weight": tied}))?);
    Ok(ModelSpec {
        version: SPEC_VERSION,
        name: Some(name.to_string()),
        input: InputSpec { shape: input, dtype: InputDType::Float32, vocab_size: Some(text.vocab) },
        layers,
        loss: crate::spec::Loss::CausalLm,
        names,
        unquantised: None,
    })
}

fn class<'a>(arch: Option<&'a str>, want: &'a str, model_type: &str) -> Result<&'a str> {
    match arch {
        None => Ok(want),
        Some(a) if a == want => Ok(want),
        Some(other) => Err(Error::Import(format!("`{other}`: {model_type} imports {want}"))),
    }
}

/// `CLIPVisionModel` (no projection): `(layers, input shape, patches, hidden)`.
fn clip_vision(obj: &Map<String, Value>) -> Result<(Vec<Layer>, Vec<u64>, u64, u64)> {
    let t = Fields::new(obj);
    // LlavaConfig's `init_kwargs` apply when `vision_config` is absent; a dict takes CLIPVisionConfig's
    let absent = obj.is_empty();
    let d = |small: u64, large: u64| if absent { large } else { small };
    let h = t.size("hidden_size", d(768, 1024))?;
    let heads = t.size("num_attention_heads", d(12, 16))?;
    let inter = t.size("intermediate_size", d(3072, 4096))?;
    let n = t.size("num_hidden_layers", d(12, 24))?;
    let image = t.size("image_size", d(224, 336))?;
    let patch = t.size("patch_size", d(32, 14))?;
    let channels = t.size("num_channels", 3)?;
    if image < patch {
        return Err(Error::Import(format!("vision_config: `image_size` {image} is smaller than `patch_size` {patch}")));
    }
    let eps = t.float("layer_norm_eps", 1e-5)?;
    let patches = (image / patch).saturating_mul(image / patch);
    let enc = tower_layer(&t, h, heads, inter, eps, FfnActivation::QuickGelu)?;
    let ln = || layer(json!({"kind": "layer_norm", "normalized_shape": h, "eps": eps}));
    let layers = vec![
        layer(json!({"kind": "conv2d", "in_channels": channels, "out_channels": h, "kernel_size": patch, "stride": patch, "bias": false}))?,
        layer(json!({"kind": "flatten", "start_dim": 2}))?,
        layer(json!({"kind": "transpose", "dim0": 1, "dim1": 2}))?,
        layer(json!({"kind": "cls_token", "embedding_dim": h}))?,
        layer(json!({"kind": "positional_embedding", "num_embeddings": patches + 1, "embedding_dim": h, "index_buffer": patches + 1}))?,
        ln()?,
        Layer::Repeat { times: n, body: vec![Layer::TransformerEncoderLayer(enc)] },
        ln()?,
    ];
    t.refuse_unknown("llava vision_config", &["model_type", "initializer_range", "initializer_factor", "projection_dim", "vocab_size", "dropout"])?;
    Ok((layers, vec![channels, image, image], patches, h))
}

/// The tower outputs `LlavaModel.get_image_features` returns (`image_outputs`: the forward
/// returns them in `LlavaModelOutputWithPast.image_outputs`, and `generate()` keeps them in
/// `mm_encoder_outputs` to its end): `hidden_states[vision_feature_layer]` and
/// `last_hidden_state` (the last encoder layer's output; one tensor at −1), measured by
/// `tools/trace_vlm_generate.py` (`generate_vlm2.rs`). The `repeat` of the `n` encoder layers
/// (after `pre_layrnorm`: `hidden_states[0]` is its output) and `post_layernorm` become: the
/// layers up to the feature layer, its output kept, then a `discarded` block of what
/// `CLIPVisionTransformer.forward` runs and LLaVA never reads (`get_image_features` takes
/// `hidden_states[vision_feature_layer]`): the layers after the feature layer, their output kept
/// (`last_hidden_state`), and `post_layernorm` of the pooled `last_hidden_state[:, 0, :]`. The
/// layers after it are listed one by one, for their module names (`name_discarded`).
fn keep_image_outputs(layers: &mut Vec<Layer>, feature_layer: i64) -> Result<()> {
    let Some(at) = layers.iter().position(|l| matches!(l, Layer::Repeat { .. })) else { return Ok(()) };
    let Layer::Repeat { times: n, body } = layers[at].clone() else { return Ok(()) };
    let k = if feature_layer < 0 { n as i64 + 1 + feature_layer } else { feature_layer };
    if !(0..=n as i64).contains(&k) {
        return Err(Error::Import(format!(
            "field `vision_feature_layer`: {feature_layer} is not a hidden state of the {n}-layer vision tower ({} to {n})",
            -(n as i64) - 1
        )));
    }
    let keep = || layer(json!({"kind": "keep"}));
    let k = k as u64;
    let mut run = Vec::new();
    if k > 0 {
        run.push(Layer::Repeat { times: k, body: body.clone() });
    }
    run.push(keep()?);
    let mut unread = Vec::new();
    if k < n {
        for _ in k..n {
            unread.extend(body.iter().cloned());
        }
        unread.push(keep()?);
    }
    // `post_layernorm`, the last of `layers`
    let post = layers.pop().ok_or_else(|| invalid("vision tower"))?;
    unread.push(layer(json!({"kind": "select_token", "index": 0}))?);
    unread.push(post);
    run.push(Layer::Discarded { layers: unread });
    layers.splice(at.., run);
    Ok(())
}

/// Names the `discarded` block's layers (`keep_image_outputs`) after the modules they are:
/// `vision_tower.encoder.layers.<i>` from the feature layer on, `vision_tower.post_layernorm`.
fn name_discarded(spec: &mut ModelSpec) {
    use crate::path::{LayerPath, Slot};
    let Some(at) = spec.layers.iter().position(|l| matches!(l, Layer::Discarded { .. })) else { return };
    let before: u64 = spec.layers[..at].iter().map(|l| if let Layer::Repeat { times, .. } = l { *times } else { 0 }).sum();
    let Layer::Discarded { layers } = &spec.layers[at] else { return };
    let mut next = before;
    for (i, l) in layers.iter().enumerate() {
        let name = match l {
            Layer::TransformerEncoderLayer(_) => {
                next += 1;
                format!("model.vision_tower.encoder.layers.{}", next - 1)
            }
            Layer::LayerNorm(_) => "model.vision_tower.post_layernorm".to_string(),
            _ => continue,
        };
        crate::layer_names::set(&mut spec.names, &LayerPath::top(at).child(Slot::Layers, i), &name);
    }
}

/// `LlavaConfig` (transformers 5.24).
pub(super) fn llava(c: &Fields, arch: Option<&str>, build: Build) -> Result<ModelSpec> {
    let name = class(arch, "LlavaForConditionalGeneration", "llava")?;
    let (mut layers, input, patches, hv) = clip_vision(&sub(c, "vision_config")?)?;
    let feature_layer = match c.get("vision_feature_layer") {
        None | Some(Value::Null) => -2,
        Some(v) if v.as_i64().is_some() => v.as_i64().unwrap_or(-2),
        Some(v) => return Err(Fields::wrong("vision_feature_layer", "one layer index (a list of layers is not supported)", v)),
    };
    keep_image_outputs(&mut layers, feature_layer)?;
    let tokens = match c.str("vision_feature_select_strategy")?.unwrap_or("default") {
        "default" => {
            layers.push(layer(json!({"kind": "drop_tokens", "count": 1}))?);
            patches
        }
        "full" => patches + 1,
        other => return Err(Error::Import(format!("field `vision_feature_select_strategy`: `{other}` is not supported (default, full)"))),
    };
    let text_cfg = sub(c, "text_config")?;
    let text_tied = Fields::new(&text_cfg).flag("tie_word_embeddings", false)?;
    let text = text_model(build, text_cfg, "llama", &[])?;
    let bias = c.flag("multimodal_projector_bias", true)?;
    layers.push(layer(json!({"kind": "linear", "in_features": hv, "out_features": text.hidden, "bias": bias}))?);
    layers.push(activation("projector_hidden_act", c.str("projector_hidden_act")?.unwrap_or("gelu"))?);
    layers.push(layer(json!({"kind": "linear", "in_features": text.hidden, "out_features": text.hidden, "bias": bias}))?);
    // the projected features: `image_outputs.pooler_output`
    layers.push(layer(json!({"kind": "keep"}))?);
    let tied = c.flag("tie_word_embeddings", false)? || text_tied;
    for key in ["image_token_index", "image_token_id", "image_seq_length", "vision_config", "text_config"] {
        c.get(key);
    }
    c.refuse_unknown("llava", &[])?;
    // `CLIPVisionModel` (transformers 5.24: `embeddings`, `pre_layrnorm`, `encoder.layers`,
    // `post_layernorm` under `vision_tower`), `LlavaMultiModalProjector`
    let parts = [
        ("conv2d", "vision_tower.embeddings.patch_embedding"), ("cls_token", "vision_tower.embeddings"),
        ("positional_embedding", "vision_tower.embeddings.position_embedding"), ("layer_norm", "vision_tower.pre_layrnorm"),
        ("linear", "multi_modal_projector.linear_1"), ("*", "multi_modal_projector.act"), ("linear", "multi_modal_projector.linear_2"),
    ];
    let mut spec = assemble(name, input, layers, text, tokens, tied, true, &parts)?;
    name_discarded(&mut spec);
    Ok(spec)
}

/// `PaliGemmaConfig` (transformers 5.24).
pub(super) fn paligemma(c: &Fields, arch: Option<&str>, build: Build) -> Result<ModelSpec> {
    let name = class(arch, "PaliGemmaForConditionalGeneration", "paligemma")?;
    let mut vision = sub(c, "vision_config")?;
    if vision.is_empty() {
        // PaliGemmaConfig's `init_kwargs` for an absent `vision_config`
        for (k, v) in [("intermediate_size", 4096), ("hidden_size", 1152), ("patch_size", 14), ("image_size", 224), ("num_hidden_layers", 27), ("num_attention_heads", 16)] {
            vision.insert(k.into(), json!(v));
        }
        vision.insert("vision_use_head".into(), json!(false));
    }
    let ignored = ["num_image_tokens", "projector_hidden_act", "vocab_size", "initializer_factor"];
    let (mut layers, channels, image, hv, side, _) = siglip(&vision, "paligemma", &ignored)?;
    let mut text_cfg = sub(c, "text_config")?;
    if text_cfg.is_empty() {
        for (k, v) in [("hidden_size", 2048), ("num_hidden_layers", 18), ("intermediate_size", 16384), ("num_attention_heads", 8), ("num_key_value_heads", 1), ("vocab_size", 257152)] {
            text_cfg.insert(k.into(), json!(v));
        }
    }
    // PaliGemmaConfig sets these on its text config; they change a mask and nothing else
    let text = text_model(build, text_cfg, "gemma", &["use_bidirectional_attention", "num_image_tokens"])?;
    let proj = c.size("projection_dim", 2048)?;
    if proj != text.hidden {
        return Err(Error::Import(format!("field `projection_dim` ({proj}) must equal the text model's hidden_size ({})", text.hidden)));
    }
    // `PaliGemmaModel.get_image_features` returns the tower's `last_hidden_state` (after
    // `post_layernorm`) and the projected features (`pooler_output`, before the division): the
    // forward returns them, `generate()` keeps them to its end (measured, `generate_vlm2.rs`)
    layers.push(layer(json!({"kind": "keep"}))?);
    layers.push(layer(json!({"kind": "linear", "in_features": hv, "out_features": proj}))?);
    layers.push(layer(json!({"kind": "keep"}))?);
    // no `image_features / √hidden_size` in transformers 5.24 (`get_image_features` returns the
    // projector's output as it is; older versions divided, a new `[P, Dt]` tensor)
    let tied = c.flag("tie_word_embeddings", true)?;
    for key in ["image_token_index", "image_token_id", "vocab_size", "hidden_size", "vision_config", "text_config"] {
        c.get(key);
    }
    c.refuse_unknown("paligemma", &[])?;
    let parts = [SIGLIP_PARTS[0], SIGLIP_PARTS[1], SIGLIP_PARTS[2], ("linear", "multi_modal_projector.linear")];
    let mut spec = assemble(name, vec![channels, image, image], layers, text, side.saturating_mul(side), tied, false, &parts)?;
    // `PaliGemmaProcessor` returns `token_type_ids` (1 at the image tokens)
    if let Some(Layer::TokenInput(t)) = spec.layers.first_mut() {
        t.token_type_ids = true;
    }
    Ok(spec)
}
