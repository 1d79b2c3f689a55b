//! One rank of a multi-GPU job: DDP, DeepSpeed ZeRO-1/2/3 (with CPU offload), FSDP2 and
//! Megatron-style tensor parallelism, by simulating the same step as one GPU and laying the
//! strategy's parameter, gradient and communication storages over it, op by op
//! ([`crate::memory::Overlay`]). Tensor parallelism instead changes the model each rank runs
//! (`tp.rs`), so its activations come from the simulation of the split layers.
//!
//! | file | strategy | source read |
//! |---|---|---|
//! | `ddp.rs` | DDP reducer buckets | `torch/nn/parallel/distributed.py`, `torch/csrc/distributed/c10d/reducer.cpp` |
//! | `zero.rs` | ZeRO-1/2/3, offload | `deepspeed/runtime/zero/stage_1_and_2.py`, `stage3.py`, `partitioned_param_coordinator.py` |
//! | `fsdp.rs` | FSDP2 `fully_shard` | `torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py`, `_fsdp_collectives.py` |
//! | `tp.rs` | tensor (+ data) parallel, sequence parallelism (lowered in `layer/seq_parallel.rs`) | Megatron-LM `core/tensor_parallel/layers.py`, `mappings.py` |
//!
//! With `gpus == 1` every strategy is today's single-GPU estimate (no wrapper).

mod ddp;
mod fsdp;
mod layout;
pub mod link;
pub mod tp;
mod zero;

use crate::config::{Precision, TrainConfig};
use crate::error::{Error, Result};
use crate::memory::{Estimate, OptimizerCost, Overlay, Prepared};
use crate::spec::ModelSpec;
pub use layout::Layout;
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
trait Rank: Overlay {
    fn optimizer(&self) -> OptimizerCost;
    fn model_states(&self) -> ModelStates;
    fn detail(&self, phase: crate::memory::simulate::Phase, op: Option<u32>) -> DistBreakdown;
    fn host_bytes(&self) -> u64;
    fn basis(&self) -> &'static str;
}

/// One rank's estimate and its distributed report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DistEstimate {
    #[serde(flatten)]
    pub estimate: Estimate,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub distributed: Option<DistReport>,
}

/// A model prepared for one rank of a job, reusable across batch sizes.
pub struct DistPrepared {
    prepared: Prepared,
    dist: DistConfig,
    rank: Option<Box<dyn Rank + Send + Sync>>,
    /// The setup as given, and as the ranks compute (FSDP's `param_dtype` as the precision).
    config: TrainConfig,
    compute: TrainConfig,
}

impl DistPrepared {
    pub fn new(spec: &ModelSpec, config: &TrainConfig, dist: &DistConfig) -> Result<DistPrepared> {
        dist.validate(config)?;
        if dist.is_single() {
            return Ok(DistPrepared { prepared: Prepared::new(spec, config)?, dist: *dist, rank: None, config: *config, compute: *config });
        }
        let t = dist.tp_degree();
        let spec = if t > 1 { tp::split(spec, t)? } else { spec.clone() };
        let mut cfg = *config;
        if dist.strategy == Strategy::Fsdp {
            if let Some(d) = dist.fsdp_param_dtype {
                // compute runs in param_dtype, as a model cast with `.to(dtype)` does
                cfg.precision = match d {
                    MpDtype::Bf16 => Precision::Bf16,
                    MpDtype::Fp16 => Precision::Fp16,
                    MpDtype::Fp32 => Precision::Fp32,
                };
            }
        }
        let sp = if dist.sequence_parallel { t } else { 1 };
        let prepared = Prepared::with_sequence_parallel(&spec, &cfg, sp)?;
        let rank = rank_of(&prepared, &cfg, config, dist);
        Ok(DistPrepared { prepared, dist: *dist, rank, config: *config, compute: cfg })
    }

    /// The same job on `gpus` GPUs. The resolved model is kept when the tensor-parallel degree
    /// stays (it depends on that and the precision only) and only the rank is new: a sweep over
    /// the number of GPUs resolves the model once, not once per size.
    pub fn on_gpus(self, spec: &ModelSpec, gpus: u64) -> Result<DistPrepared> {
        let dist = DistConfig { gpus, ..self.dist };
        if dist.is_single() || self.dist.is_single() || dist.tp_degree() != self.dist.tp_degree() {
            return DistPrepared::new(spec, &self.config, &dist);
        }
        dist.validate(&self.config)?;
        let rank = rank_of(&self.prepared, &self.compute, &self.config, &dist);
        Ok(DistPrepared { rank, dist, ..self })
    }

