//! The fields every Hugging Face config may carry whatever its `model_type`, which change neither
//! the parameters nor the memory of a step: one list, read by every importer alike (`hf.rs` and
//! its families, `hf_moe.rs`).
//!
//! Read from transformers 5.24's `configuration_utils.py`: `PreTrainedConfig`'s dataclass fields
//! (`transformers_version`, `architectures`, `output_hidden_states`, `return_dict`, `dtype`,
//! `chunk_size_feed_forward`, `is_encoder_decoder`, `id2label`, `label2id`, `problem_type`) and
//! what its `__post_init__` pops or sets (`torch_dtype`, `num_labels`, `name_or_path`,
//! `_commit_hash`, `output_attentions`, `attn_implementation`, `experts_implementation`, the
//! legacy `rope_scaling`/`rope_theta` it folds into `rope_parameters`, and every parameter of
//! `GenerationConfig._get_default_generation_params()`, which it drops); the fields transformers
//! 4.x wrote into every `to_dict()` (`torchscript`, `use_bfloat16`, `pruned_heads`, `is_decoder`,
//! `tie_encoder_decoder`, `tf_legacy_loss`, the token ids, `tokenizer_class`, `prefix`,
//! `task_specific_params`, …), which no 5.24 modeling file reads; and hub bookkeeping
//! (`auto_map`, `custom_pipelines`).
//!
//! Two generic fields do change memory where a family's modeling code reads them:
//! `chunk_size_feed_forward` (`apply_chunking_to_forward` in `modeling_bert.py`,
//! `modeling_roberta.py`, `modeling_distilbert.py`, … splits the feed-forward into chunks) and
//! `add_cross_attention` (a cross-attention block in each BERT/GPT-2 layer). At their defaults
//! (`0`, `false`) they are inert everywhere; another value is an error naming the field in those
//! families and inert in the others. `per_layer_config` (heterogeneous layers) is not generic:
//! every importer refuses it as a field it does not model.

use crate::error::{Error, Result};
use serde_json::Value;

/// Fields with no effect on parameters or memory in any family, at any value.
pub(crate) const GENERIC_FIELDS: &[&str] = &[
    // PreTrainedConfig (5.24) and what __post_init__ consumes
    "_name_or_path", "name_or_path", "_commit_hash", "_attn_implementation", "_attn_implementation_autoset",
    "attn_implementation", "_experts_implementation", "experts_implementation", "architectures", "model_type",
    "transformers_version", "torch_dtype", "dtype", "return_dict", "output_hidden_states", "output_attentions",
    "is_encoder_decoder", "id2label", "label2id", "num_labels", "problem_type", "tie_last_hidden_states",
    "rope_theta", "rope_scaling", "rope_parameters", "max_position_embeddings", "initializer_range", "init_std",
    // GenerationConfig._get_default_generation_params(): popped by __post_init__
    "assistant_confidence_threshold", "assistant_lookbehind", "bad_words_ids", "begin_suppress_tokens",
    "diversity_penalty", "do_sample", "early_stopping", "encoder_no_repeat_ngram_size", "encoder_repetition_penalty",
    "epsilon_cutoff", "eta_cutoff", "exponential_decay_length_penalty", "forced_bos_token_id", "forced_eos_token_id",
    "length_penalty", "max_length", "min_length", "no_repeat_ngram_size", "num_assistant_tokens",
    "num_assistant_tokens_schedule", "num_beam_groups", "num_beams", "num_return_sequences", "output_scores",
    "remove_invalid_values", "repetition_penalty", "return_dict_in_generate", "suppress_tokens", "target_lookbehind",
    "temperature", "top_k", "top_p", "typical_p", "use_cache",
    // transformers 4.x's PretrainedConfig fields (its to_dict() wrote them all)
    "torchscript", "use_bfloat16", "pruned_heads", "tf_legacy_loss", "is_decoder", "tie_encoder_decoder",
    "cross_attention_hidden_size", "finetuning_task", "tokenizer_class", "prefix", "task_specific_params",
    "bos_token_id", "eos_token_id", "pad_token_id", "sep_token_id", "cls_token_id", "decoder_start_token_id",
    "use_return_dict", "gradient_checkpointing",
    // hub bookkeeping
    "auto_map", "custom_pipelines",
];

/// Generic fields that change memory, at another value than their default, in the families
/// whose modeling code reads them (see the module docs).
const READ_BY: &[(&str, &[&str])] = &[
    ("chunk_size_feed_forward", &["bert", "roberta", "distilbert", "xlm-roberta", "electra", "vit"]),
    ("add_cross_attention", &["bert", "roberta", "gpt2", "xlm-roberta", "electra"]),
];

/// Whether `key` is a generic field that is inert in `model_type` at `value`: `Ok(true)` when it
/// is, `Ok(false)` when it is not a generic field (the importer must read it or refuse it), and
/// an error naming it when it is generic but this value would change this family's memory.
pub(crate) fn is_inert(key: &str, value: &Value, model_type: &str) -> Result<bool> {
    if let Some((_, families)) = READ_BY.iter().find(|(k, _)| *k == key) {
        let default = matches!(value, Value::Null | Value::Bool(false)) || value.as_u64() == Some(0) || value.as_f64() == Some(0.0);
        if !default && families.contains(&model_type) {
            return Err(Error::Import(format!(
                "field `{key}` ({value}) changes the `{model_type}` model's memory ({}) and is not modelled; remove it or set it to its default",
                if key == "chunk_size_feed_forward" { "its feed-forward runs in chunks" } else { "each layer gains a cross-attention block" }
            )));
        }
        return Ok(true);
    }
    Ok(GENERIC_FIELDS.contains(&key))
}
