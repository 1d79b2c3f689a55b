//! Built-in models as plain constructors of [`ModelSpec`]s (candle's `models/*` style), and the
//! published `config.json` of the Hugging Face models people plan most (`configs/*.json`, built
//! by the importer: [`crate::import::preset`]). Parameter counts equal PyTorch's exactly (tested
//! in `tests/presets.rs`).

mod bert;
mod gpt2;
mod inception;
mod lstm;
mod resnet;
mod vgg;
mod parts;

use crate::error::{Error, Result};
use crate::spec::ModelSpec;
use serde::Serialize;

pub use bert::{bert, BertConfig};
pub use gpt2::{gpt2, Gpt2Config};
pub use inception::inception_v3;
pub use lstm::{lstm_lm, LstmLmConfig};
pub use resnet::resnet;
pub use vgg::vgg;
pub(crate) use parts::{token_model, transformer_layer};

/// How the app groups presets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    Cnn,
    /// Vision transformers.
    Vision,
    /// Encoders and encoder–decoders (BERT, RoBERTa, T5, Whisper).
    Encoder,
    /// Decoder-only language models.
    Llm,
    /// Mixture-of-experts language models.
    Moe,
    Rnn,
}

/// A preset's id (as the CLI and share links name it) and what the app shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PresetInfo {
    pub id: &'static str,
    pub title: &'static str,
    pub family: Family,
    /// Sequence length used when none is given (token models).
    pub default_seq_len: Option<u64>,
    /// The built spec's `name` (an edited preset keeps it): lets the app tell which preset a
    /// spec started from without building the presets (tested against [`build`]).
    #[serde(skip)]
    pub spec_name: &'static str,
}

const fn cnn(id: &'static str, title: &'static str) -> PresetInfo {
    PresetInfo { id, title, family: Family::Cnn, default_seq_len: None, spec_name: id }
}
const fn rnn(id: &'static str, title: &'static str, seq: u64, spec_name: &'static str) -> PresetInfo {
    PresetInfo { id, title, family: Family::Rnn, default_seq_len: Some(seq), spec_name }
}
const fn enc(id: &'static str, title: &'static str, seq: u64, spec_name: &'static str) -> PresetInfo {
    PresetInfo { id, title, family: Family::Encoder, default_seq_len: Some(seq), spec_name }
}
const fn llm(id: &'static str, title: &'static str, seq: u64, spec_name: &'static str) -> PresetInfo {
    PresetInfo { id, title, family: Family::Llm, default_seq_len: Some(seq), spec_name }
}
/// A preset built from `configs/<id>.json`; its spec is named `title`.
const fn hf(id: &'static str, title: &'static str, family: Family, seq: Option<u64>) -> PresetInfo {
    PresetInfo { id, title, family, default_seq_len: seq, spec_name: title }
}

