//! Image and video generation: diffusers pipelines as stages of models (text encoders, a
//! denoiser, a VAE), each model's forward simulated storage by storage like any other model
//! (`memory/simulate.rs`) from its own `config.json`, and the pipeline's residency per offload
//! mode (`pipeline.rs`).
//!
//! | module | what |
//! |---|---|
//! | `cfg` | reading a component's `config.json` |
//! | `ops` | the ops diffusers' modules run, over the core's op vocabulary |
//! | `vae`, `wan_vae`, `wan_tiled` | `AutoencoderKL`, `AutoencoderKLWan` and its tiled decode |
//! | `unet` | `UNet2DConditionModel` (SD 1.x/2.x, SDXL) |
//! | `dit` | `SD3Transformer2DModel`, `FluxTransformer2DModel` |
//! | `wan` | `WanTransformer3DModel` |
//! | `text` | CLIP, T5 and UMT5 text encoders |
//! | `component` | one component: its forward graph and what one forward needs |
//! | `train`, `train_whatif` | a LoRA training step of the denoiser, and its what-ifs |
//! | `kohya`, `kohya_te` | a LoRA step as kohya-ss/sd-scripts runs it, and its text-encoder LoRA |
//! | `kohya_job` | kohya's flags, checked, and the job: the step and the frozen models beside it (CLI and app) |
//! | `pipeline`, `offload` | a pipeline's stages and what each offload mode keeps where |
//! | `family`, `context` | the pipelines' families, and what their `__call__` keeps beside a forward |
//! | `presets` | the built-in pipelines (their `model_index.json` and configs, `configs/`) |
//! | `reverse` | the largest size, frames or batch that fits a GPU, and the what-ifs |

pub mod cfg;
pub mod component;
pub mod context;
pub mod dit;
pub mod family;
pub mod full_train;
pub mod kohya;
pub mod kohya_job;
pub mod kohya_te;
pub mod offload;
pub mod ops;
pub mod pipeline;
pub mod presets;
pub mod reverse;
pub mod text;
pub mod train;
pub mod train_whatif;
pub mod unet;
pub mod vae;
pub mod wan;
pub mod wan_tiled;
pub mod wan_vae;

pub use component::{Component, ComponentKind, Forward, Pass};
pub use offload::Offload;
pub use pipeline::{Guidance, PipelineEstimate, PipelineSettings, PipelineSpec, StageReport, WeightDType};
