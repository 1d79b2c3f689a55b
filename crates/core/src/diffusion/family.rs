//! The pipelines' families and how they guide, by `model_index.json`'s `_class_name`.

use crate::error::{Error, Result};

/// Classifier-free guidance as the pipeline runs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Guidance {
    /// Conditional and unconditional predictions (SD, SDXL, SD3: one forward of twice the batch;
    /// Flux's `true_cfg_scale` and Wan: two forwards of the batch, one after the other).
    Cfg,
    /// Flux-dev's guidance embedding: one forward, the scale is an input.
    Distilled,
    /// One forward (Flux-schnell, `guidance_scale <= 1`).
    None,
}

crate::config::names!(Guidance { Cfg = "cfg", Distilled = "distilled", None = "none" });

/// The pipelines' families, by `model_index.json`'s `_class_name`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    Sd,
    Sdxl,
    Sd3,
    Flux,
    Wan,
}

impl Family {
    /// The family of a pipeline class (`model_index.json`'s `_class_name`).
    pub fn of(class: &str) -> Result<Family> {
        Ok(match class {
            "StableDiffusionPipeline" => Family::Sd,
            "StableDiffusionXLPipeline" => Family::Sdxl,
            "StableDiffusion3Pipeline" => Family::Sd3,
            "FluxPipeline" => Family::Flux,
            "WanPipeline" => Family::Wan,
            other => return Err(Error::Import(format!("pipeline `{other}` is not supported (StableDiffusionPipeline, StableDiffusionXLPipeline, StableDiffusion3Pipeline, FluxPipeline, WanPipeline)"))),
        })
    }
}
