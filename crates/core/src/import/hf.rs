//! Hugging Face `config.json` → spec, for the BERT, GPT-2, LLaMA and ViT families.
//!
//! The class named first in `architectures` is built when it is supported; otherwise (or when
//! `architectures` is absent) the family's base model (`BertModel`, `GPT2Model`, `LlamaModel`,
//! `ViTModel`), and the spec's `name` says so. Every field a config omits (or sets to `null`) takes
//! the default of transformers' config class (`BertConfig`, `GPT2Config`, `LlamaConfig`,
//! `ViTConfig`), as `from_pretrained` would. A field of the wrong type, an unsupported
//! `model_type`, or a setting the spec cannot express exactly is an [`Error::Import`] naming it.
//!
//! | family | built as |
//! |---|---|
//! | `bert` | [`presets::bert`] from a [`BertConfig`] (post-norm, pooler; classifier head for `BertForSequenceClassification`) |
//! | `gpt2` | [`presets::gpt2`] (pre-norm causal layers, fused `c_attn`, tied `lm_head`) |
//! | `llama` | RMSNorm, SwiGLU `gated_mlp`, rotary, grouped-query `num_kv_heads`, untied `lm_head` unless `tie_word_embeddings` |
//! | `vit` | patch conv (k = s = `patch_size`), flatten + transpose, `cls_token`, positions, pre-norm layers, final LayerNorm, `[CLS]` head |
//!
//! Other families have their own files: `hf/dense.rs` (decoders), `hf/llama_variants.rs`
//! (SmolLM3, Granite, GLM-4, StableLM, GPT-J), `hf/olmo.rs` (OLMo 2), `hf/encoders.rs` (BERT,
//! RoBERTa, XLM-RoBERTa, DistilBERT, ELECTRA), `hf/seq2seq.rs` (T5, Whisper), `hf/bart.rs` (BART),
//! `hf/clip.rs` (CLIP), `hf/siglip.rs` (SigLIP), `hf/vlm.rs` (Gemma 3's image-text model), `hf/qwen_vl.rs` (Qwen2.5-VL),
//! `hf/llava.rs` (LLaVA, PaliGemma), `hf/modernbert.rs` (ModernBERT), `hf/alibi.rs` (BLOOM, MPT), `hf/deberta.rs` (DeBERTa-v2), `hf/swin.rs` (Swin), `hf/wav2vec2.rs` (wav2vec 2.0), `hf/dinov2.rs` (DINOv2), `hf/convnext.rs` (ConvNeXt), and
//! `hf_moe.rs` with `moe_families.rs` (the mixture-of-experts decoders).
//! Generic `PretrainedConfig` fields are accepted alike by all (`import/generic.rs`).
//!
//! Sequence length of token models: BERT 128 (as the preset), decoders their context length
//! capped at [`MAX_DEFAULT_SEQ_LEN`]; the estimate's `seq_len` overrides it.

use crate::error::{Error, Result};
use crate::layer::transformer::{FfnActivation, NormKind, TransformerLayer};
use crate::layer::embedding::{ClsToken, Embedding, PositionalEmbedding};
use crate::layer::linear::Linear;
use crate::layer::norm::{LayerNorm, RmsNorm};
use crate::presets::{self, Gpt2Config};
use crate::layer::args::Pair;
use crate::spec::{InputDType, InputSpec, Layer, Loss, ModelSpec, SPEC_VERSION};
use super::decoder::LLAMA_MODULES;
pub use super::decoder::MAX_DEFAULT_SEQ_LEN;
use super::fields::{dropout, invalid, pick, Fields};
use serde_json::{json, Map, Value};

mod dense;
mod llama_variants;
mod llama_more;
mod olmo;
mod clip;
mod encoders;
mod seq2seq;
mod ssm;
mod vlm;
mod parts;
mod qwen_vl;
mod llava;
mod bart;
mod dinov2;
mod convnext;
mod siglip;
mod modernbert;
mod alibi;
mod deberta;
mod swin;
mod wav2vec2;
mod mllama;

