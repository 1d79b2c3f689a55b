//! The setup a model starts with. A language model is trained or fine-tuned one sequence at a
//! time at a stated length, in the dtype its checkpoint is stored in (`config.json`'s
//! `torch_dtype`): starting it at an image model's batch 32 in fp32 shows a figure (terabytes)
//! nobody runs. Other models keep [`TrainConfig::default`].

use crate::config::{Precision, TrainConfig};
use crate::spec::{Loss, ModelSpec};

/// The sequence length a language model starts at (its own if shorter).
pub const LM_SEQ_LEN: u64 = 2048;

/// The precision of a checkpoint's `torch_dtype` (`"bfloat16"`, `"float16"`, `"float32"`).
pub fn precision_of_torch_dtype(dtype: &str) -> Option<Precision> {
    match dtype {
        "bfloat16" => Some(Precision::Bf16),
        "float16" => Some(Precision::Fp16),
        "float32" => Some(Precision::Fp32),
        _ => None,
    }
}

/// A causal language model: what [`starting_setup`] changes the defaults for.
pub fn is_language_model(spec: &ModelSpec) -> bool {
    spec.loss == Loss::CausalLm
}

/// The setup `spec` starts with: for a language model batch 1, at most [`LM_SEQ_LEN`] tokens,
/// and the precision of `torch_dtype` (bf16 when it names none: what LLM checkpoints ship in);
/// the rest of `base` as it is. `None` for other models (keep `base`).
pub fn starting_setup(spec: &ModelSpec, torch_dtype: Option<&str>, base: &TrainConfig) -> Option<TrainConfig> {
    if !is_language_model(spec) {
        return None;
    }
    let seq = spec.seq_len(None).map(|s| s.min(LM_SEQ_LEN));
    let precision = torch_dtype.and_then(precision_of_torch_dtype).unwrap_or(Precision::Bf16);
    Some(TrainConfig { batch: 1, seq_len: seq, precision, grad_accum: 1, ..*base })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_language_model_starts_at_one_sequence_in_its_dtype() {
        let spec = ModelSpec::from_json(
            r#"{"input": {"shape": [8192], "dtype": "int64", "vocab_size": 100}, "loss": "causal_lm",
                "layers": [{"kind": "embedding", "num_embeddings": 100, "embedding_dim": 8}, {"kind": "linear", "in_features": 8, "out_features": 100}]}"#,
        )
        .unwrap();
        let c = starting_setup(&spec, Some("float16"), &TrainConfig::default()).unwrap();
        assert_eq!((c.batch, c.seq_len, c.precision), (1, Some(LM_SEQ_LEN), Precision::Fp16));
        assert_eq!(starting_setup(&spec, None, &TrainConfig::default()).unwrap().precision, Precision::Bf16);
        let mut cnn = spec.clone();
        cnn.loss = Loss::CrossEntropy;
        assert_eq!(starting_setup(&cnn, Some("bfloat16"), &TrainConfig::default()), None);
    }
}
