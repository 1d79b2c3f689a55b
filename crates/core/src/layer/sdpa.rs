//! Which kernel `F.scaled_dot_product_attention` runs, which decides what it keeps for backward.

use crate::config::Device;
use crate::units::DType;

/// The kernel `F.scaled_dot_product_attention` dispatches to (`_fused_sdp_choice`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SdpaBackend {
    /// Saves Q, K, V, the output and a `[H, S]` fp32 log-sum-exp.
    Flash,
    /// CUDA's memory-efficient kernel: as flash, the log-sum-exp padded to 32 rows.
    MemEfficient,
    /// The composite `_scaled_dot_product_attention_math`: matmul, softmax, dropout, matmul,
    /// each saving what eager attention saves (the `S × S` weights and the dropout mask).
    Math,
}

/// Which SDPA kernel PyTorch 2.15 picks for `dtype`, an explicit `attn_mask` and `dropout_p`
/// (Hugging Face passes `dropout=0.0` outside training).
///
/// CPU (`aten/src/ATen/native/transformers/sdp_utils_cpp.cpp`, `select_sdp_backend_cpp`): the
/// order is flash, then math; `use_flash_attention_cpp` accepts fp32, fp64, bf16 and fp16 and a
/// broadcastable mask, but `check_for_dropout` refuses any `dropout_p > 0`, so attention dropout
/// in training falls back to the math kernel (BERT-base's 0.1 does).
///
/// CUDA (`aten/src/ATen/native/transformers/cuda/sdp_utils.cpp`, `select_sdp_backend`): flash,
/// then memory-efficient, then math; flash needs fp16/bf16 and no `attn_mask` and supports
/// dropout and head sizes up to 256 (`check_head_dim_size_flash`), the memory-efficient kernel
/// takes fp32, masks and larger heads. Alignments either kernel pads or refuses are not modelled.
pub fn sdpa_backend(device: Device, dtype: DType, head_dim: u64, has_mask: bool, dropout: f64) -> SdpaBackend {
    match device {
        Device::Cpu if dropout > 0.0 => SdpaBackend::Math,
        Device::Cpu => SdpaBackend::Flash,
        Device::Cuda if matches!(dtype, DType::F16 | DType::Bf16) && !has_mask && head_dim <= 256 => SdpaBackend::Flash,
        Device::Cuda => SdpaBackend::MemEfficient,
    }
}