pub use qwen_vl::{smart_resize, DEFAULT_IMAGE as QWEN_VL_DEFAULT_IMAGE};

pub use seq2seq::{T5_SOURCE_LEN, T5_TARGET_LEN};

/// The `model_type`s this importer understands.
pub const MODEL_TYPES: &[&str] = &[
    "bart", "bert", "bloom", "clip", "cohere", "cohere2", "convnext", "deberta-v2", "dinov2", "distilbert", "electra", "ernie4_5", "exaone4", "falcon", "gemma", "gemma2", "gemma3", "gemma3_text", "glm4", "gpt2", "gpt_neox", "gptj", "granite", "hunyuan_v1_dense", "llama",
    "llava", "mamba", "mamba2", "mistral", "mllama", "modernbert", "mpt", "nemotron", "olmo2", "opt", "paligemma", "phi", "phi3", "qwen2", "qwen2_5_vl", "qwen3", "roberta", "siglip", "smollm3", "stablelm", "starcoder2", "swin", "t5", "vit", "wav2vec2", "whisper", "xlm-roberta",
];

/// Reads a pasted `config.json` and builds the spec of the model it describes.
pub fn from_config_json(text: &str) -> Result<ModelSpec> {
    let value: Value = serde_json::from_str(text).map_err(|e| Error::Import(format!("not valid JSON: {e}")))?;
    let obj = value.as_object().ok_or_else(|| Error::Import("expected a JSON object (`{...}`)".into()))?;
    from_config(obj)
}

/// [`from_config_json`] for an already parsed object.
pub fn from_config(obj: &Map<String, Value>) -> Result<ModelSpec> {
    with_skip_list(obj, model_of(obj)?)
}

/// `spec` with the modules its `quantization_config` keeps unquantised
/// (`formats::skip::SkipList`).
fn with_skip_list(obj: &Map<String, Value>, mut spec: ModelSpec) -> Result<ModelSpec> {
    if let Some(q) = obj.get("quantization_config").filter(|q| !q.is_null()) {
        spec.unquantised = crate::formats::skip::SkipList::of_quantization_config(q)?;
        let fp8 = q.get("quant_method").and_then(Value::as_str) == Some("fp8");
        if let (true, Some(list), Some("Qwen2_5_VLForConditionalGeneration")) = (fp8, spec.unquantised.as_mut(), spec.name.as_deref()) {
            qwen_vl::fp8_skip_names(&mut list.modules);
        }
    }
    Ok(spec)
}

