//! One row of "what fits my GPUs" and the settings every row shares: below the PyTorch and vLLM
//! rows (`fits.rs`) and the llama.cpp ones (`fits_llama.rs`).

use super::Variable;
use serde::Serialize;

/// The settings every row shares.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, serde::Deserialize)]
pub struct FitsOptions {
    /// Samples per step (training, inference, generation).
    pub batch: u64,
    /// Sequence length (training, inference), prompt (generation), context (vLLM); `None`: the
    /// model's own, and 4,096 tokens for vLLM.
    pub seq_len: Option<u64>,
    /// Generation: new tokens.
    pub new_tokens: u64,
}

impl Default for FitsOptions {
    fn default() -> Self {
        FitsOptions { batch: 1, seq_len: None, new_tokens: 256 }
    }
}

/// One model × format.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct Row {
    pub model: String,
    pub format: String,
    pub method: String,
    pub fits: bool,
    pub device_total_bytes: u64,
    pub peak_bytes: u64,
    /// `capacity − device total`: negative when it does not fit (for vLLM, the KV pool left
    /// for one sequence of the context, negative when vLLM would refuse it).
    pub margin_bytes: i64,
    /// The reverse figure (`batch`; `concurrency` for vLLM) and its value (`None`: does not fit).
    pub reverse_of: Variable,
    pub reverse_value: Option<u64>,
}
