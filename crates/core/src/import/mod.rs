//! Importers: other tools' model descriptions → [`crate::spec::ModelSpec`]. No memory logic here.
//!
//! - [`hf`]: a Hugging Face `config.json` (BERT, GPT-2, LLaMA, ViT families).

pub mod hf;

pub use hf::from_config_json;
