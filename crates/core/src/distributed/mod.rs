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
mod setup;
pub mod link;
pub mod tp;
mod zero;

use crate::config::{Precision, TrainConfig};
use crate::error::Result;
use crate::memory::peak::PeakSummary;
use crate::memory::envelope::Envelope;
use crate::memory::{Estimate, Overlay, Prepared};
use crate::spec::ModelSpec;
pub use layout::Layout;
pub use setup::{DistBreakdown, DistConfig, DistReport, ModelStates, MpDtype, Offload, Strategy, MAX_GPUS};
use setup::Rank;
use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

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
    /// The rank's peaks at every batch ([`Prepared::overlaid_peaks`]), built when a second
    /// batch is asked for: a largest-batch search or a batch sweep then simulates twice, not
    /// once per batch, and a world size the sizing steps to once still costs one simulation.
    peaks: OnceLock<Option<Envelope>>,
    /// Whether a peak was asked for already.
    asked: AtomicBool,
}

impl DistPrepared {
    pub fn new(spec: &ModelSpec, config: &TrainConfig, dist: &DistConfig) -> Result<DistPrepared> {
        dist.validate(config)?;
        if dist.is_single() {
            return Ok(DistPrepared::of(Prepared::new(spec, config)?, *dist, None, *config, *config));
        }
        let t = dist.tp_degree();
        let spec = if t > 1 { tp::split(spec, t)? } else { spec.clone() };
        let cfg = compute_config(config, dist);
        let sp = if dist.sequence_parallel { t } else { 1 };
        let prepared = Prepared::with_sequence_parallel(&spec, &cfg, sp)?;
        let rank = rank_of(&prepared, &cfg, config, dist);
        Ok(DistPrepared::of(prepared, *dist, rank, *config, cfg))
    }

    fn of(prepared: Prepared, dist: DistConfig, rank: Option<Box<dyn Rank + Send + Sync>>, config: TrainConfig, compute: TrainConfig) -> DistPrepared {
        DistPrepared { prepared, dist, rank, config, compute, peaks: OnceLock::new(), asked: AtomicBool::new(false) }
    }

    /// Whether `batch` is valid for the job (`Prepared::check_batch`).
    pub fn check_batch(&self, batch: u64) -> Result<()> {
        self.prepared.check_batch(batch)
    }

