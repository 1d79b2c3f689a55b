//! From allocated bytes to what `nvidia-smi` shows: caching-allocator rounding and reserve,
//! the CUDA context and the cuBLAS workspace. Approximate, and always shown apart from the peak.

use serde::{Deserialize, Serialize};

/// CUDA context with PyTorch's kernels loaded: 300–600 MB depending on GPU, driver and CUDA
/// version (lazy module loading, CUDA ≥ 11.7, keeps it near the low end). Midpoint used.
pub const CUDA_CONTEXT_BYTES: u64 = 450 * 1024 * 1024;
/// cuBLAS workspace PyTorch allocates per handle and stream: `4096 KiB × 2 + 16 KiB × 8`
/// (`CUBLAS_WORKSPACE_CONFIG` default, `aten/src/ATen/cuda/CublasHandlePool.cpp`); Hopper uses 32 MiB.
pub const CUBLAS_WORKSPACE_BYTES: u64 = 4096 * 1024 * 2 + 16 * 1024 * 8;

/// The device total and its parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct DeviceTotal {
    /// The allocated peak with each tensor rounded up to 512 bytes.
    pub allocated_rounded: u64,
    /// Reserved by the caching allocator at the peak (2 MiB granules for large blocks).
    pub reserved: u64,
    pub cuda_context: u64,
    pub cublas_workspace: u64,
    /// `reserved + cuda_context + cublas_workspace`: what `nvidia-smi` would show.
    pub total: u64,
}

impl DeviceTotal {
    pub fn new(allocated_rounded: u64, reserved: u64) -> DeviceTotal {
        let reserved = reserved.max(allocated_rounded);
        DeviceTotal {
            allocated_rounded,
            reserved,
            cuda_context: CUDA_CONTEXT_BYTES,
            cublas_workspace: CUBLAS_WORKSPACE_BYTES,
            total: reserved.saturating_add(CUDA_CONTEXT_BYTES).saturating_add(CUBLAS_WORKSPACE_BYTES),
        }
    }
}

/// A GPU people train on, with its memory as `nvidia-smi` reports the total.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Gpu {
    pub id: &'static str,
    pub name: &'static str,
    pub bytes: u64,
}

const MIB: u64 = 1 << 20;

/// Common cards, smallest first. Each capacity is the total the driver reports, as
/// `nvidia-smi --query-gpu=memory.total` prints it in MiB (Linux driver, ECC at its default),
/// not the nominal "24 GB" of the box: the CUDA allocator can never use more than this.
/// Read from `nvidia-smi` output people posted, e.g. RTX 3090 24576 MiB
/// (noonghunna/club-3090#1127), RTX 4090 24564 MiB (RLinf/RLinf#255), L40S 46068 MiB
/// (akash-network/provider-configs#99), H200 143771 MiB (issue 16's reading); the other
/// figures are the totals commonly printed for those boards and were not each re-checked here.
pub const GPUS: &[Gpu] = &[
    Gpu { id: "rtx-3080", name: "GeForce RTX 3080 10 GB", bytes: 10240 * MIB },
    Gpu { id: "gtx-1080-ti", name: "GeForce GTX 1080 Ti 11 GB", bytes: 11264 * MIB },
    Gpu { id: "rtx-2080-ti", name: "GeForce RTX 2080 Ti 11 GB", bytes: 11264 * MIB },
    Gpu { id: "rtx-3060", name: "GeForce RTX 3060 12 GB", bytes: 12288 * MIB },
    Gpu { id: "rtx-4070", name: "GeForce RTX 4070 12 GB", bytes: 12282 * MIB },
    Gpu { id: "t4", name: "Tesla T4 16 GB", bytes: 15360 * MIB },
    Gpu { id: "v100-16gb", name: "Tesla V100 16 GB", bytes: 16160 * MIB },
    Gpu { id: "rtx-4060-ti-16gb", name: "GeForce RTX 4060 Ti 16 GB", bytes: 16380 * MIB },
    Gpu { id: "rtx-4080", name: "GeForce RTX 4080 16 GB", bytes: 16376 * MIB },
    Gpu { id: "rtx-3090", name: "GeForce RTX 3090 24 GB", bytes: 24576 * MIB },
    Gpu { id: "rtx-4090", name: "GeForce RTX 4090 24 GB", bytes: 24564 * MIB },
    Gpu { id: "a10", name: "A10 24 GB", bytes: 23028 * MIB },
    Gpu { id: "l4", name: "L4 24 GB", bytes: 23034 * MIB },
    Gpu { id: "rtx-5090", name: "GeForce RTX 5090 32 GB", bytes: 32607 * MIB },
    Gpu { id: "v100-32gb", name: "Tesla V100 32 GB", bytes: 32510 * MIB },
    Gpu { id: "a100-40gb", name: "A100 40 GB", bytes: 40960 * MIB },
    Gpu { id: "l40s", name: "L40S 48 GB", bytes: 46068 * MIB },
    Gpu { id: "a100-80gb", name: "A100 80 GB", bytes: 81920 * MIB },
    Gpu { id: "h100-80gb", name: "H100 80 GB", bytes: 81559 * MIB },
    Gpu { id: "h200", name: "H200 141 GB", bytes: 143771 * MIB },
];

pub fn gpu(id: &str) -> Option<&'static Gpu> {
    GPUS.iter().find(|g| g.id.eq_ignore_ascii_case(id))
}

/// Rounding of the CUDA caching allocator: 512-byte blocks; large blocks in 2 MiB granules.
pub fn round512(b: u64) -> u64 {
    b.div_ceil(512).saturating_mul(512)
}

pub fn round_reserved(b: u64) -> u64 {
    const MIB: u64 = 1 << 20;
    if b <= MIB {
        round512(b)
    } else {
        b.div_ceil(2 * MIB).saturating_mul(2 * MIB)
    }
}
