//! What-ifs of the whole job: every change — the memory tricks (`whatif.rs`), the fine-tuning
//! (`whatif_finetune.rs`) and generation (`whatif_gen.rs`) ones, and those of the multi-GPU
//! strategy — applied alone to the same setup *with its GPUs and strategy*, and compared with
//! that job's own rank 0. A change that saves nothing (or costs more) is not offered; each one
//! says whether it alone makes the job fit.

use super::finetune::{self as ft, FineTuneTrick};
use super::{apply as apply_trick, Trick};
use crate::config::{Mode, Precision, TrainConfig};
use crate::distributed::{DistConfig, DistPrepared, MpDtype, Strategy};
use crate::error::Result;
use crate::spec::ModelSpec;
use crate::whatif_gen::{self as gen, GenTrick};
use serde::Serialize;

/// A change to the job's strategy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DistTrick {
    /// FSDP's `MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)` instead of autocast:
    /// the gathered weights are cast once per unit, not cached whole for the forward.
    FsdpMixedPrecision,
    /// `torch.autocast(cache_enabled=False)`.
    AutocastCacheOff,
    /// Twice the GPUs, same strategy.
    DoubleGpus,
}

impl DistTrick {
    pub const ALL: [DistTrick; 3] = [DistTrick::FsdpMixedPrecision, DistTrick::AutocastCacheOff, DistTrick::DoubleGpus];

    pub fn id(self) -> &'static str {
        match self {
            DistTrick::FsdpMixedPrecision => "fsdp-mixed-precision",
            DistTrick::AutocastCacheOff => "autocast-cache-off",
            DistTrick::DoubleGpus => "double-gpus",
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            DistTrick::FsdpMixedPrecision => "FSDP MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32) instead of autocast",
            DistTrick::AutocastCacheOff => "autocast with cache_enabled=False",
            DistTrick::DoubleGpus => "twice the GPUs",
        }
    }
}

/// Any one change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "kind", content = "trick", rename_all = "kebab-case")]
pub enum Change {
    Trick(Trick),
    FineTune(FineTuneTrick),
    Generate(GenTrick),
    Dist(DistTrick),
}

impl Change {
    pub fn id(self) -> &'static str {
        match self {
            Change::Trick(t) => t.id(),
            Change::FineTune(t) => t.id(),
            Change::Generate(t) => t.id(),
            Change::Dist(t) => t.id(),
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Change::Trick(t) => t.describe(),
            Change::FineTune(t) => t.describe(),
            Change::Generate(t) => t.describe(),
            Change::Dist(t) => t.describe(),
        }
    }

    /// Every change there is, in the order the lists show them.
    pub fn all() -> impl Iterator<Item = Change> {
        Trick::ALL
            .into_iter()
            .map(Change::Trick)
            .chain(FineTuneTrick::ALL.into_iter().map(Change::FineTune))
            .chain(GenTrick::ALL.into_iter().map(Change::Generate))
            .chain(DistTrick::ALL.into_iter().map(Change::Dist))
    }
}

/// The job with `change` applied (`None`: it does not apply).
pub fn apply(change: Change, spec: &ModelSpec, c: &TrainConfig, d: &DistConfig) -> Option<(TrainConfig, DistConfig)> {
    let same = |cfg: Option<TrainConfig>| cfg.map(|cfg| (cfg, *d));
    match change {
        Change::Trick(t) => same(apply_trick(t, spec, c)),
        Change::FineTune(t) => same(ft::apply(t, spec, c)),
        Change::Generate(t) => same(gen::apply(t, spec, c)),
        Change::Dist(DistTrick::FsdpMixedPrecision) => {
            let autocast = matches!(c.precision, Precision::AmpBf16 | Precision::AmpFp16);
            if d.strategy != Strategy::Fsdp || d.is_single() || !autocast || d.fsdp_param_dtype.is_some() {
                return None;
            }
            let cfg = TrainConfig { precision: Precision::Fp32, ..*c };
            Some((cfg, DistConfig { fsdp_param_dtype: Some(MpDtype::Bf16), fsdp_reduce_dtype: Some(MpDtype::Fp32), ..*d }))
        }
        Change::Dist(DistTrick::AutocastCacheOff) => {
            let autocast = matches!(c.precision, Precision::AmpBf16 | Precision::AmpFp16);
            (autocast && c.autocast_cache && c.mode == Mode::Train).then_some((TrainConfig { autocast_cache: false, ..*c }, *d))
        }
        Change::Dist(DistTrick::DoubleGpus) => {
            if d.is_single() || d.gpus.saturating_mul(2) > crate::distributed::MAX_GPUS {
                return None;
            }
            Some((*c, DistConfig { gpus: d.gpus * 2, ..*d }))
        }
    }
}

/// One change and the job it gives.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobWhatIf {
    pub change: Change,
    pub id: &'static str,
    pub describe: &'static str,
    pub config: TrainConfig,
    pub dist: DistConfig,
    /// Rank 0's peak allocated bytes and device total with the change.
    pub peak: u64,
    pub device_total: u64,
    /// What it saves against the job as it is (device total; always > 0 in the list).
    pub saves: u64,
    /// Whether this change alone makes the job fit the capacity (`None`: no capacity given).
    pub fits: Option<bool>,
}

/// The job's rank 0 and each change that lowers it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobWhatIfs {
    pub peak: u64,
    pub device_total: u64,
    pub items: Vec<JobWhatIf>,
}

/// Peak and device total of a job's rank 0 (the single-GPU estimate on one GPU).
pub fn job_peak(spec: &ModelSpec, c: &TrainConfig, d: &DistConfig) -> Result<(u64, u64)> {
    Ok(DistPrepared::new(spec, c, d)?.peak_at(c.batch))
}

/// Every change that lowers the job's device total, with its figures; an error when the job
/// itself is rejected.
pub fn what_ifs(spec: &ModelSpec, c: &TrainConfig, d: &DistConfig, capacity: Option<u64>) -> Result<JobWhatIfs> {
    let (peak, device_total) = job_peak(spec, c, d)?;
    let items = Change::all().filter_map(|change| what_if(change, spec, c, d, device_total, capacity)).collect();
    Ok(JobWhatIfs { peak, device_total, items })
}

/// One entry of [`what_ifs`]: `change` applied to the job whose rank 0 totals `device_total`
/// (`None`: it does not apply, is rejected, or saves nothing). The web app computes the list
/// one change per task, so a large model's list never holds up the page.
pub fn what_if(change: Change, spec: &ModelSpec, c: &TrainConfig, d: &DistConfig, device_total: u64, capacity: Option<u64>) -> Option<JobWhatIf> {
    let (cfg, dist) = apply(change, spec, c, d)?;
    let (p, total) = job_peak(spec, &cfg, &dist).ok()?;
    let saves = device_total.checked_sub(total).filter(|&s| s > 0)?;
    Some(JobWhatIf { change, id: change.id(), describe: change.describe(), config: cfg, dist, peak: p, device_total: total, saves, fits: capacity.map(|cap| total <= cap) })
}
