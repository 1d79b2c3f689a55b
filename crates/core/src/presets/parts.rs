//! What the preset constructors share: a layer from JSON, the two kinds of model they return, and
//! PyTorch's default transformer layer (importers start from it too). Below `presets/mod.rs` and
//! every constructor file, so none of them imports another.

use crate::layer::transformer::{FfnActivation, NormKind, TransformerLayer};
use crate::spec::InputDType;
use crate::spec::{InputSpec, Layer, Loss, ModelSpec, SPEC_VERSION};

/// A layer from its JSON form. Preset literals are valid specs: every preset is built and
/// resolved by `tests/presets.rs`, so a failure here is a bug those tests catch.
pub(crate) fn layer(v: serde_json::Value) -> Layer {
    serde_json::from_value(v).expect("valid preset layer")
}

/// A model with a float input of `shape` (per sample) and cross-entropy loss.
pub(crate) fn image_model(name: &str, shape: Vec<u64>, layers: Vec<Layer>) -> ModelSpec {
    let input = InputSpec { shape, dtype: Default::default(), vocab_size: None };
    ModelSpec { version: SPEC_VERSION, name: Some(name.to_string()), input, layers, loss: Loss::CrossEntropy, names: Default::default(), unquantised: None }
}

/// A model over `seq_len` token ids from a vocabulary of `vocab_size`, with cross-entropy loss.
pub(crate) fn token_model(name: &str, seq_len: u64, vocab_size: u64, layers: Vec<Layer>) -> ModelSpec {
    let input = InputSpec { shape: vec![seq_len], dtype: InputDType::Int64, vocab_size: Some(vocab_size) };
    ModelSpec { version: SPEC_VERSION, name: Some(name.to_string()), input, layers, loss: Loss::CrossEntropy, names: Default::default(), unquantised: None }
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
        eager_only: false,
        rotary_local: false,
        windows: None,
        fused_gate_up: false,
        rotary_buffer: None,
        attn_out_kept: false,
        norm_out_kept: false,
    }
}