pub const PRESETS: &[PresetInfo] = &[
    cnn("resnet18", "ResNet-18 (torchvision)"),
    cnn("resnet34", "ResNet-34 (torchvision)"),
    cnn("resnet50", "ResNet-50 (torchvision)"),
    cnn("resnet101", "ResNet-101 (torchvision)"),
    cnn("resnet152", "ResNet-152 (torchvision)"),
    cnn("vgg11", "VGG-11 (torchvision)"),
    cnn("vgg13", "VGG-13 (torchvision)"),
    cnn("vgg16", "VGG-16 (torchvision)"),
    cnn("vgg19", "VGG-19 (torchvision)"),
    cnn("vgg11_bn", "VGG-11 with BatchNorm"),
    cnn("vgg13_bn", "VGG-13 with BatchNorm"),
    cnn("vgg16_bn", "VGG-16 with BatchNorm"),
    cnn("vgg19_bn", "VGG-19 with BatchNorm"),
    cnn("inception_v3", "Inception v3 with aux classifier (torchvision)"),
    hf("vit-b-16", "ViT-B/16 (ViTForImageClassification)", Family::Vision, None),
    enc("bert-base", "BERT-base (BertModel)", 128, "BertModel"),
    enc("bert-large", "BERT-large (BertModel)", 128, "BertModel"),
    enc("bert-base-seqcls", "BERT-base for sequence classification", 128, "BertForSequenceClassification"),
    enc("bert-large-seqcls", "BERT-large for sequence classification", 128, "BertForSequenceClassification"),
    hf("roberta-base", "RoBERTa-base (RobertaModel)", Family::Encoder, Some(128)),
    hf("t5-base", "T5-base (T5ForConditionalGeneration)", Family::Encoder, Some(512)),
    hf("whisper-small", "Whisper-small (WhisperForConditionalGeneration)", Family::Encoder, Some(3000)),
    llm("gpt2", "GPT-2 small (GPT2LMHeadModel)", 1024, "GPT2LMHeadModel"),
    hf("llama-3.1-8b", "Llama-3.1-8B", Family::Llm, Some(4096)),
    hf("llama-3.1-70b", "Llama-3.1-70B", Family::Llm, Some(4096)),
    hf("mistral-7b-v0.3", "Mistral-7B-v0.3", Family::Llm, Some(4096)),
    hf("qwen2.5-0.5b", "Qwen2.5-0.5B", Family::Llm, Some(4096)),
    hf("qwen2.5-7b", "Qwen2.5-7B", Family::Llm, Some(4096)),
    hf("qwen2.5-72b", "Qwen2.5-72B", Family::Llm, Some(4096)),
    hf("gemma-2-9b", "Gemma-2-9B", Family::Llm, Some(4096)),
    hf("phi-3-mini", "Phi-3-mini-4k", Family::Llm, Some(4096)),
    hf("mixtral-8x7b", "Mixtral-8x7B", Family::Moe, Some(4096)),
    hf("deepseek-v3", "DeepSeek-V3 (671B)", Family::Moe, Some(4096)),
    hf("qwen3-8b", "Qwen3-8B", Family::Llm, Some(4096)),
    hf("qwen3-32b", "Qwen3-32B", Family::Llm, Some(4096)),
    hf("qwen3-30b-a3b", "Qwen3-30B-A3B", Family::Moe, Some(4096)),
    hf("qwen3-235b-a22b", "Qwen3-235B-A22B", Family::Moe, Some(4096)),
    hf("glm-4.5-air", "GLM-4.5-Air (106B-A12B)", Family::Moe, Some(4096)),
    hf("gpt-oss-20b", "gpt-oss-20b", Family::Moe, Some(4096)),
    hf("gpt-oss-120b", "gpt-oss-120b", Family::Moe, Some(4096)),
    hf("gemma-3-27b", "Gemma-3-27B (with its vision tower)", Family::Llm, Some(4096)),
    hf("qwen3-next-80b-a3b", "Qwen3-Next-80B-A3B (gated DeltaNet + attention)", Family::Moe, Some(4096)),
    hf("llama-4-scout-17b-16e", "Llama-4-Scout-17B-16E (text model)", Family::Moe, Some(4096)),
    hf("qwen2.5-vl-7b", "Qwen2.5-VL-7B-Instruct (with its vision tower)", Family::Llm, Some(4096)),
    hf("kimi-k2", "Kimi-K2-Instruct (1T-A32B, DeepSeek-V3 architecture)", Family::Moe, Some(4096)),
    hf("mistral-small-3.2-24b", "Mistral-Small-3.2-24B-Instruct (text model)", Family::Llm, Some(4096)),
    hf("falcon-h1-7b", "Falcon-H1-7B (attention + Mamba-2 in every layer)", Family::Llm, Some(4096)),
    rnn("lstm-ptb", "LSTM language model (PTB medium, 2×650, tied)", 35, "LSTM language model (PTB medium)"),
];