fn model_of(obj: &Map<String, Value>) -> Result<ModelSpec> {
    let c = Fields::new(obj);
    let arch = c.architecture()?;
    let model_type = match c.str("model_type")? {
        Some(t) => t.to_string(),
        None => family_of(arch.unwrap_or(""))
            .ok_or_else(|| Error::Import("missing field `model_type` (and no known class in `architectures`)".into()))?
            .to_string(),
    };
    match model_type.as_str() {
        "bert" => encoders::bert(&c, arch),
        "gpt2" => gpt2(&c, arch),
        "llama" => llama(&c, arch),
        "vit" => vit(&c, arch),
        moe if super::hf_moe::MODEL_TYPES.contains(&moe) => super::hf_moe::from_config(obj, moe, arch),
        "mistral" | "qwen2" | "qwen3" | "gemma" | "gemma2" | "gemma3_text" | "phi3" => dense::llama_like(&c, arch, &model_type),
        "phi" => dense::phi(&c, arch),
        "gpt_neox" => dense::gpt_neox(&c, arch),
        "falcon" => dense::falcon(&c, arch),
        "opt" => dense::opt(&c, arch),
        "starcoder2" => dense::starcoder2(&c, arch),
        "smollm3" => llama_variants::smollm3(&c, arch),
        "granite" => llama_variants::granite(&c, arch),
        "glm4" => llama_variants::glm4(&c, arch),
        "stablelm" => llama_variants::stablelm(&c, arch),
        "gptj" => llama_variants::gptj(&c, arch),
        "olmo2" => olmo::olmo2(&c, arch),
        "cohere" => llama_variants::cohere(&c, arch),
        "cohere2" => llama_variants::cohere2(&c, arch),
        "roberta" => encoders::roberta(&c, arch),
        "xlm-roberta" => encoders::xlm_roberta(&c, arch),
        "electra" => encoders::electra(&c, arch),
        "distilbert" => encoders::distilbert(&c, arch),
        "t5" => seq2seq::t5(&c, arch),
        "clip" => clip::clip(&c, arch),
        "whisper" => seq2seq::whisper(&c, arch),
        "bart" => bart::bart(&c, arch),
        "dinov2" => dinov2::dinov2(&c, arch),
        "convnext" => convnext::convnext(&c, arch),
        "siglip" => siglip::siglip(&c, arch),
        "modernbert" => modernbert::modernbert(&c, arch),
        "gemma3" => vlm::gemma3(&c, arch),
        "mamba" => ssm::mamba(&c, arch),
        "ernie4_5" => llama_more::ernie4_5(&c, arch),
        "hunyuan_v1_dense" => llama_more::hunyuan_v1_dense(&c, arch),
        "nemotron" => llama_more::nemotron(&c, arch),
        "exaone4" => olmo::exaone4(&c, arch),
        "mamba2" => ssm::mamba2(&c, arch),
        "qwen2_5_vl" => qwen_vl::qwen2_5_vl(&c, arch, qwen_vl::DEFAULT_IMAGE),
        "llava" => llava::llava(&c, arch, from_config),
        "paligemma" => llava::paligemma(&c, arch, from_config),
        "bloom" => alibi::bloom(&c, arch),
        "mpt" => alibi::mpt(&c, arch),
        "deberta-v2" => deberta::deberta_v2(&c, arch),
        "swin" => swin::swin(&c, arch),
        "wav2vec2" => wav2vec2::wav2vec2(&c, arch),
        "mllama" => mllama::mllama(&c, arch),
        other => Err(Error::Import(format!(
            "unsupported model_type `{other}` (supported: {}, {})",
            MODEL_TYPES.join(", "),
            super::hf_moe::MODEL_TYPES.join(", ")
        ))),
    }
}

/// [`from_config`] of a T5 config (`model_type` `t5`), the T5 importer alone: the pipelines' text
/// encoders (`diffusion::text::t5`) call it, so a bundle with the pipelines links no other
/// importer (issue 23, docs/loadtime.md).
pub fn t5_from_config(obj: &Map<String, Value>) -> Result<ModelSpec> {
    let c = Fields::new(obj);
    seq2seq::t5(&c, c.architecture()?)
}

/// [`from_config`] of a Qwen2.5-VL config for an image of `image` = `(width, height)` pixels,
/// resized as its image processor does ([`smart_resize`]): the spec's input and image tokens
/// follow it. Other types have no dynamic resolution: an error.
pub fn from_config_with_image(obj: &Map<String, Value>, image: (u64, u64)) -> Result<ModelSpec> {
    let c = Fields::new(obj);
    let arch = c.architecture()?;
    match c.str("model_type")? {
        Some("qwen2_5_vl") => with_skip_list(obj, qwen_vl::qwen2_5_vl(&c, arch, image)?),
        other => Err(Error::Import(format!(
            "an image size is read by Qwen2.5-VL's dynamic resolution only (model_type `qwen2_5_vl`), not `{}`",
            other.unwrap_or("(none)")
        ))),
    }
}

