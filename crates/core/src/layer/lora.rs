//! peft 0.21 LoRA on a linear, as `tuners/lora/layer.py` (`Linear.forward`) runs it:
//!
//! ```python
//! result = self.base_layer(x)                       # frozen: saves no input for its weight
//! torch_result_dtype = result.dtype
//! x = self._cast_input_dtype(x, lora_A.weight.dtype) # a copy when the base is half
//! result = result + lora_B(lora_A(dropout(x))) * scaling
//! result = result.to(torch_result_dtype)
//! ```
//!
//! `lora_A` is `r × in`, `lora_B` is `out × r`; `dropout` is `nn.Identity` at `lora_dropout = 0`
//! (`update_layer`), else `nn.Dropout` (its mask, and the dropped copy that `lora_A` saves).
//! `lora_A` saves its input, `lora_B` the r-wide intermediate. The adapters are fp32:
//! `get_peft_model(..., autocast_adapter_dtype=True)` (the default) upcasts fp16/bf16 adapter
//! weights to fp32 (`tuners_utils.py`, `_cast_adapter_dtype`), also on a quantised base.

use super::activation::{add, dropout};
use super::linear_op::linear;
use crate::finetune::{names, LinearRole};
use crate::graph::{GradRule, ValueId};
use crate::lower::Builder;
use crate::units::{DType, Shape};

/// The adapter dtype under peft's default `autocast_adapter_dtype=True`.
pub const ADAPTER_DTYPE: DType = DType::F32;

/// Whether the linear of `role` being lowered gets an adapter.
pub fn is_targeted(b: &Builder, role: Option<LinearRole>) -> bool {
    if b.kohya.is_some() {
        return super::lora_kohya::is_targeted(b);
    }
    let ft = &b.opts.finetune;
    ft.has_adapters() && role.is_some_and(|r| names::is_target(r, b.style, &ft.lora_targets))
}

/// Adds the adapter branch to `base_out` (the frozen linear's output of input `x`).
pub fn adapt(b: &mut Builder, x: ValueId, base_out: ValueId, in_features: u64, out_features: u64) -> ValueId {
    if b.kohya.is_some() {
        return super::lora_kohya::adapt(b, x, base_out, in_features, out_features);
    }
    let ft = b.opts.finetune;
    let r = u64::from(ft.lora_r);
    let a = b.adapter_param(Shape::new([r, in_features]), ADAPTER_DTYPE);
    let bw = b.adapter_param(Shape::new([out_features, r]), ADAPTER_DTYPE);
    let result_dtype = b.dtype(base_out);
    let xc = b.cast(x, ADAPTER_DTYPE);
    let xd = dropout(b, xc, ft.lora_dropout);
    let h = linear(b, xd, a, None);
    let y = linear(b, h, bw, None);
    // `* scaling`: a Python float, `mul.Scalar` saves nothing
    let (shape, dt) = (b.shape(y).clone(), b.dtype(y));
    let y = b.op("mul", &[y], &[(shape, dt)], &[], false, &[], GradRule::Alloc)[0];
    let sum = add(b, base_out, y);
    b.cast(sum, result_dtype)
}