/// The published `config.json` of preset `id` (Hugging Face hub, `config.json` at the model's
/// main revision; DeepSeek-V3's without its FP8 `quantization_config`, gpt-oss's without its MXFP4 one), for
/// [`crate::import::preset`]. Only code that builds presets links these texts.
pub fn hf_config(id: &str) -> Option<&'static str> {
    Some(match id {
        "vit-b-16" => include_str!("configs/vit-b-16.json"),
        "roberta-base" => include_str!("configs/roberta-base.json"),
        "t5-base" => include_str!("configs/t5-base.json"),
        "whisper-small" => include_str!("configs/whisper-small.json"),
        "llama-3.1-8b" => include_str!("configs/llama-3.1-8b.json"),
        "llama-3.1-70b" => include_str!("configs/llama-3.1-70b.json"),
        "mistral-7b-v0.3" => include_str!("configs/mistral-7b-v0.3.json"),
        "qwen2.5-0.5b" => include_str!("configs/qwen2.5-0.5b.json"),
        "qwen2.5-7b" => include_str!("configs/qwen2.5-7b.json"),
        "qwen2.5-72b" => include_str!("configs/qwen2.5-72b.json"),
        "gemma-2-9b" => include_str!("configs/gemma-2-9b.json"),
        "phi-3-mini" => include_str!("configs/phi-3-mini.json"),
        "mixtral-8x7b" => include_str!("configs/mixtral-8x7b.json"),
        "deepseek-v3" => include_str!("configs/deepseek-v3.json"),
        "qwen3-8b" => include_str!("configs/qwen3-8b.json"),
        "qwen3-32b" => include_str!("configs/qwen3-32b.json"),
        "qwen3-30b-a3b" => include_str!("configs/qwen3-30b-a3b.json"),
        "qwen3-235b-a22b" => include_str!("configs/qwen3-235b-a22b.json"),
        "glm-4.5-air" => include_str!("configs/glm-4.5-air.json"),
        "gpt-oss-20b" => include_str!("configs/gpt-oss-20b.json"),
        "gpt-oss-120b" => include_str!("configs/gpt-oss-120b.json"),
        "gemma-3-27b" => include_str!("configs/gemma-3-27b.json"),
        // Qwen/Qwen3-Next-80B-A3B-Instruct
        "qwen3-next-80b-a3b" => include_str!("configs/qwen3-next-80b-a3b.json"),
        // meta-llama/Llama-4-Scout-17B-16E-Instruct's `text_config` as a `llama4_text` config
        // (the checkpoint is a `Llama4ForConditionalGeneration`; its vision tower is not here)
        "llama-4-scout-17b-16e" => include_str!("configs/llama-4-scout-17b-16e.json"),
        // Qwen/Qwen2.5-VL-7B-Instruct's config.json (text fields at the top level, as published)
        "qwen2.5-vl-7b" => include_str!("configs/qwen2.5-vl-7b.json"),
        // moonshotai/Kimi-K2-Instruct's config.json (`model_type: kimi_k2`, its `auto_map` a
        // `DeepseekV3ForCausalLM`) as the `deepseek_v3` config transformers builds: 384 routed
        // experts, 64 heads, one dense layer, vocab 163,840, YaRN ×32 over 4,096; its FP8
        // `quantization_config` is in `published_quantization`
        "kimi-k2" => include_str!("configs/kimi-k2.json"),
        // mistralai/Mistral-Small-3.2-24B-Instruct-2506's `text_config` (as transformers'
        // `Mistral3Config` default text config) as a `mistral` config; the checkpoint is a
        // `Mistral3ForConditionalGeneration` whose Pixtral vision tower is not here
        "mistral-small-3.2-24b" => include_str!("configs/mistral-small-3.2-24b.json"),
        // tiiuae/Falcon-H1-7B-Instruct's config.json as two published copies give it (the
        // sizing fields: 44 layers, hidden 3072, 12/2 heads of 128, intermediate 12288, vocab
        // 130048, 24 Mamba-2 heads of 128, d_state 256; transformers' FalconH1 docs table agrees),
        // the fields they leave out at FalconH1Config's defaults (no projection biases but the conv's)
        "falcon-h1-7b" => include_str!("configs/falcon-h1-7b.json"),
        _ => return None,
    })
}

/// The `quantization_config` a preset's checkpoint is published with (its hub `config.json`;
/// [`hf_config`] leaves it out so the presets count the model's parameters in its dtype): what
/// an inference of the checkpoint loads ([`published_weights`]).
pub fn published_quantization(id: &str) -> Option<&'static str> {
    Some(match id {
        // openai/gpt-oss-20b and openai/gpt-oss-120b config.json
        "gpt-oss-20b" | "gpt-oss-120b" => {
            r#"{"modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"], "quant_method": "mxfp4"}"#
        }
        // deepseek-ai/DeepSeek-V3 and moonshotai/Kimi-K2-Instruct config.json
        "deepseek-v3" | "kimi-k2" => r#"{"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8", "weight_block_size": [128, 128]}"#,
        _ => return None,
    })
}

/// The weight format of a preset's published checkpoint ([`published_quantization`]).
pub fn published_weights(id: &str) -> Option<crate::formats::WeightFormat> {
    let q: serde_json::Value = serde_json::from_str(published_quantization(id)?).ok()?;
    crate::formats::hf::from_quantization_config(&q).ok()
}

/// All presets, in menu order.
pub fn list() -> &'static [PresetInfo] {
    PRESETS
}

pub fn info(id: &str) -> Option<&'static PresetInfo> {
    PRESETS.iter().find(|p| p.id == id)
}

/// The first preset (in menu order) whose spec carries `name`, without building any.
pub fn named(name: &str) -> Option<&'static PresetInfo> {
    PRESETS.iter().find(|p| p.spec_name == name)
}

/// Builds the spec of preset `id` from its constructor; the presets of published Hugging Face
/// configs ([`hf_config`]) are built by [`crate::import::preset`], which also builds these.
pub fn build(id: &str) -> Result<ModelSpec> {
    let spec = match id {
        "resnet18" | "resnet34" | "resnet50" | "resnet101" | "resnet152" => resnet(id),
        "vgg11" | "vgg13" | "vgg16" | "vgg19" | "vgg11_bn" | "vgg13_bn" | "vgg16_bn" | "vgg19_bn" => vgg(id),
        "bert-base" => bert(&BertConfig::base(), false),
        "bert-large" => bert(&BertConfig::large(), false),
        "bert-base-seqcls" => bert(&BertConfig::base(), true),
        "bert-large-seqcls" => bert(&BertConfig::large(), true),
        "inception_v3" => Some(inception_v3(true)),
        "gpt2" => gpt2(&Gpt2Config::default(), true),
        "lstm-ptb" => lstm_lm(&LstmLmConfig::default()),
        _ => None,
    };
    spec.ok_or_else(|| Error::UnknownPreset(id.to_string()))
}
