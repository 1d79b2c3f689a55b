//! Optimizer state and step temporaries, per PyTorch's `torch.optim` implementations.
//!
//! State (per parameter tensor of `n` elements in the state dtype): SGD none; momentum 1×;
//! Adam/AdamW 2× (+ amsgrad 1×); Adagrad 1×; RMSprop 1× (+ momentum, + centered); Adafactor
//! factored row/column statistics for matrices; 8-bit Adam 2 bytes per element plus block scales.
//! Steps keep a float32 scalar `step` tensor per parameter.
//!
//! Step temporaries (measured, see `shared/reference/README.md`): the per-parameter loop allocates
//! its temporaries for one parameter at a time (Adam: `sqrt` then `/`, so 2× the largest
//! parameter); `foreach` allocates one temporary per parameter for all of them at once (1.0× all
//! parameters); `fused` none.

use crate::config::{OptimizerImpl, OptimizerKind};
use super::simulate::OptimizerCost;
use crate::units::DType;

/// Parameters smaller than this keep 32-bit state in bitsandbytes (`min_8bit_size`).
const BNB_MIN_8BIT_SIZE: u64 = 4096;
/// bitsandbytes blockwise quantisation block size (one float32 absmax per block and state).
const BNB_BLOCK: u64 = 256;
const STEP_TENSOR_BYTES: u64 = 4;

/// `shapes`: each parameter tensor's shape; `dtype`: the dtype parameters (and state) are kept in.
pub fn cost(kind: OptimizerKind, imp: OptimizerImpl, shapes: &[&[u64]], dtype: DType) -> OptimizerCost {
    let s = dtype.size();
    let numel = |sh: &[u64]| sh.iter().fold(1u64, |a, &d| a.saturating_mul(d));
    let mut state = 0u64;
    let mut largest = 0u64;
    let mut total = 0u64;
    for sh in shapes {
        let n = numel(sh);
        let bytes = n.saturating_mul(s);
        largest = largest.max(bytes);
        total = total.saturating_add(bytes);
        let per = match kind {
            OptimizerKind::Sgd => 0,
            OptimizerKind::SgdMomentum => bytes,
            OptimizerKind::Adam | OptimizerKind::Adamw => bytes.saturating_mul(2).saturating_add(STEP_TENSOR_BYTES),
            OptimizerKind::AdamwAmsgrad => bytes.saturating_mul(3).saturating_add(STEP_TENSOR_BYTES),
            OptimizerKind::Adagrad => bytes.saturating_add(STEP_TENSOR_BYTES),
            OptimizerKind::Rmsprop => bytes.saturating_add(STEP_TENSOR_BYTES),
            OptimizerKind::RmspropCentered => bytes.saturating_mul(3).saturating_add(STEP_TENSOR_BYTES),
            OptimizerKind::Adafactor => {
                if sh.len() >= 2 {
                    let cols = sh[sh.len() - 1];
                    let rows = n / cols.max(1);
                    rows.saturating_add(cols).saturating_mul(s).saturating_add(STEP_TENSOR_BYTES)
                } else {
                    bytes.saturating_add(STEP_TENSOR_BYTES)
                }
            }
            // Paged state is allocated with `cudaMallocManaged` (bitsandbytes `functional.py`,
            // `get_paged`), outside PyTorch's allocator; modelled as resident on the GPU, which it
            // is unless memory runs short and the driver pages it out.
            OptimizerKind::Adam8bit | OptimizerKind::PagedAdamw8bit => {
                if n >= BNB_MIN_8BIT_SIZE {
                    n.saturating_mul(2).saturating_add(n.div_ceil(BNB_BLOCK).saturating_mul(8))
                } else {
                    n.saturating_mul(8)
                }
            }
        };
        state = state.saturating_add(per);
    }
    // temporaries alive at once, in units of one parameter's bytes
    let per_param_temps: u64 = match kind {
        OptimizerKind::Sgd | OptimizerKind::SgdMomentum | OptimizerKind::Adam8bit | OptimizerKind::PagedAdamw8bit => 0,
        OptimizerKind::Adam | OptimizerKind::Adamw | OptimizerKind::AdamwAmsgrad => 2,
        OptimizerKind::Adagrad | OptimizerKind::Rmsprop | OptimizerKind::RmspropCentered | OptimizerKind::Adafactor => 1,
    };
    let step_temporaries = match imp {
        OptimizerImpl::Fused => 0,
        OptimizerImpl::Forloop => largest.saturating_mul(per_param_temps),
        OptimizerImpl::Foreach if per_param_temps == 0 => 0,
        OptimizerImpl::Foreach => total,
    };
    OptimizerCost { state, step_temporaries }
}
