//! The errors of sizing a llama.cpp run, below every file that returns them.

/// Why a model or a setting cannot be sized.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LlamaError {
    #[error("GGUF metadata: {0}")]
    Metadata(String),
    #[error("{0}")]
    Params(String),
    #[error("not supported: {0}")]
    Unsupported(String),
}
