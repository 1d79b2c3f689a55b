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
use crate::serde_util::{from_fields, invalid_type, is_false, via_value};
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

/// One layer or block. The tag is `kind`. `Deserialize` is written by hand below.
#[derive(Debug, Clone, PartialEq, Serialize)]
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

/// Written by hand instead of derived with `#[serde(tag = "kind")]`, which buffers through
/// serde's private `Content` and so instantiates every payload's `Deserialize` once per
/// deserializer. Here every payload is read from one buffered `Value` (see [`via_value`]).
/// Same JSON and errors as the derive, except for error positions and the list form
/// `[kind, field values…]`, which is not accepted (see `layer_from_value`).
impl<'de> Deserialize<'de> for Layer {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        via_value(d, layer_from_value)
    }
}

/// The non-generic body of `Layer::deserialize`.
fn layer_from_value(value: serde_json::Value) -> serde_json::Result<Layer> {
    use serde::de::Error as _;
    use serde_json::Value;
    // A map with a `kind` entry. (The derive also took a sequence `[kind, fields…]`, which
    // nothing writes; reading only maps drops every payload's `visit_seq`, see `from_fields`.)
    let (kind, rest) = match value {
        Value::Object(mut map) => match map.remove("kind") {
            Some(kind) => (kind, map),
            None => return Err(serde_json::Error::missing_field("kind")),
        },
        other => return Err(invalid_type(other, "internally tagged enum Layer")),
    };
    let kind = match kind {
        Value::String(kind) => kind,
        other => return Err(invalid_type(other, "variant identifier")),
    };
    Ok(match kind.as_str() {
        "linear" => Layer::Linear(from_fields(rest)?),
        "conv1d" => Layer::Conv1d(from_fields(rest)?),
        "conv2d" => Layer::Conv2d(from_fields(rest)?),
        "conv_transpose2d" => Layer::ConvTranspose2d(from_fields(rest)?),
        "batch_norm1d" => Layer::BatchNorm1d(from_fields(rest)?),
        "batch_norm2d" => Layer::BatchNorm2d(from_fields(rest)?),
        "layer_norm" => Layer::LayerNorm(from_fields(rest)?),
        "group_norm" => Layer::GroupNorm(from_fields(rest)?),
        "rms_norm" => Layer::RmsNorm(from_fields(rest)?),
        "relu" => Layer::Relu(from_fields(rest)?),
        "leaky_relu" => Layer::LeakyRelu(from_fields(rest)?),
        "gelu" => Layer::Gelu(from_fields(rest)?),
        "silu" => Layer::Silu(from_fields(rest)?),
        // Unit variants ignore other fields, as the derive does.
        "tanh" => Layer::Tanh,
        "sigmoid" => Layer::Sigmoid,
        "softmax" => Layer::Softmax(from_fields(rest)?),
        "dropout" => Layer::Dropout(from_fields(rest)?),
        "max_pool2d" => Layer::MaxPool2d(from_fields(rest)?),
        "avg_pool2d" => Layer::AvgPool2d(from_fields(rest)?),
        "adaptive_avg_pool2d" => Layer::AdaptiveAvgPool2d(from_fields(rest)?),
        "flatten" => Layer::Flatten(from_fields(rest)?),
        "transpose" => Layer::Transpose(from_fields(rest)?),
        "select_token" => Layer::SelectToken(from_fields(rest)?),
        "embedding" => Layer::Embedding(from_fields(rest)?),
        "positional_embedding" => Layer::PositionalEmbedding(from_fields(rest)?),
        "cls_token" => Layer::ClsToken(from_fields(rest)?),
        "lstm" => Layer::Lstm(from_fields(rest)?),
        "gru" => Layer::Gru(from_fields(rest)?),
        "rnn" => Layer::Rnn(from_fields(rest)?),
        "multihead_attention" => Layer::MultiheadAttention(from_fields(rest)?),
        "gated_mlp" => Layer::GatedMlp(from_fields(rest)?),
        "transformer_encoder_layer" => Layer::TransformerEncoderLayer(from_fields(rest)?),
        "transformer_decoder_layer" => Layer::TransformerDecoderLayer(from_fields(rest)?),
        "sequential" => {
            let SequentialFields { layers, checkpoint } = from_fields(rest)?;
            Layer::Sequential { layers, checkpoint }
        }
        "residual" => {
            let ResidualFields { body, shortcut, inplace } = from_fields(rest)?;
            Layer::Residual { body, shortcut, inplace }
        }
        "repeat" => {
            let RepeatFields { times, body } = from_fields(rest)?;
            Layer::Repeat { times, body }
        }
        "parallel" => {
            let ParallelFields { branches, join } = from_fields(rest)?;
            Layer::Parallel { branches, join }
        }
        other => return Err(serde_json::Error::unknown_variant(other, Layer::KINDS)),
    })
}

