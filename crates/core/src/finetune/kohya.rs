//! The lowering state of a kohya-ss/sd-scripts LoRA step (`Builder::kohya`; its forward in
//! `layer/lora_kohya.rs`, the step in `diffusion/kohya.rs`).

use crate::units::DType;

/// A kohya training step's lowering state (`Builder::kohya`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kohya {
    /// The network's dtype: fp32, or the weight dtype under `--full_bf16` / `--full_fp16`.
    pub adapter: DType,
    /// The frozen base's dtype (`unet.to(weight_dtype)`); the autocast comes from the precision.
    pub base: DType,
    /// What the frozen weights being lowered are stored in: `base`, or fp8 under `--fp8_base`
    /// (`unet.to(dtype=torch.float8_e4m3fn)`; the text encoders but their embeddings too).
    pub weights: DType,
    /// Inside a `Transformer2DModel`: its linears and 1×1 convs get a `LoRAModule`.
    pub in_scope: bool,
    /// How many of the next model inputs require grad: `noisy_latents.requires_grad_(train_unet)`
    /// always, the text conds too under `--gradient_checkpointing` (`get_noise_pred_and_target`).
    pub grad_inputs: u32,
    /// kohya's SD 1.x/2.x UNet (`library/original_unet.py`) checkpoints each whole
    /// `Transformer2DModel` and the mid block's first resnet too, where diffusers checkpoints
    /// each `BasicTransformerBlock` and leaves that resnet out.
    pub sd1_checkpointing: bool,
    /// `--network_args conv_dim=N`: the resnets, downsamplers and upsamplers are wrapped too,
    /// their 3×3 convs at rank N (0: not).
    pub conv_dim: u32,
}
