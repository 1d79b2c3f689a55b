//! The fixed state a recurrent mixer (Mamba, Mamba-2, gated DeltaNet) caches per sequence in
//! `model.generate()`, as transformers 5.24 holds it (`cache_utils.py`, `LinearAttentionLayer`):
//!
//! * the conv state: `torch.zeros((*conv_states.shape[:-1], conv_kernel_size))` at the layer's
//!   first update, `[channels, kernel]` in the compute dtype, then `copy_` in place every step;
//! * the recurrent state: `torch.zeros_like(final_state)` at the first update (the scan's fp32
//!   state: `[intermediate, state]` for Mamba, `[heads, head_dim, state]` for Mamba-2,
//!   `[v_heads, k_head_dim, v_head_dim]` for DeltaNet), then `copy_` in place.
//!
//! Neither grows with the sequence: the prefill allocates both (the cache's new memory), every
//! decode step finds them resident. The same holds for every cache kind (dynamic, static, paged:
//! vLLM's `MambaSpec` is one fixed page per sequence).

use crate::generation::GenStep;
use crate::graph::{GradRule, StorageClass};
use crate::lower::Builder;
use crate::units::{DType, Shape};

/// A recurrent layer's cached state per sequence: its conv state (channels × kernel, compute
/// dtype) and its recurrent state (fp32 elements).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateSize {
    pub conv_channels: u64,
    pub conv_kernel: u64,
    pub recurrent: u64,
}

impl StateSize {
    /// Bytes per sequence with the conv state in `conv_bytes`-byte elements and the recurrent
    /// state in `state_bytes`-byte ones.
    pub fn bytes(&self, conv_bytes: u64, state_bytes: u64) -> u64 {
        self.conv_channels
            .saturating_mul(self.conv_kernel)
            .saturating_mul(conv_bytes)
            .saturating_add(self.recurrent.saturating_mul(state_bytes))
    }
}

/// Adds the layer's two cached state tensors to a forward of `generate()`: allocated by the
/// prefill (`zeros`), resident in a decode step (no allocation). Nothing outside generation.
pub fn cache_states(b: &mut Builder, size: StateSize) {
    let Some(step) = b.opts.generation else { return };
    let compute = b.compute_dtype();
    state(b, step, Shape::new([size.conv_channels, size.conv_kernel]), compute);
    state(b, step, Shape::new([size.recurrent]), DType::F32);
}

fn state(b: &mut Builder, step: GenStep, shape: Shape, dt: DType) {
    let class = if step.is_prefill() { StorageClass::KvNew } else { StorageClass::KvResident };
    let out = b.op("zeros", &[], &[(shape, dt)], &[], false, &[], GradRule::Alloc)[0];
    b.set_batched(out);
    let s = b.g.storage_of(out) as usize;
    b.g.storages[s].class = class;
    if class == StorageClass::KvResident {
        // it exists before this forward: no op allocates it
        if let Some(op) = b.g.ops.last_mut() {
            op.allocs.clear();
        }
    }
    // the cache object holds it to the end of the forward and beyond
    b.hold(out);
}
