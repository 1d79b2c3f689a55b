//! The built-in pipelines: each a diffusers repository's `model_index.json` and its components'
//! `config.json`, as published on the Hugging Face hub (`configs/<id>/`, laid out as the
//! repository lays them out; `tools/diffusion_param_counts.py` counts their parameters).

/// `(id, hub repository, model_index.json, [(component, config.json)])`.
pub type PresetFiles = (&'static str, &'static str, &'static str, &'static [(&'static str, &'static str)]);

pub const PIPELINES: &[PresetFiles] = &[
    ("sd-1.5", "stable-diffusion-v1-5/stable-diffusion-v1-5", include_str!("configs/sd-1.5/model_index.json"), &[("text_encoder", include_str!("configs/sd-1.5/text_encoder/config.json")), ("unet", include_str!("configs/sd-1.5/unet/config.json")), ("vae", include_str!("configs/sd-1.5/vae/config.json"))]),
    ("sdxl", "stabilityai/stable-diffusion-xl-base-1.0", include_str!("configs/sdxl/model_index.json"), &[("text_encoder", include_str!("configs/sdxl/text_encoder/config.json")), ("text_encoder_2", include_str!("configs/sdxl/text_encoder_2/config.json")), ("unet", include_str!("configs/sdxl/unet/config.json")), ("vae", include_str!("configs/sdxl/vae/config.json"))]),
    ("sd3.5-medium", "stabilityai/stable-diffusion-3.5-medium", include_str!("configs/sd3.5-medium/model_index.json"), &[("text_encoder", include_str!("configs/sd3.5-medium/text_encoder/config.json")), ("text_encoder_2", include_str!("configs/sd3.5-medium/text_encoder_2/config.json")), ("text_encoder_3", include_str!("configs/sd3.5-medium/text_encoder_3/config.json")), ("transformer", include_str!("configs/sd3.5-medium/transformer/config.json")), ("vae", include_str!("configs/sd3.5-medium/vae/config.json"))]),
    ("sd3.5-large", "stabilityai/stable-diffusion-3.5-large", include_str!("configs/sd3.5-large/model_index.json"), &[("text_encoder", include_str!("configs/sd3.5-large/text_encoder/config.json")), ("text_encoder_2", include_str!("configs/sd3.5-large/text_encoder_2/config.json")), ("text_encoder_3", include_str!("configs/sd3.5-large/text_encoder_3/config.json")), ("transformer", include_str!("configs/sd3.5-large/transformer/config.json")), ("vae", include_str!("configs/sd3.5-large/vae/config.json"))]),
    ("flux.1-dev", "black-forest-labs/FLUX.1-dev", include_str!("configs/flux.1-dev/model_index.json"), &[("text_encoder", include_str!("configs/flux.1-dev/text_encoder/config.json")), ("text_encoder_2", include_str!("configs/flux.1-dev/text_encoder_2/config.json")), ("transformer", include_str!("configs/flux.1-dev/transformer/config.json")), ("vae", include_str!("configs/flux.1-dev/vae/config.json"))]),
    ("flux.1-schnell", "black-forest-labs/FLUX.1-schnell", include_str!("configs/flux.1-schnell/model_index.json"), &[("text_encoder", include_str!("configs/flux.1-schnell/text_encoder/config.json")), ("text_encoder_2", include_str!("configs/flux.1-schnell/text_encoder_2/config.json")), ("transformer", include_str!("configs/flux.1-schnell/transformer/config.json")), ("vae", include_str!("configs/flux.1-schnell/vae/config.json"))]),
    ("wan2.1-t2v-1.3b", "Wan-AI/Wan2.1-T2V-1.3B-Diffusers", include_str!("configs/wan2.1-t2v-1.3b/model_index.json"), &[("text_encoder", include_str!("configs/wan2.1-t2v-1.3b/text_encoder/config.json")), ("transformer", include_str!("configs/wan2.1-t2v-1.3b/transformer/config.json")), ("vae", include_str!("configs/wan2.1-t2v-1.3b/vae/config.json"))]),
    ("wan2.1-t2v-14b", "Wan-AI/Wan2.1-T2V-14B-Diffusers", include_str!("configs/wan2.1-t2v-14b/model_index.json"), &[("text_encoder", include_str!("configs/wan2.1-t2v-14b/text_encoder/config.json")), ("transformer", include_str!("configs/wan2.1-t2v-14b/transformer/config.json")), ("vae", include_str!("configs/wan2.1-t2v-14b/vae/config.json"))]),
];

/// The files of the pipeline `id`.
pub fn files(id: &str) -> Option<&'static PresetFiles> {
    PIPELINES.iter().find(|p| p.0 == id)
}

/// Every preset's id.
pub fn ids() -> impl Iterator<Item = &'static str> {
    PIPELINES.iter().map(|p| p.0)
}
