//! The one error type of the core. It derives `Clone` and `PartialEq` because it lives in UI state.

use thiserror::Error;

/// Everything that can go wrong between a user's spec and an [`crate::Estimate`].
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Error {
    /// A layer's hyper-parameters do not fit its input or are invalid.
    #[error("{path} ({kind}): {message}")]
    Layer { path: String, kind: String, message: String },
    /// The spec's JSON could not be read.
    #[error("spec: {0}")]
    Parse(String),
    /// The model input is invalid.
    #[error("input: {0}")]
    Input(String),
    /// A configuration value (batch, sequence length, …) is out of range.
    #[error("config: {0}")]
    Config(String),
    /// A preset id that does not exist.
    #[error("unknown preset `{0}` (run `vramcalc presets` for the list)")]
    UnknownPreset(String),
    /// A Hugging Face config that cannot be imported.
    #[error("config.json: {0}")]
    Import(String),
    /// A model whose size does not fit in 64-bit arithmetic or the core's limits.
    #[error("too large: {0}")]
    TooLarge(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
