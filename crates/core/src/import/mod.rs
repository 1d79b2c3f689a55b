//! Importers: other tools' model descriptions → [`crate::spec::ModelSpec`]. No memory logic here.
//!
//! - [`hf`]: a Hugging Face `config.json` (`hf::MODEL_TYPES`: decoders, encoders, T5, Whisper, CLIP).
//! - [`hf_moe`]: its mixture-of-experts decoders (Mixtral, Qwen2/3-MoE, DeepSeek-V2/V3, OLMoE,
//!   GLM-4.5, GPT-OSS), called from [`hf`]; `moe_cfg.rs` and `moe_families.rs` below it.
//! - `fields.rs`, `generic.rs`, `decoder.rs`: what the importers share (field access, the generic
//!   `PretrainedConfig` fields, decoder module names), below all of them.

mod decoder;
mod fields;
mod generic;
mod moe_cfg;
mod moe_families;
mod moe_hybrid;
pub mod hf;
pub mod hf_moe;

pub use hf::from_config_json;

use crate::error::Result;
use crate::presets;
use crate::spec::ModelSpec;

/// Builds any preset: those of published Hugging Face configs ([`presets::hf_config`]) through
/// the importer, named by their title, and the others by [`presets::build`].
pub fn preset(id: &str) -> Result<ModelSpec> {
    match (presets::hf_config(id), presets::info(id)) {
        (Some(text), Some(info)) => {
            let mut spec = from_config_json(text)?;
            spec.name = Some(info.title.to_string());
            // the published checkpoint's skip list (its `quantization_config` is kept apart)
            if let Some(q) = presets::published_quantization(id).and_then(|q| serde_json::from_str(q).ok()) {
                spec.unquantised = crate::formats::skip::SkipList::of_quantization_config(&q)?;
            }
            Ok(spec)
        }
        _ => presets::build(id),
    }
}
