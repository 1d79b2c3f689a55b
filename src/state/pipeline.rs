//! The image/video pipeline panel's state (issue 27): a built-in diffusers pipeline and the
//! settings people change, as the core's types (`vramcalc_core::diffusion`). Plain data, tested
//! natively; share links carry it (`crate::pipeline::link`).

use vramcalc_core::config::OptimizerKind;
use serde::{Deserialize, Serialize};
use vramcalc_core::diffusion::{Guidance, Offload, WeightDType};
use vramcalc_core::hub::HubRef;

/// `--mode infer|decode|train`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PipeMode {
    /// The whole pipeline: text encoding, the denoising loop, the VAE decode.
    #[default]
    Infer,
    /// The VAE decode alone.
    Decode,
    /// A LoRA training step of the denoiser on cached latents and text embeddings.
    Train,
}

impl PipeMode {
    pub const ALL: [PipeMode; 3] = [PipeMode::Infer, PipeMode::Decode, PipeMode::Train];
    pub fn name(self) -> &'static str {
        match self {
            PipeMode::Infer => "infer",
            PipeMode::Decode => "decode",
            PipeMode::Train => "train",
        }
    }
    pub fn parse(s: &str) -> Option<PipeMode> {
        PipeMode::ALL.into_iter().find(|m| m.name() == s)
    }
}

/// A diffusers repository read from the hub by id: its `model_index.json` and each model
/// component's `config.json`, as fetched (`crate::pipeline::hub`), so the saved work reopens it
/// without the network.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HubPipeline {
    pub hub: HubRef,
    pub index: String,
    /// `(component, its config.json)`.
    pub configs: Vec<(String, String)>,
}

/// Everything the panel sets. `None` sizes are the pipeline's defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct PipelineState {
    /// The built-in pipeline (the last one chosen, while `hub` is set).
    pub preset: String,
    /// A pipeline read from the hub, instead of the preset.
    pub hub: Option<HubPipeline>,
    pub mode: PipeMode,
    pub width: Option<u64>,
    pub height: Option<u64>,
    pub frames: Option<u64>,
    pub batch: u64,
    pub images_per_prompt: u64,
    pub guidance: Option<Guidance>,
    /// Every component's dtype (`None`: the pipeline's), unless `component_dtypes` names it.
    pub dtype: Option<WeightDType>,
    pub component_dtypes: Vec<(String, WeightDType)>,
    pub offload: Offload,
    /// `vae.enable_tiling()` (0: the VAE's own tile size).
    pub vae_tiling: Option<u64>,
    pub vae_slicing: bool,
    pub lora_r: u32,
    pub checkpointing: bool,
    pub optimizer: OptimizerKind,
    /// Training on cached latents and text embeddings (the VAE and text encoders not loaded);
    /// off: they stay loaded, frozen, beside the step.
    pub cached: bool,
    /// The GPU the answer is checked against (`vramcalc_core::GPUS` id).
    pub gpu: String,
}

impl Default for PipelineState {
    fn default() -> Self {
        PipelineState {
            preset: "flux.1-dev".into(),
            hub: None,
            mode: PipeMode::Infer,
            width: None,
            height: None,
            frames: None,
            batch: 1,
            images_per_prompt: 1,
            guidance: None,
            dtype: None,
            component_dtypes: Vec::new(),
            offload: Offload::None,
            vae_tiling: None,
            vae_slicing: false,
            lora_r: 16,
            checkpointing: true,
            optimizer: OptimizerKind::Adamw,
            cached: true,
            gpu: "rtx-4090".into(),
        }
    }
}