    pub fn estimate_at(&self, batch: u64) -> Result<DistEstimate> {
        let Some(rank) = &self.rank else {
            let estimate = self.prepared.estimate_at(batch)?;
            let detail = DistBreakdown { all_gather_buffers: self.gather_buffer(&estimate), ..DistBreakdown::default() };
            let distributed = (!self.dist.is_single()).then(|| self.report(detail, 0, self.tp_basis()));
            return Ok(DistEstimate { estimate, distributed });
        };
        let (estimate, op) = self.prepared.estimate_overlaid(batch, rank.optimizer(), rank.as_ref() as &dyn Overlay)?;
        let mut detail = rank.detail(estimate.peak_phase, op);
        detail.host_memory = rank.host_bytes();
        detail.all_gather_buffers = detail.all_gather_buffers.saturating_add(self.gather_buffer(&estimate));
        let basis = if self.dist.tp_degree() > 1 { format!("{}; {}", rank.basis(), self.tp_basis()) } else { rank.basis().to_string() };
        Ok(DistEstimate { distributed: Some(self.report(detail, rank.host_bytes(), &basis)), estimate })
    }

    /// Peak and device total at `batch`.
    pub fn peak_at(&self, batch: u64) -> (u64, u64) {
        match &self.rank {
            None => self.prepared.peak_at(batch),
            Some(r) => {
                let (p, d) = self.prepared.peak_overlaid(batch, r.optimizer(), r.as_ref() as &dyn Overlay);
                (p, d.total)
            }
        }
    }

    /// Largest batch (per GPU) whose device total fits `capacity`.
    pub fn max_batch(&self, capacity: u64) -> Option<u64> {
        if self.rank.is_none() {
            return self.prepared.max_batch(capacity);
        }
        crate::memory::largest_batch(|b| self.prepared.check_batch(b).is_ok() && self.peak_at(b).1 <= capacity)
    }

    fn tp_basis(&self) -> &'static str {
        if self.dist.sequence_parallel { tp::SP_BASIS } else { tp::BASIS }
    }

    /// Sequence parallelism's persistent all-gather buffer at the estimate's batch: the buffers
    /// that grow with the batch (a module's do not).
    fn gather_buffer(&self, e: &Estimate) -> u64 {
        e.buffer_bytes.saturating_sub(self.prepared.resolved.graph.buffer_bytes(0))
    }

    fn report(&self, breakdown: DistBreakdown, host_bytes: u64, basis: &str) -> DistReport {
        let d = &self.dist;
        DistReport {
            strategy: d.strategy,
            gpus: d.gpus,
            data_parallel: d.dp(),
            tensor_parallel: d.tp_degree(),
            gradient_as_bucket_view: d.gradient_as_bucket_view,
            reshard_after_forward: d.reshard_after_forward,
            fsdp_param_dtype: d.fsdp_param_dtype,
            fsdp_reduce_dtype: d.fsdp_reduce_dtype,
            offload: d.offload,
            sequence_parallel: d.sequence_parallel,
            breakdown,
            host_bytes,
            basis: basis.to_string(),
        }
    }
}

/// The rank's overlay of a job (`None`: one data-parallel rank, or not training). `compute` is the
/// setup the ranks compute in, `config` the one given.
fn rank_of(prepared: &Prepared, compute: &TrainConfig, config: &TrainConfig, dist: &DistConfig) -> Option<Box<dyn Rank + Send + Sync>> {
    let layout = Layout::new(&prepared.resolved);
    let n = dist.dp();
    let training = compute.mode == crate::config::Mode::Train;
    let accumulating = compute.grad_accum > 1;
    match dist.strategy {
        _ if n == 1 || !training => None,
        Strategy::Ddp | Strategy::Tp => Some(Box::new(ddp::Ddp::new(layout, *compute, dist.gradient_as_bucket_view, accumulating))),
        Strategy::Fsdp => {
            // the parameters' dtype before `fully_shard` when the policy casts them for compute
            let orig = dist.fsdp_param_dtype.map(|_| if matches!(config.precision, Precision::Bf16 | Precision::Fp16) { 2 } else { 4 });
            Some(Box::new(fsdp::Fsdp::new(layout, config, dist, n, accumulating, orig)))
        }
        Strategy::Zero1 | Strategy::Zero2 | Strategy::Zero3 => Some(Box::new(zero::Zero::new(layout, config, dist, n, accumulating))),
    }
}

