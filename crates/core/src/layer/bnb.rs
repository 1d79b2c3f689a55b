//! bitsandbytes storage of a quantised frozen base, **modelled** from its source (no
//! bitsandbytes run measured these figures; `crates/verify/scripts/gpu-check.sh` runs QLoRA
//! configurations on a GPU to confirm them).
//!
//! * 4-bit (`functional.py`, `quantize_4bit`, blocksize 64 as `nn.Linear4bit`/`Params4bit`
//!   default it): the packed weight is `uint8[(n + 1) // 2, 1]` (two values per byte), `absmax`
//!   is one fp32 per block of 64 and `code` the 16-entry fp32 NF4/FP4 table. With
//!   `compress_statistics` (`bnb_4bit_use_double_quant`): `offset = absmax.mean();
//!   qabsmax, state2 = quantize_blockwise(absmax - offset, blocksize=256)`, so one uint8 per
//!   64-block plus one fp32 absmax per 256 of those blocks and the fp32 offset.
//! * LLM.int8 (`nn/modules.py`, `Int8Params._quantize` → `int8_vectorwise_quant`): `CB` int8
//!   `[out, in]` and `SCB` fp32 `[out]`, one scale per row.
//!
//! Compute: `autograd/_functions.py`, `MatMul4Bit.forward` runs
//! `F.linear(A, F.dequantize_4bit(B, quant_state).to(A.dtype).t(), bias)`: a dequantised
//! weight in the compute dtype exists during the matmul, and again in backward for `grad_A`
//! (`torch.matmul(grad_output, F.dequantize_4bit(B, ctx.state).to(grad_output.dtype).t())`).
//! It saves only `B` (the packed parameter: no new memory). `MatMul8bitLt` quantises the input
//! row-wise to int8 (`CA`, one byte per element, plus fp32 `SCA` per row), multiplies into an
//! int32 result and dequantises it; its backward dequantises `CB` into a compute-dtype weight.

use crate::finetune::BaseFormat;
use crate::graph::Lin;

/// Elements per absmax block of the 4-bit formats (`Params4bit(blocksize=64)`).
pub const BLOCK_4BIT: u64 = 64;
/// Blocks of absmax per second-level block under double quantisation (`blocksize=256`).
pub const BLOCK_NESTED: u64 = 256;
/// The 4-bit code table: 16 fp32 values (`get_4bit_type`).
const CODE_4BIT_BYTES: u64 = 16 * 4;

/// Stored bytes of a weight of `numel` elements and `rows` output rows in `format`
/// (`None` for the unquantised formats).
pub fn stored_bytes(format: BaseFormat, numel: u64, rows: u64, double_quant: bool) -> Option<u64> {
    match format {
        BaseFormat::Nf4 | BaseFormat::Fp4 => {
            let packed = numel.div_ceil(2);
            let blocks = numel.div_ceil(BLOCK_4BIT);
            let absmax = if double_quant {
                blocks.saturating_add(blocks.div_ceil(BLOCK_NESTED).saturating_mul(4)).saturating_add(4)
            } else {
                blocks.saturating_mul(4)
            };
            Some(packed.saturating_add(absmax).saturating_add(CODE_4BIT_BYTES))
        }
        BaseFormat::Int8 => Some(numel.saturating_add(rows.saturating_mul(4))),
        BaseFormat::Bf16 | BaseFormat::Fp16 => None,
    }
}

/// Forward and backward workspace of one quantised matmul: `(forward, backward)`.
/// `weight_bytes`: the dequantised weight in the compute dtype; `x_numel` / `out_numel`: the
/// per-sample elements of the input and output.
pub fn matmul_scratch(format: BaseFormat, weight_bytes: u64, rows_per_sample: u64, x_numel: u64, out_numel: u64) -> (Lin, Lin) {
    let w = Lin { fixed: weight_bytes, per_sample: 0 };
    match format {
        BaseFormat::Nf4 | BaseFormat::Fp4 => (w, w),
        // CA int8 + SCA fp32 per row, and the int32 product before `int8_mm_dequant`
        BaseFormat::Int8 => {
            let per = x_numel.saturating_add(rows_per_sample.saturating_mul(4)).saturating_add(out_numel.saturating_mul(4));
            (Lin { fixed: 0, per_sample: per }, w)
        }
        BaseFormat::Bf16 | BaseFormat::Fp16 => (Lin::ZERO, Lin::ZERO),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn four_bit_layouts() {
        // a 4096×4096 weight: 8 MiB packed, 262,144 blocks of 64
        let n = 4096 * 4096;
        assert_eq!(stored_bytes(BaseFormat::Nf4, n, 4096, false), Some(n / 2 + 262_144 * 4 + 64));
        // double quant: 1 byte per block + fp32 per 256 blocks (1024) + offset
        assert_eq!(stored_bytes(BaseFormat::Nf4, n, 4096, true), Some(n / 2 + 262_144 + 1024 * 4 + 4 + 64));
        assert_eq!(stored_bytes(BaseFormat::Int8, n, 4096, false), Some(n + 4096 * 4));
        assert_eq!(stored_bytes(BaseFormat::Bf16, n, 4096, false), None);
    }
}
