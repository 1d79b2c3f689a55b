//! `F.linear`, the op under `nn.Linear`, LoRA's adapters and the sequence-parallel split linears:
//! one file below all three, so none of them imports another to reach it.

use crate::graph::{GradRule, ValueId};
use crate::lower::{Builder, CastPolicy};

/// `F.linear`: output in the compute dtype. Autograd saves the (autocast) input only when the
/// weight needs a gradient, and the weight only when the input does (`derivatives.yaml`, `mm`:
/// `self: mm_mat1_backward(grad, mat2, …)`, `mat2: mm_mat2_backward(grad, self, …)`; the
/// generated code saves each tensor only for the gradients that are required). A quantised
/// weight is dequantised into a compute-dtype temporary for the matmul (`layer/bnb.rs`).
pub fn linear(b: &mut Builder, x: ValueId, w: ValueId, bias: Option<ValueId>) -> ValueId {
    let quant = b.quant_format_of(w);
    let mut ins = vec![x, w];
    ins.extend(bias);
    let in_dtype = b.dtype(x);
    // `Linear4bit.forward` (bitsandbytes `nn/modules.py`): `x.to(compute_dtype)`, the matmul,
    // then `.to(inp_dtype)`; LLM.int8 computes in the input's dtype. The packed weight is never cast.
    let four_bit = quant.is_some_and(|f| matches!(f, crate::finetune::BaseFormat::Nf4 | crate::finetune::BaseFormat::Fp4));
    let (ins, dt) = if quant.is_some() {
        let dt = if four_bit { b.compute_dtype() } else { in_dtype };
        let mut ins = ins;
        ins[0] = b.cast(x, dt);
        (ins, dt)
    } else {
        b.autocast(CastPolicy::Lower, &ins)
    };
    let out_shape = b.shape(x).with_last(b.shape(w).0[0]);
    let mut saved = Vec::new();
    if b.value(ins[1]).requires_grad {
        saved.push(ins[0]);
    }
    if b.value(ins[0]).requires_grad {
        saved.push(ins[1]);
    }
    let (x_numel, out_numel) = (b.shape(x).numel(), out_shape.numel());
    let rows = x_numel / b.shape(x).last().max(1);
    let out = b.op("linear", &ins, &[(out_shape, dt)], &saved, false, &[], GradRule::Alloc)[0];
    if let Some(format) = quant {
        let weight = b.shape(w).numel().saturating_mul(dt.size());
        let (fwd, bwd) = super::bnb::matmul_scratch(format, weight, rows, x_numel, out_numel);
        b.last_fwd_scratch(fwd);
        b.last_bwd_scratch(bwd);
        return b.cast(out, in_dtype);
    }
    out
}