    /// The same job on `gpus` GPUs. The resolved model is kept when the tensor-parallel degree
    /// stays (it depends on that and the precision only) and only the rank is new: a sweep over
    /// the number of GPUs resolves the model once, not once per size.
    /// From one GPU the model is kept too when the ranks compute in the setup as given (no FSDP
    /// `param_dtype`) without tensor parallelism: then one GPU's model is theirs.
    pub fn on_gpus(self, spec: &ModelSpec, gpus: u64) -> Result<DistPrepared> {
        let dist = DistConfig { gpus, ..self.dist };
        let compute = compute_config(&self.config, &dist);
        let same_model = if self.dist.is_single() { dist.tp_degree() == 1 && compute == self.compute } else { dist.tp_degree() == self.dist.tp_degree() };
        if dist.is_single() || !same_model {
            return DistPrepared::new(spec, &self.config, &dist);
        }
        dist.validate(&self.config)?;
        let rank = rank_of(&self.prepared, &compute, &self.config, &dist);
        Ok(DistPrepared::of(self.prepared, dist, rank, self.config, compute))
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
                let (p, d) = match self.peaks(r.as_ref()) {
                    Some(peaks) => self.prepared.peak_in(peaks, batch),
                    None => self.prepared.peak_overlaid(batch, r.optimizer(), r.as_ref() as &dyn Overlay),
                };
                (p, d.total)
            }
        }
    }

    /// The rank's peaks at every batch from the second peak asked for on (see `peaks`).
    fn peaks(&self, rank: &(dyn Rank + Send + Sync)) -> Option<&Envelope> {
        if let Some(peaks) = self.peaks.get() {
            return peaks.as_ref();
        }
        if !self.asked.swap(true, Ordering::Relaxed) {
            return None;
        }
        self.peaks.get_or_init(|| self.prepared.overlaid_peaks(rank.optimizer(), rank as &dyn Overlay)).as_ref()
    }

    /// Rank 0's peak at `batch` and where it is: [`DistPrepared::peak_at`]'s figures from the
    /// same simulation, with the estimate's phase, `peak_at` and breakdown there (the batch
    /// unchecked, as `peak_at` leaves it).
    pub fn peak_summary(&self, batch: u64) -> PeakSummary {
        match &self.rank {
            None => self.prepared.summary_at(batch),
            Some(r) => self.prepared.summary_overlaid(batch, r.optimizer(), r.as_ref() as &dyn Overlay),
        }
    }

    /// [`DistPrepared::peak_summary`] of a batch checked as [`DistPrepared::estimate_at`] checks it.
    pub fn summary_at(&self, batch: u64) -> Result<PeakSummary> {
        self.check_batch(batch)?;
        Ok(self.peak_summary(batch))
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

/// The setup the ranks compute in: FSDP's `param_dtype` as the precision, as a model cast with
/// `.to(dtype)` computes; else the setup as given.
fn compute_config(config: &TrainConfig, dist: &DistConfig) -> TrainConfig {
    let mut cfg = *config;
    if let (Strategy::Fsdp, Some(d)) = (dist.strategy, dist.fsdp_param_dtype) {
        cfg.precision = match d {
            MpDtype::Bf16 => Precision::Bf16,
            MpDtype::Fp16 => Precision::Fp16,
            MpDtype::Fp32 => Precision::Fp32,
        };
    }
    cfg
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::OptimizerKind;
    use crate::finetune::Method;

    /// A rank's peaks from its envelope (from the second batch asked for) are the direct
    /// simulation's at every batch, for each strategy and setting that changes its overlay; and
    /// the envelope is built for them, so a batch search or sweep does not simulate each batch.
    #[test]
    fn a_ranks_peaks_from_its_envelope_are_the_simulations() {
        let gpt2 = crate::presets::build("gpt2").unwrap();
        let qwen = crate::import::preset("qwen2.5-0.5b").unwrap();
        let train = TrainConfig { batch: 2, seq_len: Some(128), precision: Precision::Bf16, ..Default::default() };
        let accumulating = TrainConfig { grad_accum: 4, batch: 8, ..train };
        let mut lora = TrainConfig { optimizer: OptimizerKind::Sgd, checkpointing: true, ..train };
        (lora.finetune.method, lora.finetune.lora_r) = (Method::Lora, 16);
        let d = |strategy, gpus| DistConfig { gpus, strategy, ..Default::default() };
        let jobs = [
            (d(Strategy::Ddp, 2), train),
            (DistConfig { gradient_as_bucket_view: true, ..d(Strategy::Ddp, 4) }, accumulating),
            (d(Strategy::Zero1, 4), train),
            (d(Strategy::Zero2, 8), accumulating),
            (d(Strategy::Zero3, 8), train),
            (DistConfig { offload: Offload::Params, ..d(Strategy::Zero3, 4) }, train),
            (DistConfig { offload: Offload::Optimizer, ..d(Strategy::Zero2, 2) }, train),
            (d(Strategy::Fsdp, 8), train),
            (DistConfig { reshard_after_forward: false, ..d(Strategy::Fsdp, 2) }, accumulating),
            (DistConfig { fsdp_param_dtype: Some(MpDtype::Bf16), fsdp_reduce_dtype: Some(MpDtype::Fp32), ..d(Strategy::Fsdp, 4) }, TrainConfig { precision: Precision::Fp32, ..train }),
            (d(Strategy::Fsdp, 4), lora),
            (d(Strategy::Zero3, 2), lora),
        ];
        let batches: Vec<u64> = (1..=24).chain([63, 64, 100, 1000, 1 << 16]).collect();
        for spec in [&gpt2, &qwen] {
            for (dist, c) in jobs {
                let job = format!("{:?} {} GPUs {:?}", dist.strategy, dist.gpus, c.finetune.method);
                let shared = DistPrepared::new(spec, &c, &dist).unwrap();
                for &b in &batches {
                    let direct = DistPrepared::new(spec, &c, &dist).unwrap().peak_at(b);
                    assert_eq!(shared.peak_at(b), direct, "{job}, batch {b}");
                }
                assert!(matches!(shared.peaks.get(), Some(Some(_))), "{job}: no envelope");
                // the world size changed: a new overlay, so a new envelope
                let on16 = shared.on_gpus(spec, 16).unwrap();
                assert!(on16.peaks.get().is_none(), "{job}");
                for &b in &batches[..8] {
                    assert_eq!(on16.peak_at(b), DistPrepared::new(spec, &c, &DistConfig { gpus: 16, ..dist }).unwrap().peak_at(b), "{job} on 16, batch {b}");
                }
            }
        }
    }
}
