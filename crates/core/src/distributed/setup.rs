//! A multi-GPU job's settings ([`DistConfig`]: strategy, offload, dtypes) and what every
//! strategy's rank reports ([`DistReport`], [`ModelStates`], the `Rank` trait): below
//! `distributed/mod.rs` and the strategy files (`ddp.rs`, `zero.rs`, `fsdp.rs`, `link.rs`), which
//! all read them.

use super::tp;
use crate::config::{Precision, TrainConfig};
use crate::error::{Error, Result};
use crate::memory::{OptimizerCost, Overlay};
use serde::{Deserialize, Serialize};

/// How the job is split across GPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Strategy {
    #[default]
    Ddp,
    Zero1,
    Zero2,
    Zero3,
    Fsdp,
    Tp,
}

/// What DeepSpeed moves to the CPU (`offload_optimizer` / `offload_param`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Offload {
    #[default]
    None,
    Optimizer,
    /// Parameters and optimizer (ZeRO-3 only: `offload_param` needs `offload_optimizer`).
    Params,
}

/// A 16- or 32-bit float dtype of FSDP's `MixedPrecisionPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MpDtype {
    Fp32,
    Bf16,
    Fp16,
}

impl MpDtype {
    pub fn size(self) -> u64 {
        match self {
            MpDtype::Fp32 => 4,
            MpDtype::Bf16 | MpDtype::Fp16 => 2,
        }
    }
}

crate::config::names!(Strategy { Ddp = "ddp", Zero1 = "zero1", Zero2 = "zero2", Zero3 = "zero3", Fsdp = "fsdp", Tp = "tp" });
crate::config::names!(Offload { None = "none", Optimizer = "optimizer", Params = "params" });
crate::config::names!(MpDtype { Fp32 = "fp32", Bf16 = "bf16", Fp16 = "fp16" });

/// The multi-GPU settings (the CLI's `--gpus`, `--strategy`, … and share links).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct DistConfig {
    /// All GPUs of the job (data-parallel × tensor-parallel).
    pub gpus: u64,
    pub strategy: Strategy,
    /// Tensor-parallel degree (1: none). `strategy = tp` with `tp = 1` means `tp = gpus`.
    pub tp: u64,
    /// DDP: `.grad` are views into the reducer's buckets.
    pub gradient_as_bucket_view: bool,
    /// FSDP2: free each unit's gathered parameters after its forward.
    pub reshard_after_forward: bool,
    /// FSDP2 `MixedPrecisionPolicy(param_dtype)`; `None`: the parameters' dtype.
    pub fsdp_param_dtype: Option<MpDtype>,
    /// FSDP2 `MixedPrecisionPolicy(reduce_dtype)`; `None`: `param_dtype`.
    pub fsdp_reduce_dtype: Option<MpDtype>,
    pub offload: Offload,
    /// Megatron's `--sequence-parallel` with tensor parallelism (`tp.rs`): norms, dropouts and
    /// residuals keep `S/t` tokens per rank. Left out of JSON when off, as saved before it.
    #[serde(skip_serializing_if = "crate::serde_util::is_false")]
    pub sequence_parallel: bool,
}

impl Default for DistConfig {
    fn default() -> Self {
        DistConfig {
            gpus: 1,
            strategy: Strategy::Ddp,
            tp: 1,
            gradient_as_bucket_view: false,
            reshard_after_forward: true,
            fsdp_param_dtype: None,
            fsdp_reduce_dtype: None,
            offload: Offload::None,
            sequence_parallel: false,
        }
    }
}

/// The largest job the core simulates.
pub const MAX_GPUS: u64 = 1 << 20;

impl DistConfig {
    /// Whether this is the default (one GPU): links and saved state leave it out.
    pub fn is_default(&self) -> bool {
        *self == DistConfig::default()
    }

    pub fn is_single(&self) -> bool {
        self.gpus <= 1
    }

    /// Tensor-parallel degree in effect.
    pub fn tp_degree(&self) -> u64 {
        if self.strategy == Strategy::Tp && self.tp <= 1 {
            self.gpus.max(1)
        } else {
            self.tp.max(1)
        }
    }

    /// Data-parallel ranks (`gpus / tp`).
    pub fn dp(&self) -> u64 {
        (self.gpus / self.tp_degree()).max(1)
    }

