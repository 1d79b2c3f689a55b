//! What the user wrote: a versioned, lenient serde JSON model spec. No memory logic here.
//!
//! ```json
//! {"version": 1, "name": "tiny", "input": {"shape": [3, 32, 32]},
//!  "layers": [{"kind": "conv2d", "in_channels": 3, "out_channels": 8, "kernel_size": 3, "padding": 1},
//!             {"kind": "relu", "inplace": true}, {"kind": "flatten"},
//!             {"kind": "linear", "in_features": 8192, "out_features": 10}]}
//! ```
//! Layer tags are PyTorch's class names in snake_case, fields are PyTorch's constructor arguments
//! with PyTorch's defaults. Shapes never include the batch dimension.

use crate::error::{Error, Result};
use crate::layer::{
    activation::{Dropout, Gelu, LeakyRelu, Relu, Silu, Softmax},
    attention::{MultiheadAttention, TransformerLayer},
    conv::{Conv1d, Conv2d, ConvTranspose2d},
    embedding::{ClsToken, Embedding, PositionalEmbedding},
    linear::{GatedMlp, Linear},
    norm::{BatchNorm, GroupNorm, LayerNorm, RmsNorm},
    pool::{AdaptiveAvgPool2d, AvgPool2d, MaxPool2d},
    recurrent::Recurrent,
    reshape::{Flatten, SelectToken, Transpose},
};
use serde::{Deserialize, Serialize};

/// Current spec format version. Older versions are migrated on read.
pub const SPEC_VERSION: u32 = 1;

/// A whole model: its per-sample input and its layers, applied in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSpec {
    #[serde(default = "spec_version")]
    pub version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub input: InputSpec,
    pub layers: Vec<Layer>,
    /// The training loss applied to the last layer's output.
    #[serde(default)]
    pub loss: Loss,
}

fn spec_version() -> u32 {
    SPEC_VERSION
}

/// The per-sample model input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputSpec {
    /// Shape without the batch dimension; `[seq_len]` for token inputs.
    pub shape: Vec<u64>,
    /// `float32` images/features, or `int64` token ids.
    #[serde(default)]
    pub dtype: InputDType,
    /// Vocabulary size of token inputs (documentation and validation only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vocab_size: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum InputDType {
    #[default]
    Float32,
    /// Token ids: the first dimension of `shape` is the sequence length.
    Int64,
}

/// The loss computed on the model output during training.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Loss {
    /// `nn.CrossEntropyLoss` on integer targets over the last dimension (per token for sequences).
    #[default]
    CrossEntropy,
    /// `nn.MSELoss` against a target of the output's shape.
    Mse,
}

/// One layer or block. The tag is `kind`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Layer {
    Linear(Linear),
    Conv1d(Conv1d),
    Conv2d(Conv2d),
    ConvTranspose2d(ConvTranspose2d),
    BatchNorm1d(BatchNorm),
    BatchNorm2d(BatchNorm),
    LayerNorm(LayerNorm),
    GroupNorm(GroupNorm),
    RmsNorm(RmsNorm),
    Relu(Relu),
    LeakyRelu(LeakyRelu),
    Gelu(Gelu),
    Silu(Silu),
    Tanh,
    Sigmoid,
    Softmax(Softmax),
    Dropout(Dropout),
    MaxPool2d(MaxPool2d),
    AvgPool2d(AvgPool2d),
    AdaptiveAvgPool2d(AdaptiveAvgPool2d),
    Flatten(Flatten),
    Transpose(Transpose),
    /// `x[:, index]` over the sequence dimension (BERT pooler, ViT head) or the last time step.
    SelectToken(SelectToken),
    Embedding(Embedding),
    /// Adds a learned per-position embedding (BERT/GPT-2 positions, BERT token types).
    PositionalEmbedding(PositionalEmbedding),
    /// Prepends a learned class token (ViT).
    ClsToken(ClsToken),
    Lstm(Recurrent),
    Gru(Recurrent),
    Rnn(Recurrent),
    /// Multi-head self-attention including its projections.
    MultiheadAttention(MultiheadAttention),
    /// SwiGLU feed-forward (LLaMA): `down(silu(gate(x)) * up(x))`.
    GatedMlp(GatedMlp),
    /// `nn.TransformerEncoderLayer`-style block (also BERT, GPT-2, ViT, LLaMA layers).
    TransformerEncoderLayer(TransformerLayer),
    /// Decoder-only (causal) transformer layer: a `transformer_encoder_layer` with a causal mask.
    TransformerDecoderLayer(TransformerLayer),
    /// Layers applied in order. `checkpoint: true` makes it one activation-checkpointing unit.
    Sequential {
        layers: Vec<Layer>,
        #[serde(default, skip_serializing_if = "is_false")]
        checkpoint: bool,
    },
    /// `body(x) + shortcut(x)`; the shortcut is the identity when absent.
    Residual {
        body: Vec<Layer>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        shortcut: Option<Vec<Layer>>,
        /// `out += identity` (torchvision) instead of `out = out + identity`.
        #[serde(default, skip_serializing_if = "is_false")]
        inplace: bool,
    },
    /// `body` applied `times` times; each repetition is an activation-checkpointing unit.
    Repeat { times: u64, body: Vec<Layer> },
    /// Branches applied to the same input, joined by concatenation or sum.
    Parallel {
        branches: Vec<Vec<Layer>>,
        #[serde(default)]
        join: Join,
    },
}

