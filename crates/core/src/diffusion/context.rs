//! What a pipeline's `__call__` itself keeps on the GPU beside a component's forward: the
//! latents, the noise predictions the loop still binds, and the prompt embeddings that are not
//! the forward's own inputs. Read from each pipeline's `__call__` (diffusers 0.42,
//! `pipelines/*/pipeline_*.py`); checked against whole pipelines measured end to end
//! (`tests/data/diffusion_pipeline.jsonl`). Small at real sizes (a 1024² SD3 latent is 0.5 MB),
//! but a tiny pipeline's few percent.
//!
//! In a step after the first, the denoiser's forward runs while the previous step's results
//! are still bound:
//! - SD, SDXL, SD3 (CFG in one batch): `latents` (B), the previous `noise_pred` of 2B (kept by
//!   its `chunk(2)` views `noise_pred_uncond`, `noise_pred_text`) and the guided `noise_pred`
//!   (B): 4B latents. Without CFG: `latents` and the previous prediction, 2B.
//! - Flux: `hidden_states=latents` is the forward's input; the previous `noise_pred` (B).
//! - Wan (CFG as two forwards): `mask = torch.ones(latents.shape, dtype=torch.float32)` and two
//!   predictions (`noise_pred` and `noise_uncond`, B each). `latent_model_input =
//!   latents.to(transformer_dtype)` is the forward's input: the fp32 latents of
//!   `prepare_latents` are cast once, then `FlowMatchEulerDiscreteScheduler.step` returns
//!   `prev_sample.to(model_output.dtype)`, in the transformer's dtype.
//!
//! At the decode, the loop's last bindings are still alive (SD: `latent_model_input` (2B),
//! `noise_pred` (2B + B), and `latents`, as `vae.decode(latents / scaling_factor)` leaves it
//! bound: 6B; SDXL and SD3 rebind `latents` to the scaled copy: 5B; Flux's `noise_pred`: B;
//! Wan's `mask`, `latent_model_input` and the two predictions).
//!
//! The prompt embeddings beside the forward's inputs (with CFG): SD's `negative_prompt_embeds`
//! (the positive is rebound to `torch.cat([negative, positive])`); SDXL's too, with
//! `pooled_prompt_embeds` and `negative_pooled_prompt_embeds` (the forward takes their
//! concatenation `add_text_embeds`); SD3's `negative_prompt_embeds` and
//! `negative_pooled_prompt_embeds`; Wan's `negative_prompt_embeds` while the conditional
//! forward runs and `prompt_embeds` while the unconditional one does.

use super::component::Component;
use super::family::{Family, Guidance};
use crate::units::DType;

/// The bytes `__call__` keeps beside the denoiser's forward (`denoise`) and the VAE's decode
/// (`decode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CallContext {
    pub denoise: u64,
    pub decode: u64,
}

/// What the loop keeps: `latent` is one image's latent elements, `images` the batch,
/// `text_len` the denoiser's text tokens, `dt` the denoiser's dtype.
pub fn call_context(family: Family, guidance: Guidance, denoiser: &Component, latent: u64, images: u64, text_len: u64, dt: DType) -> CallContext {
    let lat = |n: u64, d: DType| latent.saturating_mul(images).saturating_mul(n).saturating_mul(d.size());
    let per_image = |numel: u64| numel.saturating_mul(images).saturating_mul(dt.size());
    let cfg = guidance == Guidance::Cfg;
    // one prompt's embeddings (per image) and its pooled vector
    let (prompt, pooled) = match denoiser {
        Component::Unet(u) => (text_len.saturating_mul(u.cross_attention_dim), u.text_time.map(|(t, input)| input.saturating_sub(t.saturating_mul(6))).unwrap_or(0)),
        Component::Sd3(c) => (text_len.saturating_mul(c.joint_attention_dim), c.pooled_projection_dim),
        Component::Flux(c) => (text_len.saturating_mul(c.joint_attention_dim), c.pooled_projection_dim),
        Component::Wan(w) => (text_len.saturating_mul(w.text_dim), 0),
        _ => (0, 0),
    };
    let (prompt, pooled) = (per_image(prompt), per_image(pooled));
    // (latents beside the forward, latents at the decode, prompt embeddings beside the
    // forward's own text inputs, the forward's text inputs)
    let (denoise, decode, text_extra, text_inputs) = match family {
        Family::Sd | Family::Sdxl | Family::Sd3 => {
            let (d, dec) = if cfg { (4, if family == Family::Sd { 6 } else { 5 }) } else { (2, if family == Family::Sd { 3 } else { 2 }) };
            let n = if cfg { 2 } else { 1 };
            // SDXL's `add_time_ids` are 6 numbers per image
            let time_ids = if family == Family::Sdxl { per_image(6) } else { 0 };
            let inputs = prompt.saturating_add(pooled).saturating_add(time_ids).saturating_mul(n);
            let extra = match (cfg, family) {
                (false, _) => 0,
                (true, Family::Sd) => prompt,
                (true, Family::Sdxl) => prompt.saturating_add(pooled.saturating_mul(2)),
                (true, _) => prompt.saturating_add(pooled),
            };
            (lat(d, dt), lat(dec, dt), extra, inputs)
        }
        Family::Flux => (lat(1, dt), lat(1, dt), 0, prompt.saturating_add(pooled)),
        Family::Wan => {
            let preds = if cfg { 2 } else { 1 };
            let mask = lat(1, DType::F32);
            let extra = if cfg { prompt } else { 0 };
            (mask.saturating_add(lat(preds, dt)), mask.saturating_add(lat(preds + 1, dt)), extra, prompt)
        }
    };
    CallContext { denoise: denoise.saturating_add(text_extra), decode: decode.saturating_add(text_extra).saturating_add(text_inputs) }
}
