//! One LoRA (DreamBooth) training step of a denoiser, as diffusers' `train_dreambooth_lora*.py`
//! and `train_text_to_image_lora*.py` run it on cached latents and text embeddings (the VAE and
//! the text encoders are then not loaded): the base frozen in the compute dtype, peft's adapters
//! on `to_q`, `to_k`, `to_v`, `to_out.0` (by default) in fp32 (`cast_training_params`), the
//! prediction and its target compared by `F.mse_loss(model_pred.float(), target.float())`,
//! backward, and the optimizer's step over the adapters. Gradient checkpointing is diffusers'
//! (`enable_gradient_checkpointing()`: `torch.utils.checkpoint(use_reentrant=False)` around each
//! resnet and, inside `Transformer2DModel.forward`, each `BasicTransformerBlock`; each DiT block).
//!
//! Modelled from the source and checked against 15 measured steps (`tests/diffusion.rs`, within
//! 2 %); autocast (`--mixed_precision` with fp32 bases) is not modelled:
//! the base runs in its own dtype.

use super::component::{Component, Pass};
use crate::config::{Device, OptimizerImpl, OptimizerKind, Precision};
use crate::error::{Error, Result};
use crate::finetune::FineTune;
use crate::graph::{GradRule, ValueId};
use crate::lower::{Builder, CastPolicy, LowerOptions};
use crate::memory::optimizer;
use crate::memory::simulate::Plan;
use crate::units::{DType, Shape};

/// The step's figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrainStep {
    pub peak: u64,
    pub params: u64,
    pub trainable: u64,
    pub param_bytes: u64,
}

/// A training step of `c` (a denoiser) on `pass` at `batch`.
#[allow(clippy::too_many_arguments)]
pub fn lora_step(c: &Component, pass: Pass, precision: Precision, device: Device, batch: u64, finetune: FineTune, checkpointing: bool, opt: OptimizerKind) -> Result<TrainStep> {
    if !finetune.has_adapters() {
        return Err(Error::Config("diffusion training is estimated for LoRA (--finetune lora) only".into()));
    }
    if !matches!(pass, Pass::Denoise { .. }) {
        return Err(Error::Config(format!("{} is not a denoiser: LoRA training is of the unet or transformer", c.class())));
    }
    let opts = LowerOptions { training: true, precision, device, checkpointing, finetune, ..LowerOptions::default() };
    let mut b = Builder::new(opts);
    let out = c.lower_into(&mut b, pass)?;
    // `F.mse_loss(model_pred.float(), target.float(), reduction="mean")`
    let shape = b.shape(out).clone();
    let target = b.input(shape, b.dtype(out));
    let (ins, _) = b.autocast(CastPolicy::Fp32, &[out, target]);
    let ins: Vec<_> = ins.iter().map(|&v| b.cast(v, DType::F32)).collect();
    let loss = b.op("mse_loss", &ins, &[(Shape::new([]), DType::F32)], &ins, false, &[], GradRule::Alloc)[0];
    Ok(backward_and_step(b, loss, opt, batch))
}

/// The step from a scalar `loss` on: `loss.backward()` (which starts from it), the optimizer's
/// step over the trainable parameters (its state in their dtype), simulated at `batch`.
pub(super) fn backward_and_step(b: Builder, loss: ValueId, opt: OptimizerKind, batch: u64) -> TrainStep {
    step_from_loss(b, loss, opt, batch, false, 0)
}

/// [`backward_and_step`]; `grads_persist`: the `.grad`s kept (zeroed, not freed) from the step
/// before (`zero_grad(set_to_none=False)`), so backward accumulates into them; `first_group`:
/// the first trainable parameters in a param group of their own (kohya's text-encoder LoRA):
/// `torch.optim`'s step runs group by group, so a foreach step's temporaries are the larger
/// group's, not both groups'.
pub(super) fn step_from_loss(mut b: Builder, loss: ValueId, opt: OptimizerKind, batch: u64, grads_persist: bool, first_group: usize) -> TrainStep {
    let s = b.g.storage_of(loss) as usize;
    b.g.values[loss as usize].batched = false;
    b.g.storages[s].bytes = b.g.values[loss as usize].bytes();
    b.g.output = loss;
    let g = b.g;
    let shapes: Vec<&[u64]> = g.trainable_params().map(|p| g.value(p).shape.0.as_slice()).collect();
    let state_dtype = g.trainable_params().next().map(|p| g.value(p).dtype).unwrap_or_default();
    let (one, two) = shapes.split_at(first_group.min(shapes.len()));
    let (a, c) = (optimizer::cost(opt, OptimizerImpl::Foreach, one, state_dtype), optimizer::cost(opt, OptimizerImpl::Foreach, two, state_dtype));
    let cost = crate::memory::simulate::OptimizerCost { state: a.state.saturating_add(c.state), step_temporaries: a.step_temporaries.max(c.step_temporaries) };
    let plan = Plan::new(&g, true).with_accumulation(grads_persist);
    let r = plan.simulate(&g, batch.max(1), cost, false, None);
    TrainStep { peak: r.peak, params: g.param_numel(), trainable: g.trainable_numel(), param_bytes: g.param_bytes() }
}
