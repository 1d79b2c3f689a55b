//! Built-in models as plain constructors of [`ModelSpec`]s (candle's `models/*` style).
//! Parameter counts equal PyTorch's exactly (tested in `tests/presets.rs`).

mod bert;
mod gpt2;
mod inception;
mod lstm;
mod resnet;
mod vgg;

use crate::error::{Error, Result};
use crate::layer::attention::{FfnActivation, NormKind, TransformerLayer};
use crate::spec::{InputDType, InputSpec, Layer, Loss, ModelSpec, SPEC_VERSION};
use serde::Serialize;

pub use bert::{bert, BertConfig};
pub use gpt2::{gpt2, Gpt2Config};
pub use inception::inception_v3;
pub use lstm::{lstm_lm, LstmLmConfig};
pub use resnet::resnet;
pub use vgg::vgg;

/// How the app groups presets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    Cnn,
    Transformer,
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
const fn tf(id: &'static str, title: &'static str, seq: u64, spec_name: &'static str) -> PresetInfo {
    PresetInfo { id, title, family: Family::Transformer, default_seq_len: Some(seq), spec_name }
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
    tf("bert-base", "BERT-base (BertModel)", 128, "BertModel"),
    tf("bert-large", "BERT-large (BertModel)", 128, "BertModel"),
    tf("bert-base-seqcls", "BERT-base for sequence classification", 128, "BertForSequenceClassification"),
    tf("bert-large-seqcls", "BERT-large for sequence classification", 128, "BertForSequenceClassification"),
    tf("gpt2", "GPT-2 small (GPT2LMHeadModel)", 1024, "GPT2LMHeadModel"),
    rnn("lstm-ptb", "LSTM language model (PTB medium, 2×650, tied)", 35, "LSTM language model (PTB medium)"),
];

/// A layer from its JSON form. Preset literals are valid specs: every preset is built and
/// resolved by `tests/presets.rs`, so a failure here is a bug those tests catch.
pub(crate) fn layer(v: serde_json::Value) -> Layer {
    serde_json::from_value(v).expect("valid preset layer")
}

/// A model with a float input of `shape` (per sample) and cross-entropy loss.
pub(crate) fn image_model(name: &str, shape: Vec<u64>, layers: Vec<Layer>) -> ModelSpec {
    let input = InputSpec { shape, dtype: Default::default(), vocab_size: None };
    ModelSpec { version: SPEC_VERSION, name: Some(name.to_string()), input, layers, loss: Loss::CrossEntropy }
}

/// A model over `seq_len` token ids from a vocabulary of `vocab_size`, with cross-entropy loss.
pub(crate) fn token_model(name: &str, seq_len: u64, vocab_size: u64, layers: Vec<Layer>) -> ModelSpec {
    let input = InputSpec { shape: vec![seq_len], dtype: InputDType::Int64, vocab_size: Some(vocab_size) };
    ModelSpec { version: SPEC_VERSION, name: Some(name.to_string()), input, layers, loss: Loss::CrossEntropy }
}

/// `nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward)` with PyTorch's defaults
/// (post-norm LayerNorm, ReLU, biases, dropout 0.1); presets and importers change fields with `..`.
pub(crate) fn transformer_layer(d_model: u64, nhead: u64, dim_feedforward: u64) -> TransformerLayer {
    TransformerLayer {
        d_model,
        nhead,
        dim_feedforward,
        dropout: 0.1,
        attention_dropout: None,
        activation: FfnActivation::Relu,
        layer_norm_eps: 1e-5,
        norm_first: false,
        bias: true,
        norm: NormKind::LayerNorm,
        gated_mlp: false,
        num_kv_heads: None,
        rotary: false,
        fused_qkv: false,
        head_dim: None,
        out_bias: None,
        mlp_bias: None,
        norm_bias: None,
        rotary_dim: None,
        qk_norm: false,
        sliding_window: None,
        logit_softcap: None,
        parallel: None,
        post_norms: false,
        attn_out_dropout: None,
    }
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

/// Builds the spec of preset `id`.
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
