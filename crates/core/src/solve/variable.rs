//! What the solver maximises, and where memory runs out above the answer: below the search
//! (`mod.rs`) and the setups it evaluates (`setup.rs`).

use serde::Serialize;

/// The variable to maximise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Variable {
    /// Samples per optimizer step (per GPU in a multi-GPU job).
    Batch,
    /// The sequence length of a token model.
    SeqLen,
    /// `--mode generate`: prompt tokens per sequence.
    PromptLen,
    /// `--mode generate`: tokens generated per sequence.
    NewTokens,
    /// vLLM: the longest context (`max_model_len`) `concurrency` sequences can each have.
    Context,
    /// vLLM: the most sequences of `context` tokens held at once.
    Concurrency,
    /// llama.cpp: layers offloaded to the GPU (the llama.cpp engine; not in this build).
    GpuLayers,
}

impl Variable {
    pub const ALL: [Variable; 7] = [
        Variable::Batch,
        Variable::SeqLen,
        Variable::PromptLen,
        Variable::NewTokens,
        Variable::Context,
        Variable::Concurrency,
        Variable::GpuLayers,
    ];

    /// The CLI's spelling (`--of`).
    pub fn name(self) -> &'static str {
        match self {
            Variable::Batch => "batch",
            Variable::SeqLen => "seq-len",
            Variable::PromptLen => "prompt-len",
            Variable::NewTokens => "new-tokens",
            Variable::Context => "context",
            Variable::Concurrency => "concurrency",
            Variable::GpuLayers => "gpu-layers",
        }
    }

    pub fn parse(s: &str) -> Option<Variable> {
        Variable::ALL.into_iter().find(|v| v.name() == s)
    }

    /// Whether the variable belongs to vLLM serving (`serve::capacity`), not to a step's estimate.
    pub fn is_serving(self) -> bool {
        matches!(self, Variable::Context | Variable::Concurrency)
    }
}

impl std::fmt::Display for Variable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Where the memory runs out just above the answer: the first value that does not fit.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct Limit {
    /// The first value that does not fit.
    pub value: u64,
    pub device_total_bytes: u64,
    /// The phase of the peak there (`forward`, `backward`, `optimizer`; `serving` for vLLM).
    pub phase: String,
    /// Where the peak happens (the estimate's `peak_at`).
    pub at: String,
    /// The largest category of the peak's breakdown there (`activations`, `parameters`, `kv_cache`, …).
    pub category: String,
    pub category_bytes: u64,
}