pub(crate) fn is_false(b: &bool) -> bool {
    !*b
}

/// How parallel branches are joined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[derive(Default)]
pub enum Join {
    /// `torch.cat` along the channel (first per-sample) dimension.
    #[default]
    Concat,
    Add,
}


impl Layer {
    /// The `kind` tag as written in JSON.
    pub fn kind(&self) -> &'static str {
        match self {
            Layer::Linear(_) => "linear",
            Layer::Conv1d(_) => "conv1d",
            Layer::Conv2d(_) => "conv2d",
            Layer::ConvTranspose2d(_) => "conv_transpose2d",
            Layer::BatchNorm1d(_) => "batch_norm1d",
            Layer::BatchNorm2d(_) => "batch_norm2d",
            Layer::LayerNorm(_) => "layer_norm",
            Layer::GroupNorm(_) => "group_norm",
            Layer::RmsNorm(_) => "rms_norm",
            Layer::Relu(_) => "relu",
            Layer::LeakyRelu(_) => "leaky_relu",
            Layer::Gelu(_) => "gelu",
            Layer::Silu(_) => "silu",
            Layer::Tanh => "tanh",
            Layer::Sigmoid => "sigmoid",
            Layer::Softmax(_) => "softmax",
            Layer::Dropout(_) => "dropout",
            Layer::MaxPool2d(_) => "max_pool2d",
            Layer::AvgPool2d(_) => "avg_pool2d",
            Layer::AdaptiveAvgPool2d(_) => "adaptive_avg_pool2d",
            Layer::Flatten(_) => "flatten",
            Layer::Transpose(_) => "transpose",
            Layer::SelectToken(_) => "select_token",
            Layer::Embedding(_) => "embedding",
            Layer::PositionalEmbedding(_) => "positional_embedding",
            Layer::ClsToken(_) => "cls_token",
            Layer::Lstm(_) => "lstm",
            Layer::Gru(_) => "gru",
            Layer::Rnn(_) => "rnn",
            Layer::MultiheadAttention(_) => "multihead_attention",
            Layer::GatedMlp(_) => "gated_mlp",
            Layer::TransformerEncoderLayer(_) => "transformer_encoder_layer",
            Layer::TransformerDecoderLayer(_) => "transformer_decoder_layer",
            Layer::Sequential { .. } => "sequential",
            Layer::Residual { .. } => "residual",
            Layer::Repeat { .. } => "repeat",
            Layer::Parallel { .. } => "parallel",
        }
    }

    /// Every `kind` tag, for menus and docs.
    pub const KINDS: &'static [&'static str] = &[
        "linear", "conv1d", "conv2d", "conv_transpose2d", "batch_norm1d", "batch_norm2d",
        "layer_norm", "group_norm", "rms_norm", "relu", "leaky_relu", "gelu", "silu", "tanh",
        "sigmoid", "softmax", "dropout", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d",
        "flatten", "transpose", "select_token", "embedding", "positional_embedding", "cls_token", "lstm", "gru",
        "rnn", "multihead_attention", "gated_mlp", "transformer_encoder_layer",
        "transformer_decoder_layer", "sequential", "residual", "repeat", "parallel",
    ];

    /// A layer of `kind` with PyTorch defaults and small example sizes, for "add layer" menus.
    pub fn example(kind: &str) -> Option<Layer> {
        let json = match kind {
            "linear" => r#"{"kind":"linear","in_features":128,"out_features":128}"#,
            "conv1d" => r#"{"kind":"conv1d","in_channels":16,"out_channels":16,"kernel_size":3,"padding":1}"#,
            "conv2d" => r#"{"kind":"conv2d","in_channels":16,"out_channels":16,"kernel_size":3,"padding":1}"#,
            "conv_transpose2d" => r#"{"kind":"conv_transpose2d","in_channels":16,"out_channels":16,"kernel_size":2,"stride":2}"#,
            "batch_norm1d" => r#"{"kind":"batch_norm1d","num_features":128}"#,
            "batch_norm2d" => r#"{"kind":"batch_norm2d","num_features":16}"#,
            "layer_norm" => r#"{"kind":"layer_norm","normalized_shape":128}"#,
            "group_norm" => r#"{"kind":"group_norm","num_groups":4,"num_channels":16}"#,
            "rms_norm" => r#"{"kind":"rms_norm","normalized_shape":128}"#,
            "softmax" => r#"{"kind":"softmax","dim":-1}"#,
            "max_pool2d" => r#"{"kind":"max_pool2d","kernel_size":2}"#,
            "avg_pool2d" => r#"{"kind":"avg_pool2d","kernel_size":2}"#,
            "adaptive_avg_pool2d" => r#"{"kind":"adaptive_avg_pool2d","output_size":1}"#,
            "transpose" => r#"{"kind":"transpose","dim0":1,"dim1":2}"#,
            "embedding" => r#"{"kind":"embedding","num_embeddings":1000,"embedding_dim":128}"#,
            "positional_embedding" => r#"{"kind":"positional_embedding","num_embeddings":512,"embedding_dim":128}"#,
            "cls_token" => r#"{"kind":"cls_token","embedding_dim":128}"#,
            "lstm" | "gru" | "rnn" => {
                return Some(match serde_json::from_str::<Recurrent>(r#"{"input_size":128,"hidden_size":128}"#) {
                    Ok(r) if kind == "lstm" => Layer::Lstm(r),
                    Ok(r) if kind == "gru" => Layer::Gru(r),
                    Ok(r) => Layer::Rnn(r),
                    Err(_) => return None,
                })
            }
            "multihead_attention" => r#"{"kind":"multihead_attention","embed_dim":128,"num_heads":4}"#,
            "gated_mlp" => r#"{"kind":"gated_mlp","hidden_size":128,"intermediate_size":344}"#,
            "transformer_encoder_layer" => r#"{"kind":"transformer_encoder_layer","d_model":128,"nhead":4,"dim_feedforward":512}"#,
            "transformer_decoder_layer" => r#"{"kind":"transformer_decoder_layer","d_model":128,"nhead":4,"dim_feedforward":512}"#,
            "sequential" => r#"{"kind":"sequential","layers":[]}"#,
            "residual" => r#"{"kind":"residual","body":[]}"#,
            "repeat" => r#"{"kind":"repeat","times":2,"body":[]}"#,
            "parallel" => r#"{"kind":"parallel","branches":[[],[]]}"#,
            other => return serde_json::from_value(serde_json::json!({ "kind": other })).ok(),
        };
        serde_json::from_str(json).ok()
    }
}

