//! Attention over consecutive spans of the sequence (`multihead_attention`'s `windows`).

use super::attention::MultiheadAttention;
use super::LayerResult;
use crate::graph::{GradRule, ValueId};
use crate::lower::Builder;
use crate::units::Shape;

impl MultiheadAttention {
    /// `windows`: Qwen2.5-VL's vision attention (`Qwen2_5_VLVisionAttention.forward` without
    /// flash attention, transformers 5.24) splits Q, K and V along the sequence by `cu_seqlens`
    /// (`torch.split(..., lengths.tolist(), dim=2)`: views), attends each span in turn, keeps
    /// each `[1, w, H, hd]` output (the probabilities are dropped: `attention_interface(...)[0]`)
    /// and `torch.cat`s them into a new `[S, H·hd]`.
    pub(super) fn attend_windows(&self, b: &mut Builder, (q, k, v): (ValueId, ValueId, ValueId), seq: u64, (h, kvh, hd): (u64, u64, u64), sinks: Option<ValueId>, spans: &[u64]) -> LayerResult<(ValueId, Option<ValueId>)> {
        let total = spans.iter().try_fold(0u64, |t, &w| if w == 0 { None } else { t.checked_add(w) });
        if total != Some(seq) {
            return Err(format!("`windows` must be positive and sum to the sequence ({seq} tokens), got {} spans summing to {}", spans.len(), total.map_or("more than 2^64 or with a 0".into(), |t| t.to_string())));
        }
        if self.causal || b.opts.generation.is_some() {
            return Err("`windows` is for a non-causal encoder (a vision tower), not a causal or generating layer".into());
        }
        let mut outs = Vec::with_capacity(spans.len());
        for &w in spans {
            let span = |b: &mut Builder, x: ValueId, heads: u64| b.view(x, Shape::new([heads, w, hd]));
            let parts = (span(b, q, h), span(b, k, kvh), span(b, v, kvh));
            outs.push(self.attend(b, parts, w, (h, kvh, hd), sinks)?.0);
        }
        let dt = b.dtype(outs[0]);
        let cat = b.op("cat", &outs, &[(Shape::new([seq, h.saturating_mul(hd)]), dt)], &[], false, &[], GradRule::Alloc)[0];
        Ok((cat, None))
    }
}
