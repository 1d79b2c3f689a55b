//! # vramcalc-core
//!
//! The estimation core of vramcalc: model specs, shape inference, presets, importers and a
//! storage-level simulation of a PyTorch training step. No web, GPU or I/O dependencies.
//!
//! Flow: [`spec::ModelSpec`] (serde JSON) → [`resolve::resolve`] (shapes, op graph) →
//! [`memory::Prepared::estimate`] → [`memory::Estimate`], which every view formats.
//!
//! | module | concern |
//! |---|---|
//! | `spec` | what the user wrote |
//! | `layer/*` | one file per layer family: config, shape rules, lowering; `layer/args` PyTorch's argument types |
//! | `lower`, `graph` | the op vocabulary and the resolved graph |
//! | `config` | the training setup (`TrainConfig`): an input to lowering and simulation |
//! | `finetune` | the fine-tuning setup (`FineTune`) and Hugging Face module names; plain data below `config` |
//! | `resolve` | spec → graph with paths in errors (`path`: the typed layer path) |
//! | `memory/*` | simulation, optimizer, device overheads; `memory/estimate` the `Estimate` |
//! | `whatif` | the memory tricks applied to a setup (the app's panel, `--what-if`) |
//! | `generation`, `whatif_gen` | `--mode generate`: its settings and its what-ifs (the simulation: `memory/generate`, `layer/kv_cache`) |
//! | `distributed` | one rank of DDP, ZeRO, FSDP2 and tensor-parallel jobs, over the same simulation |
//! | `presets/*`, `import/*` | built-in models and Hugging Face `config.json` |
//! | `formats` | weight and KV-cache storage formats (fp8, bitsandbytes, GPTQ, AWQ, GGUF) |
//! | `diffusion` | diffusers pipelines: text encoders, denoisers and VAEs as stages, offload modes |
//! | `serve` | vLLM serving capacity: the KV pool left after weights, profile run and overheads |
//! | `launch` | the command that runs a setup (vLLM, torchrun, peft, DeepSpeed, accelerate) and a script that measures it |
//! | `share` | the share-link codec |
//! | `solve` | the reverse question: the largest value that fits, the cheapest fix, what fits a GPU |
//!
//! Imports run one way: `whatif` → `memory` → `resolve` → `spec` → `layer` → `lower` →
//! `graph`/`config` → `units`/`error`/`path`/`serde_util` (the serde helpers);
//! `tests/module_graph.rs` checks it. `docs/architecture.md` has the whole map.

pub mod config;
pub mod defaults;
pub mod diffusion;
pub mod distributed;
pub mod error;
pub mod finetune;
pub mod generation;
pub mod gguf;
pub mod formats;
pub mod graph;
pub mod hub;
pub mod import;
pub mod launch;
pub mod layer;
pub mod layer_names;
pub mod llama_cpp;
pub mod lower;
pub mod memory;
pub mod path;
pub mod presets;
pub mod resolve;
/// A checkpoint's size as stored: safetensors headers and `model.safetensors.index.json`.
pub mod safetensors;
pub mod serve;
mod serde_util;
pub mod share;
pub mod solve;
pub mod spec;
pub mod units;
pub mod whatif;
pub mod whatif_gen;

pub use error::{Error, Result};
pub use generation::{GenerateConfig, KvCacheKind, KvDType};
pub use config::{
    AttentionImpl, AutocastDevice, Device, Framework, Mode, OptimizerImpl, OptimizerKind, Precision, TrainConfig,
};
pub use memory::device::{Gpu, GPUS};
pub use memory::breakdown::{Breakdown, Category};
pub use memory::simulate::Phase;
pub use memory::{estimate, Estimate, LayerReport, Prepared};
pub use spec::{Layer, ModelSpec};
pub use units::{format_bytes, thousands, ByteUnit, DType, Shape};