/// Rank 0's model states under `dist` (`None` on one GPU, or for inference).
pub fn model_states(spec: &ModelSpec, config: &TrainConfig, dist: &DistConfig) -> Result<Option<ModelStates>> {
    Ok(DistPrepared::new(spec, config, dist)?.rank.map(|r| r.model_states()))
}

/// Rank 0's estimate (`gpus == 1`: today's estimate).
pub fn estimate(spec: &ModelSpec, config: &TrainConfig, dist: &DistConfig) -> Result<DistEstimate> {
    DistPrepared::new(spec, config, dist)?.estimate_at(config.batch)
}

/// Rank 0 of the same job on 1, 2, 4, … GPUs, one world size per step, keeping the resolved
/// model from size to size ([`DistPrepared::on_gpus`]). [`fewest_gpus`] walks it; the web app's
/// panel walks it too, yielding to the page between sizes.
pub struct GpuSteps<'a> {
    spec: &'a ModelSpec,
    config: TrainConfig,
    dist: DistConfig,
    next: u64,
    last: Option<DistPrepared>,
}

impl<'a> GpuSteps<'a> {
    /// Steps from `first` GPUs (a power of two) on.
    pub fn new(spec: &'a ModelSpec, config: &TrainConfig, dist: &DistConfig, first: u64) -> GpuSteps<'a> {
        GpuSteps { spec, config: *config, dist: *dist, next: first.max(1), last: None }
    }

    /// The next size's `(gpus, Ok((peak allocated, device total)))` at the config's batch, or its
    /// error (a size the setup refuses); `None` past [`MAX_GPUS`].
    pub fn step(&mut self) -> Option<(u64, Result<(u64, u64)>)> {
        let n = self.next;
        if n > MAX_GPUS {
            return None;
        }
        self.next = n.saturating_mul(2);
        let prepared = match self.last.take() {
            Some(prev) => prev.on_gpus(self.spec, n),
            None => DistPrepared::new(self.spec, &self.config, &DistConfig { gpus: n, ..self.dist }),
        };
        Some((n, prepared.map(|p| {
            let peak = p.peak_at(self.config.batch);
            self.last = Some(p);
            peak
        })))
    }

    /// The largest batch per GPU that fits `capacity` at the last size stepped to.
    pub fn max_batch(&self, capacity: u64) -> Option<u64> {
        self.last.as_ref()?.max_batch(capacity)
    }
}

/// The first size [`fewest_gpus`] tries: the tensor-parallel degree (one GPU without tensor
/// parallelism: a job that fits on one needs no sharding, whatever the strategy asked for).
pub fn first_gpus(dist: &DistConfig) -> u64 {
    dist.tp_degree().max(1)
}

/// The fewest GPUs (powers of two up to `max_gpus`, multiples of the TP degree) on which rank 0's
/// device total fits `capacity` at the config's batch per GPU, with the largest batch per GPU there.
pub fn fewest_gpus(spec: &ModelSpec, config: &TrainConfig, dist: &DistConfig, capacity: u64, max_gpus: u64) -> Result<Option<(u64, u64)>> {
    let mut steps = GpuSteps::new(spec, config, dist, first_gpus(dist));
    while let Some((n, peak)) = steps.step() {
        if n > max_gpus {
            break;
        }
        if peak?.1 <= capacity {
            return Ok(Some((n, steps.max_batch(capacity).unwrap_or(config.batch))));
        }
    }
    Ok(None)
}

/// Rank 0's `(gpus, peak allocated, device total)` for each world size in `gpus` (the app's
/// per-GPU-peak-against-N chart); sizes the setup refuses (TP not dividing) are left out.
pub fn sweep_gpus(spec: &ModelSpec, config: &TrainConfig, dist: &DistConfig, gpus: &[u64]) -> Vec<(u64, u64, u64)> {
    let mut p: Option<DistPrepared> = None;
    gpus.iter()
        .filter_map(|&n| {
            let next = match p.take() {
                Some(prev) => prev.on_gpus(spec, n),
                None => DistPrepared::new(spec, config, &DistConfig { gpus: n, ..*dist }),
            };
            let next = next.ok()?;
            let (peak, total) = next.peak_at(config.batch);
            p = Some(next);
            Some((n, peak, total))
        })
        .collect()
}