fn family_of(arch: &str) -> Option<&'static str> {
    [
        ("Bert", "bert"), ("GPT2", "gpt2"), ("Llama", "llama"), ("ViT", "vit"), ("Mistral", "mistral"), ("Qwen2", "qwen2"),
        ("Qwen3", "qwen3"), ("Gemma3", "gemma3_text"), ("Gemma2", "gemma2"), ("Gemma", "gemma"), ("Phi3", "phi3"),
        ("Phi", "phi"), ("GPTNeoX", "gpt_neox"), ("Falcon", "falcon"), ("OPT", "opt"), ("Starcoder2", "starcoder2"),
        ("Roberta", "roberta"), ("SmolLM3", "smollm3"), ("Granite", "granite"), ("Glm4", "glm4"), ("StableLm", "stablelm"), ("GPTJ", "gptj"), ("Olmo2", "olmo2"), ("Cohere2", "cohere2"), ("Cohere", "cohere"), ("DistilBert", "distilbert"), ("T5", "t5"), ("Whisper", "whisper"), ("CLIP", "clip"), ("Mamba", "mamba"), ("Mamba2", "mamba2"), ("Ernie4_5", "ernie4_5"), ("HunYuanDenseV1", "hunyuan_v1_dense"), ("Nemotron", "nemotron"), ("Exaone4", "exaone4"),
        ("Qwen2_5_VL", "qwen2_5_vl"), ("Llava", "llava"), ("XLMRoberta", "xlm-roberta"), ("Electra", "electra"), ("Bart", "bart"), ("Dinov2", "dinov2"), ("ConvNext", "convnext"), ("Siglip", "siglip"), ("ModernBert", "modernbert"), ("PaliGemma", "paligemma"), ("Bloom", "bloom"), ("Mpt", "mpt"), ("Ernie4_5_Moe", "ernie4_5_moe"), ("MiniMax", "minimax"), ("DebertaV2", "deberta-v2"), ("Swin", "swin"), ("Wav2Vec2", "wav2vec2"), ("Mllama", "mllama"),
    ]
        .into_iter()
        .find(|(stem, _)| class_stem(arch) == *stem)
        .map(|(_, t)| t)
}

/// `LlamaForCausalLM` → `Llama`, `GPT2LMHeadModel` → `GPT2`, `BertModel` → `Bert`.
fn class_stem(arch: &str) -> &str {
    match arch.find("For") {
        Some(i) if i > 0 => &arch[..i],
        _ => arch.strip_suffix("LMHeadModel").or_else(|| arch.strip_suffix("Model")).unwrap_or(arch),
    }
}

/// `GPT2Config` (transformers): defaults are GPT-2 small's.
fn gpt2(c: &Fields, arch: Option<&str>) -> Result<ModelSpec> {
    let (class, name) = pick(arch, &["GPT2LMHeadModel", "GPT2Model"], "GPT2Model");
    let d = Gpt2Config::default();
    let n_positions = c.size("n_positions", d.n_positions)?;
    let n_inner = c.opt_int("n_inner")?;
    if n_inner == Some(0) {
        return Err(Error::Import("field `n_inner` must be at least 1".into()));
    }
    let cfg = Gpt2Config {
        vocab_size: c.size("vocab_size", d.vocab_size)?,
        n_positions,
        n_embd: c.size("n_embd", d.n_embd)?,
        n_layer: c.size("n_layer", d.n_layer)?,
        n_head: c.size("n_head", d.n_head)?,
        n_inner,
        activation_function: c.activation("activation_function", d.activation_function)?,
        resid_pdrop: c.prob("resid_pdrop", d.resid_pdrop)?,
        embd_pdrop: c.prob("embd_pdrop", d.embd_pdrop)?,
        attn_pdrop: c.prob("attn_pdrop", d.attn_pdrop)?,
        layer_norm_epsilon: c.float("layer_norm_epsilon", d.layer_norm_epsilon)?,
        tie_word_embeddings: c.flag("tie_word_embeddings", d.tie_word_embeddings)?,
        seq_len: n_positions.min(MAX_DEFAULT_SEQ_LEN),
    };
    let mut spec = presets::gpt2(&cfg, class == "GPT2LMHeadModel").ok_or_else(|| invalid("GPT-2"))?;
    spec.name = Some(name);
    Ok(spec)
}

