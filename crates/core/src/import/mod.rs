//! Importers: other tools' model descriptions → [`crate::spec::ModelSpec`]. No memory logic here.
//!
//! - [`hf`]: a Hugging Face `config.json` (BERT, GPT-2, LLaMA, ViT families).
//! - [`hf_moe`]: its mixture-of-experts decoders (Mixtral, Qwen2/3-MoE, DeepSeek-V3), called from [`hf`].

pub mod hf;
pub mod hf_moe;

pub use hf::from_config_json;