    pub fn validate(&self, config: &TrainConfig) -> Result<()> {
        let bad = |m: String| Err(Error::Config(m));
        if self.gpus == 0 || self.gpus > MAX_GPUS {
            return bad(format!("--gpus {} must be between 1 and {MAX_GPUS}", self.gpus));
        }
        let t = self.tp_degree();
        if !self.gpus.is_multiple_of(t) {
            return bad(format!("--tp {t} must divide --gpus {}", self.gpus));
        }
        if self.offload != Offload::None && !matches!(self.strategy, Strategy::Zero1 | Strategy::Zero2 | Strategy::Zero3) {
            return bad(format!("--offload {} is DeepSpeed's; it needs --strategy zero1, zero2 or zero3", self.offload.name()));
        }
        if self.offload == Offload::Params && self.strategy != Strategy::Zero3 {
            return bad("--offload params needs --strategy zero3 (DeepSpeed offloads parameters only in stage 3)".into());
        }
        if (self.fsdp_param_dtype.is_some() || self.fsdp_reduce_dtype.is_some()) && self.strategy != Strategy::Fsdp {
            return bad("--fsdp-param-dtype and --fsdp-reduce-dtype need --strategy fsdp".into());
        }
        if self.fsdp_param_dtype.is_some() && matches!(config.precision, Precision::AmpFp16 | Precision::AmpBf16) {
            return bad(format!(
                "--fsdp-param-dtype is FSDP's own mixed precision (MixedPrecisionPolicy); with it the model needs no autocast: use --precision fp32 (or the model's bf16/fp16) instead of {}",
                config.precision.name()
            ));
        }
        if config.mode != crate::config::Mode::Train && !self.is_single() && self.strategy != Strategy::Tp {
            return bad(format!("--strategy {} simulates training; for inference use --strategy tp", self.strategy.name()));
        }
        if self.sequence_parallel {
            tp::check_sequence_parallel(t, config).map_err(Error::Config)?;
        }
        Ok(())
    }
}

/// Rank 0's memory under a strategy, beside the [`Estimate`] (whose figures are rank 0's).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DistReport {
    pub strategy: Strategy,
    pub gpus: u64,
    pub data_parallel: u64,
    pub tensor_parallel: u64,
    pub gradient_as_bucket_view: bool,
    pub reshard_after_forward: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fsdp_param_dtype: Option<MpDtype>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fsdp_reduce_dtype: Option<MpDtype>,
    pub offload: Offload,
    /// `--sequence-parallel` (with tensor parallelism); absent in reports written before it.
    #[serde(default)]
    pub sequence_parallel: bool,
    /// The peak's strategy-specific parts (also inside the estimate's categories).
    pub breakdown: DistBreakdown,
    /// CPU memory the strategy keeps per rank (offloaded states), not in the GPU peak.
    pub host_bytes: u64,
    /// What the figures rest on: measured against which records, or modelled from which source.
    pub basis: String,
}

/// Parts of the peak by what the strategy allocates. Parameters are
/// `sharded_parameters + unsharded_parameters`; the buffers sit in temporaries or gradients
/// (sequence parallelism's persistent gather buffer in buffers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct DistBreakdown {
    pub sharded_parameters: u64,
    pub unsharded_parameters: u64,
    pub sharded_gradients: u64,
    pub all_gather_buffers: u64,
    pub reduce_scatter_buffers: u64,
    pub gradient_buckets: u64,
    pub host_memory: u64,
}

/// Rank 0's model states (bytes): what DeepSpeed's `estimate_zero*_model_states_mem_needs`
/// count — parameters, gradients and the optimizer's state (fp32 master copies and the step's fp32
/// gradient partition included) at the optimizer step — without activations or buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ModelStates {
    pub parameters: u64,
    pub gradients: u64,
    pub optimizer: u64,
    /// Kept in host memory (offload).
    pub host: u64,
}

impl ModelStates {
    pub fn gpu(&self) -> u64 {
        self.parameters.saturating_add(self.gradients).saturating_add(self.optimizer)
    }
}

/// A strategy's view of the step: what it lays over each sample and what it reports.
pub(crate) trait Rank: Overlay {
    fn optimizer(&self) -> OptimizerCost;
    fn model_states(&self) -> ModelStates;
    fn detail(&self, phase: crate::memory::simulate::Phase, op: Option<u32>) -> DistBreakdown;
    fn host_bytes(&self) -> u64;
    fn basis(&self) -> &'static str;
}