/// `modeling_vit.py`'s module names of the `vit` layout above (`n` layers): the patch
/// projection, `embeddings` (its forward prepends `[CLS]`; the positions are its parameter),
/// `encoder.layer.<i>`, `layernorm`, then the classifier or the pooler. The flatten and
/// transpose after the projection and the classifier's `[:, 0]` are no modules.
fn vit_names(classifier: bool, n: usize) -> crate::layer_names::LayerNames {
    use crate::layer_names::{name_module_list, name_top};
    let own = |n: &str| if classifier { format!("vit.{n}") } else { n.to_string() };
    let mut names = Default::default();
    for (i, part) in [(0, "embeddings.patch_embeddings.projection"), (3, "embeddings"), (4, "embeddings.position_embeddings"), (5, "embeddings.dropout"), (7, "layernorm")] {
        name_top(&mut names, i, &own(part));
    }
    name_module_list(&mut names, 6, &own("encoder.layer"));
    if classifier {
        if n > 9 {
            name_top(&mut names, 9, "classifier");
        }
    } else {
        for (i, part) in [(8, "pooler"), (9, "pooler.dense"), (10, "pooler.activation")] {
            name_top(&mut names, i, part);
        }
    }
    names
}

/// `LlamaConfig` (transformers): defaults are LLaMA-7B's.
fn llama(c: &Fields, arch: Option<&str>) -> Result<ModelSpec> {
    let (class, name) = pick(arch, &["LlamaForCausalLM", "LlamaModel"], "LlamaModel");
    let h = c.size("hidden_size", 4096)?;
    let heads = c.size("num_attention_heads", 32)?;
    let kv_heads = c.size("num_key_value_heads", heads)?;
    if let Some(hd) = c.opt_int("head_dim")? {
        if hd.checked_mul(heads) != Some(h) {
            return Err(Error::Import(format!(
                "field `head_dim` ({hd}) × num_attention_heads ({heads}) must equal hidden_size ({h}): other head sizes are not supported"
            )));
        }
    }
    let attention_bias = c.flag("attention_bias", false)?;
    let mlp_bias = c.flag("mlp_bias", false)?;
    if attention_bias != mlp_bias {
        return Err(Error::Import(format!(
            "`attention_bias` ({attention_bias}) and `mlp_bias` ({mlp_bias}) differ: a transformer layer here has one bias switch"
        )));
    }
    let vocab = c.size("vocab_size", 32000)?;
    let eps = c.float("rms_norm_eps", 1e-6)?;
    let max_pos = c.size("max_position_embeddings", 2048)?;
    // The gated MLP's memory does not depend on which activation gates it.
    c.activation("hidden_act", FfnActivation::Silu)?;
    let mut layers = vec![
        Layer::Embedding(Embedding { num_embeddings: vocab, embedding_dim: h, padding_idx: None, tied_weight: false }),
        Layer::Repeat {
            times: c.size("num_hidden_layers", 32)?,
            body: vec![Layer::TransformerDecoderLayer(TransformerLayer {
                dropout: 0.0,
                attention_dropout: Some(c.prob("attention_dropout", 0.0)?),
                activation: FfnActivation::Silu,
                layer_norm_eps: eps,
                norm_first: true,
                bias: attention_bias,
                norm: NormKind::RmsNorm,
                gated_mlp: true,
                num_kv_heads: (kv_heads != heads).then_some(kv_heads),
                rotary: true,
                ..presets::transformer_layer(h, heads, c.size("intermediate_size", 11008)?)
            })],
        },
        Layer::RmsNorm(RmsNorm { normalized_shape: h, eps, t5: false }),
    ];
    if class == "LlamaForCausalLM" {
        let tied = c.flag("tie_word_embeddings", false)?;
        layers.push(Layer::Linear(Linear { in_features: h, out_features: vocab, bias: false, tied_weight: tied }));
    }
    Ok(ModelSpec {
        version: SPEC_VERSION,
        name: Some(name),
        input: InputSpec { shape: vec![max_pos.min(MAX_DEFAULT_SEQ_LEN)], dtype: InputDType::Int64, vocab_size: Some(vocab) },
        layers,
        loss: if class == "LlamaForCausalLM" { Loss::CausalLm } else { Loss::CrossEntropy },
        names: LLAMA_MODULES.names(1..2, Some(2), (class == "LlamaForCausalLM").then_some(3)),
        unquantised: None,
    })
}

