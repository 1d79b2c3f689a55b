//! kohya-ss/sd-scripts' LoRA (`networks/lora.py`, `LoRAModule`, commit 48d368fa), which
//! replaces the wrapped module's `forward` rather than the module:
//!
//! ```python
//! org_forwarded = self.org_forward(x)
//! lx = self.lora_down(x)            # nn.Linear(in, dim, bias=False), or nn.Conv2d for a conv
//! lx = self.lora_up(lx)             # nn.Linear(dim, out, bias=False), or a 1×1 nn.Conv2d
//! return org_forwarded + lx * self.multiplier * scale
//! ```
//!
//! No input cast (peft casts `x` to the adapter's dtype): `train_network.py` runs the forward
//! under `accelerator.autocast()`, whose lists cast `lora_down`'s input and weight. The network
//! is fp32 unless `--full_bf16` / `--full_fp16` (`network.to(weight_dtype)`). Which modules:
//! `LoRANetwork.create_modules` wraps every `Linear` and 1×1 `Conv2d` inside each
//! `Transformer2DModel` (`UNET_TARGET_REPLACE_MODULE`), the 3×3 convs of the resnets only with
//! `conv_dim` (`--network_args conv_dim=N`: then every Linear and conv of the `ResnetBlock2D`s,
//! `Downsample2D`s and `Upsample2D`s too); the denoiser marks those scopes with [`Kohya::in_scope`].

use super::activation::add;
use super::linear_op::linear;
use crate::graph::{GradRule, ValueId};
use crate::lower::{Builder, CastPolicy};
use crate::units::Shape;

pub use crate::finetune::kohya::Kohya;

/// Whether the module being lowered gets a kohya `LoRAModule`.
pub fn is_targeted(b: &Builder) -> bool {
    b.kohya.is_some_and(|k| k.in_scope)
}

/// `org_forwarded + lora_up(lora_down(x)) * multiplier * scale` on a linear's input `x`.
pub fn adapt(b: &mut Builder, x: ValueId, base_out: ValueId, in_features: u64, out_features: u64) -> ValueId {
    let (down, up) = weights(b, in_features, out_features);
    let h = linear(b, x, down, None);
    let y = linear(b, h, up, None);
    finish(b, base_out, y)
}

/// The same around an `nn.Conv2d` of kernel `k` (`base_out` its `[C_out, H', W']`): `lora_down`
/// a conv of the same kernel, stride and padding to `dim` channels, `lora_up` a 1×1 conv. A 1×1
/// conv takes `--network_dim`, a larger one `conv_dim` (`None`: not wrapped).
pub fn adapt_conv(b: &mut Builder, x: ValueId, base_out: ValueId, in_channels: u64, out_channels: u64, k: u64) -> Option<ValueId> {
    let kohya = b.kohya?;
    let dim = if k == 1 { b.opts.finetune.lora_r } else { kohya.conv_dim };
    if dim == 0 {
        return None;
    }
    let r = u64::from(dim);
    let down = b.adapter_param(Shape::new([r, in_channels.saturating_mul(k * k)]), kohya.adapter);
    let up = b.adapter_param(Shape::new([out_channels, r]), kohya.adapter);
    let mut mid = b.shape(base_out).clone();
    mid.0[0] = r;
    let h = conv(b, x, down, mid);
    let y = conv(b, h, up, b.shape(base_out).clone());
    Some(finish(b, base_out, y))
}

fn weights(b: &mut Builder, i: u64, o: u64) -> (ValueId, ValueId) {
    let k = b.kohya.expect("kohya lowering");
    let r = u64::from(b.opts.finetune.lora_r);
    let down = b.adapter_param(Shape::new([r, i]), k.adapter);
    let up = b.adapter_param(Shape::new([o, r]), k.adapter);
    (down, up)
}

/// `* self.multiplier * scale`: two `mul.Scalar`s (each saves nothing), then the residual add;
/// the local `lx` (`lora_up`'s output) lives until `forward` returns, so at the second `mul`
/// the base output, `lx` and both products are live (measured).
fn finish(b: &mut Builder, base_out: ValueId, lx: ValueId) -> ValueId {
    let (shape, dt) = (b.shape(lx).clone(), b.dtype(lx));
    let y = b.op("mul", &[lx], &[(shape.clone(), dt)], &[], false, &[], GradRule::Alloc)[0];
    let y = b.op("mul", &[y], &[(shape, dt)], &[], false, &[], GradRule::Alloc)[0];
    let out = add(b, base_out, y);
    b.hold(lx);
    out
}

/// A bias-free convolution of `x` by `w` into `shape`, saved as `F.linear` is
/// (`convolution_backward` needs the input for the weight's gradient, the weight for the input's).
fn conv(b: &mut Builder, x: ValueId, w: ValueId, shape: Shape) -> ValueId {
    let (ins, dt) = b.autocast(CastPolicy::Lower, &[x, w]);
    let mut saved = Vec::new();
    if b.value(ins[1]).requires_grad {
        saved.push(ins[0]);
    }
    if b.value(ins[0]).requires_grad {
        saved.push(ins[1]);
    }
    b.op("convolution", &ins, &[(shape, dt)], &saved, false, &[], GradRule::Alloc)[0]
}