/// The fields of [`Layer::Sequential`] (the block variants' payloads, for `layer_from_value`).
#[derive(Deserialize)]
struct SequentialFields {
    layers: Vec<Layer>,
    #[serde(default)]
    checkpoint: bool,
}

/// The fields of [`Layer::Residual`].
#[derive(Deserialize)]
struct ResidualFields {
    body: Vec<Layer>,
    #[serde(default)]
    shortcut: Option<Vec<Layer>>,
    #[serde(default)]
    inplace: bool,
}

/// The fields of [`Layer::Repeat`].
#[derive(Deserialize)]
struct RepeatFields {
    times: u64,
    body: Vec<Layer>,
}

/// The fields of [`Layer::Parallel`].
#[derive(Deserialize)]
struct ParallelFields {
    branches: Vec<Vec<Layer>>,
    #[serde(default)]
    join: Join,
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
            "lstm" => r#"{"kind":"lstm","input_size":128,"hidden_size":128}"#,
            "gru" => r#"{"kind":"gru","input_size":128,"hidden_size":128}"#,
            "rnn" => r#"{"kind":"rnn","input_size":128,"hidden_size":128}"#,
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
    /// The model's name as the CLI, the app and the downloads show it.
    pub fn display_name(&self) -> String {
        self.name.clone().unwrap_or_else(|| "custom model".into())
    }

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
    fn layer_deserialize_matches_the_derived_format() {
        let err = |json: &str| serde_json::from_str::<Layer>(json).unwrap_err().to_string();
        assert!(err(r#"{"kind": "lineer"}"#).starts_with("unknown variant `lineer`, expected one of `linear`, "));
        assert_eq!(err(r#"{"in_features": 1}"#), "missing field `kind`");
        assert_eq!(err(r#"["linear", 2, 3]"#), "invalid type: sequence, expected internally tagged enum Layer");
        assert_eq!(err("3"), "invalid type: integer `3`, expected internally tagged enum Layer");
        assert_eq!(err(r#"{"kind": 3}"#), "invalid type: integer `3`, expected variant identifier");
        assert_eq!(err(r#"{"kind": "linear", "in_features": 1}"#), "missing field `out_features`");
        assert!(err(r#"{"kind": "relu", "foo": 1}"#).starts_with("unknown field `foo`"));
        assert!(err(r#"{"kind": "relu", "kind": "gelu"}"#).starts_with("duplicate field `kind`"));
        let nested = r#"{"kind": "sequential", "layers": [{"kind": "dropout", "p": 0.1, "p": 0.2}]}"#;
        assert!(err(nested).starts_with("duplicate field `p`"), "{}", err(nested));
        // unit variants ignore other fields
        let ok = |json: &str| serde_json::from_str::<Layer>(json).unwrap();
        assert_eq!(ok(r#"{"kind": "tanh", "foo": 1}"#), Layer::Tanh);
        // nested blocks, and the same result through `serde_json::Value`
        let json = r#"{"kind": "repeat", "times": 2, "body": [{"kind": "residual", "body": [{"kind": "sequential",
            "layers": [{"kind": "tanh"}], "checkpoint": true}], "shortcut": [{"kind": "parallel", "branches": [[]],
            "join": "add"}]}]}"#;
        let layer = ok(json);
        assert_eq!(serde_json::from_value::<Layer>(serde_json::from_str(json).unwrap()).unwrap(), layer);
        assert_eq!(serde_json::from_str::<Layer>(&serde_json::to_string(&layer).unwrap()).unwrap(), layer);
    }

    #[test]
    fn parse_error_says_where() {
        let err = ModelSpec::from_json(r#"{"input": {"shape": [3]}, "layers": [{"kind": "lineer"}]}"#)
            .unwrap_err();
        assert!(err.to_string().contains("lineer"), "{err}");
    }
}