/// `ViTConfig` (transformers): defaults are ViT-B/16 at 224×224.
fn vit(c: &Fields, arch: Option<&str>) -> Result<ModelSpec> {
    let (class, name) = pick(arch, &["ViTForImageClassification", "ViTModel"], "ViTModel");
    if !c.flag("qkv_bias", true)? {
        return Err(Error::Import("field `qkv_bias`: false is not supported (Q/K/V and output projections share one bias switch)".into()));
    }
    let h = c.size("hidden_size", 768)?;
    let eps = c.float("layer_norm_eps", 1e-12)?;
    let hidden_dropout = c.prob("hidden_dropout_prob", 0.0)?;
    let channels = c.size("num_channels", 3)?;
    let image = c.pair("image_size", 224)?;
    let patch = c.pair("patch_size", 16)?;
    if image[0] < patch[0] || image[1] < patch[1] {
        return Err(Error::Import(format!("`image_size` {image:?} is smaller than `patch_size` {patch:?}")));
    }
    let patches = (image[0] / patch[0]).saturating_mul(image[1] / patch[1]);
    let conv = serde_json::from_value(json!({
        "kind": "conv2d", "in_channels": channels, "out_channels": h,
        "kernel_size": Pair(patch), "stride": Pair(patch),
    }))
    .map_err(|_| invalid("patch embedding"))?;
    let mut layers = vec![
        conv,
        serde_json::from_value(json!({"kind": "flatten", "start_dim": 2})).map_err(|_| invalid("flatten"))?,
        serde_json::from_value(json!({"kind": "transpose", "dim0": 1, "dim1": 2})).map_err(|_| invalid("transpose"))?,
        Layer::ClsToken(ClsToken { embedding_dim: h }),
        Layer::PositionalEmbedding(PositionalEmbedding {
            num_embeddings: patches.saturating_add(1),
            embedding_dim: h,
            per_sample: false,
            index_buffer: 0,
            inplace: false,
            batched: false,
        }),
        dropout(hidden_dropout)?,
        Layer::Repeat {
            times: c.size("num_hidden_layers", 12)?,
            body: vec![Layer::TransformerEncoderLayer(TransformerLayer {
                dropout: hidden_dropout,
                attention_dropout: Some(c.prob("attention_probs_dropout_prob", 0.0)?),
                activation: c.activation("hidden_act", FfnActivation::Gelu)?,
                layer_norm_eps: eps,
                norm_first: true,
                ..presets::transformer_layer(h, c.size("num_attention_heads", 12)?, c.size("intermediate_size", 3072)?)
            })],
        },
        Layer::LayerNorm(LayerNorm { normalized_shape: h, eps, elementwise_affine: true, bias: true }),
        serde_json::from_value(json!({"kind": "select_token", "index": 0})).map_err(|_| invalid("select_token"))?,
    ];
    if class == "ViTForImageClassification" {
        // `add_pooling_layer=False`; the classifier is `nn.Identity` with 0 labels.
        let labels = c.num_labels()?;
        if labels > 0 {
            layers.push(Layer::Linear(Linear { in_features: h, out_features: labels, bias: true, tied_weight: false }));
        }
    } else {
        let out = c.size("pooler_output_size", h)?;
        layers.push(Layer::Linear(Linear { in_features: h, out_features: out, bias: true, tied_weight: false }));
        layers.push(match c.str("pooler_act")?.unwrap_or("tanh") {
            "tanh" => Layer::Tanh,
            other => return Err(Error::Import(format!("field `pooler_act`: `{other}` is not supported (tanh)"))),
        });
    }
    Ok(ModelSpec {
        version: SPEC_VERSION,
        name: Some(name),
        names: vit_names(class == "ViTForImageClassification", layers.len()),
        unquantised: None,
        input: InputSpec { shape: vec![channels, image[0], image[1]], dtype: InputDType::Float32, vocab_size: None },
        layers,
        loss: Loss::CrossEntropy,
    })
}