impl ModelSpec {
    /// Reads a spec from JSON text, with an error that says where the text is wrong.
    pub fn from_json(text: &str) -> Result<ModelSpec> {
        let spec: ModelSpec = serde_json::from_str(text).map_err(|e| Error::Parse(e.to_string()))?;
        if spec.version > SPEC_VERSION {
            return Err(Error::Parse(format!(
                "spec version {} is newer than this vramcalc understands ({SPEC_VERSION})",
                spec.version
            )));
        }
        Ok(spec)
    }

    pub fn to_json_pretty(&self) -> String {
        // Serialising plain data structs to a String cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// Token-id input (language models).
    pub fn is_token_input(&self) -> bool {
        self.input.dtype == InputDType::Int64
    }
}

/// An integer or a pair, as PyTorch accepts for `kernel_size`, `stride`, `padding`, `dilation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pair(pub [u64; 2]);

impl Pair {
    pub const fn splat(v: u64) -> Pair {
        Pair([v, v])
    }
}

impl Serialize for Pair {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        if self.0[0] == self.0[1] {
            s.serialize_u64(self.0[0])
        } else {
            self.0.serialize(s)
        }
    }
}

impl<'de> Deserialize<'de> for Pair {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            One(u64),
            Two([u64; 2]),
            Many(Vec<u64>),
        }
        match Raw::deserialize(d)? {
            Raw::One(v) => Ok(Pair([v, v])),
            Raw::Two(v) => Ok(Pair(v)),
            Raw::Many(v) if v.len() == 1 => Ok(Pair([v[0], v[0]])),
            Raw::Many(v) => Err(serde::de::Error::custom(format!(
                "expected an integer or a pair of integers, got a list of {}",
                v.len()
            ))),
        }
    }
}

/// Convolution padding: explicit, or PyTorch's `"same"` / `"valid"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Padding {
    Explicit(Pair),
    Named(NamedPadding),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NamedPadding {
    Same,
    Valid,
}

impl Default for Padding {
    fn default() -> Self {
        Padding::Explicit(Pair::splat(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_an_example_that_round_trips() {
        for kind in Layer::KINDS {
            let layer = Layer::example(kind).unwrap_or_else(|| panic!("no example for {kind}"));
            assert_eq!(layer.kind(), *kind);
            let json = serde_json::to_string(&layer).unwrap();
            let back: Layer = serde_json::from_str(&json).unwrap();
            assert_eq!(back, layer, "{json}");
        }
    }

    #[test]
    fn pair_accepts_int_and_list() {
        let p: Pair = serde_json::from_str("3").unwrap();
        assert_eq!(p, Pair([3, 3]));
        let p: Pair = serde_json::from_str("[3, 5]").unwrap();
        assert_eq!(p, Pair([3, 5]));
        assert!(serde_json::from_str::<Pair>("[1,2,3]").is_err());
    }

    #[test]
    fn parse_error_says_where() {
        let err = ModelSpec::from_json(r#"{"input": {"shape": [3]}, "layers": [{"kind": "lineer"}]}"#)
            .unwrap_err();
        assert!(err.to_string().contains("lineer"), "{err}");
    }
}
