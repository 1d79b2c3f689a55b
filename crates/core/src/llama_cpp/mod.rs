//! What llama.cpp allocates for a GGUF model, device by device: the model buffers, the KV cache
//! (K and V apart), the compute buffers and the output buffer, for llama.cpp's own settings
//! (`-c`, `-ngl`, `-ctk`, …). Read from llama.cpp's source (as vendored by llama-cpp-python
//! 0.3.36) and checked against its logged buffers on the CPU backend
//! (`tests/llama_cpp.rs`, data from `tools/measure_llama_cpp.py`); see `docs/llama-cpp.md`.
//!
//! | file | what |
//! |---|---|
//! | `hparams` | the metadata the buffers depend on |
//! | `params` | llama.cpp's flags and the GPUs |
//! | `flags` | the flags' values as text (`-ot`, `-ts`, `-sm`, `-fa`, `-ngl`), for the CLI and the app |
//! | `placement` | which buffer each weight goes to; the model buffers |
//! | `kv` | context padding, streams, the KV cache per device |
//! | `recurrent` | Mamba-style layers' recurrent state (R, S) per device |
//! | `compute` | the compute buffers and the output buffer |
//! | `ggml`, `gallocr` | a data-less ggml graph and ggml-alloc's sizing of it |
//! | `build`, `models`, `more_models`, `mla`, `oai`, `ssm` | the graph llama.cpp reserves for one micro-batch, per architecture |
//! | `sched_assign`, `sched` | the backend scheduler's assignment of nodes to devices (op offload) and its split of the graph |
//! | `estimate` | one run's buffers per device |
//! | `ollama` | Ollama's defaults and names as llama.cpp settings |
//! | `ollama_sched` | which GPUs Ollama gives llama-server (one that holds it, else all) |
//! | `synth` | a header from a `config.json` and a `llama-quantize` recipe, without the file |
//! | `fit` | the reverse answers: largest context, most GPU layers, the command line |

mod build;
mod compute;
mod error;
mod estimate;
pub mod fit;
pub mod flags;
pub mod gallocr;
pub mod ggml;
mod hparams;
mod kv;
mod mla;
mod more_models;
mod oai;
pub mod models;
pub mod ollama;
pub mod ollama_sched;
mod params;
mod placement;
mod recurrent;
mod sched;
mod ssm;
mod sched_assign;
pub mod synth;

pub use error::LlamaError;
pub use estimate::{estimate, DeviceReport, Estimate};
pub use hparams::Hparams;
pub use kv::{Context, KvBytes};
pub use models::reserve_graphs;
pub use params::{FlashAttn, GpuDevice, Override, Params, SplitMode, Target, FFN_EXPS_REGEX, KV_CACHE_TYPES};
pub use placement::Buft;
