//! A chunked, fused linear + cross-entropy loss, as Liger-Kernel runs it
//! (`liger_kernel/ops/fused_linear_cross_entropy.py`, `fused_linear_cross_entropy_forward`;
//! Unsloth's fused loss follows the same plan):
//!
//! ```python
//! inc_factor = triton.cdiv(V, H)
//! chunk_size = triton.next_power_of_2(triton.cdiv(BT, inc_factor))   # chunk logits ≈ BT × H
//! grad_weight = torch.zeros_like(weight) if weight.requires_grad else None
//! grad_input = torch.zeros_like(_input)
//! loss_1d = torch.zeros(BT, dtype=torch.float32)
//! for chunk: logits_chunk = _input_chunk @ weight.t()    # input dtype; CE grad written in place
//!            grad_input[chunk] = grad_logits_chunk @ weight
//!            grad_weight += grad_logits_chunk.t() @ _input_chunk
//! ```
//!
//! The gradients are computed in the forward and saved; the backward only scales them. No
//! `batch × seq × vocab` tensor exists. Liger's causal-LM wrapper first takes
//! `hidden_states[..., :-1, :].contiguous()` (a copy of the hidden states, modelled at full
//! length). The chunk is modelled as `BT / inc_factor` rows (the power-of-two rounding, at most
//! 2× on a term of `BT × H`, is left out to keep sizes linear in the batch).

use super::linear::Linear;
use super::LayerResult;
use crate::graph::{GradRule, ValueId};
use crate::lower::Builder;
use crate::units::{DType, Shape};

/// Lowers the head `l` and the loss on its input `x` (`[S, H]`) as one fused op; returns the loss.
pub fn fused_linear_cross_entropy(b: &mut Builder, l: &Linear, x: ValueId) -> LayerResult<ValueId> {
    super::expect_last(b.shape(x), l.in_features, "input features")?;
    let w = if l.tied_weight {
        b.tied_embedding.ok_or("`tied_weight` needs an embedding layer earlier in the model")?
    } else {
        b.param(Shape::new([l.out_features, l.in_features]))
    };
    let bias = l.bias.then(|| b.param(Shape::new([l.out_features])));
    let (shape, dt) = (b.shape(x).clone(), b.dtype(x));
    let rows = shape.numel() / shape.last().max(1);
    let (h, v) = (l.in_features.max(1), l.out_features);
    let shifted = b.op("contiguous", &[x], &[(shape.clone(), dt)], &[], false, &[], GradRule::Alloc)[0];
    let mut extras = vec![(shape, true, dt)];
    if b.value(w).requires_grad {
        extras.push((b.shape(w).clone(), false, b.dtype(w)));
    }
    if let Some(bias) = bias.filter(|&bias| b.value(bias).requires_grad) {
        extras.push((b.shape(bias).clone(), false, b.dtype(bias)));
    }
    let mut ins = vec![shifted, w];
    ins.extend(bias);
    let loss = b.op("fused_linear_cross_entropy", &ins, &[(Shape::new([]), DType::F32)], &[], false, &extras, GradRule::Alloc)[0];
    let inc = v.div_ceil(h).max(1);
    let chunk_logits = rows.saturating_mul(v).saturating_mul(dt.size()) / inc;
    let chunk_grad_input = rows.saturating_mul(h).saturating_mul(dt.size()) / inc;
    let loss_1d = rows.saturating_mul(4);
    b.last_fwd_scratch(crate::graph::Lin { fixed: 0, per_sample: chunk_logits.saturating_add(chunk_grad_input).saturating_add(loss_1d) });
    // a reduced loss is one scalar for the batch
    let s = b.g.storage_of(loss) as usize;
    b.g.values[loss as usize].batched = false;
    b.g.storages[s].bytes = b.g.values[loss as usize].bytes();
    Ok(loss)
}
