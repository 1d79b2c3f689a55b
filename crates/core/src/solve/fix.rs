//! The cheapest fix: when a setup does not fit a GPU, the smallest sets of changes that make it
//! fit, ranked by what they cost the user.
//!
//! Each [`Change`] is one of the memory tricks (the what-ifs of `whatif`, `whatif::finetune` and
//! `whatif_gen` where one exists) and has a [`Tier`]: first what leaves the result unchanged
//! (in-place ReLU, a chunked loss, a paged or fp8 KV cache, AMP, an 8-bit optimizer,
//! checkpointing, offload), then what changes the training or the output (gradient accumulation
//! at the same effective batch, LoRA, QLoRA, smaller weights, a shorter sequence or prompt, a
//! smaller batch), then more GPUs with a strategy. Within a tier each change has a cost (its
//! compute or quality price, an ordering, not a measurement).
//!
//! The search tries sets of up to three changes (one per [`Change::group`]), cheapest first by
//! `(highest tier, summed cost)`, and keeps only minimal sets: a set is skipped when a subset of
//! it already fits. So combinations are found where no single change fits, and the answers are
//! the cheapest such sets, each with the peak and device total of its full estimate.

use super::Setup;
use crate::config::{Mode, OptimizerKind, Precision, TrainConfig};
use crate::distributed::{DistConfig, Offload, Strategy};
use crate::error::Result;
use crate::finetune::{BaseFormat, FineTune, Method};
use crate::whatif::finetune::{self as ft, FineTuneTrick};
use crate::whatif::{self, Trick};
use crate::whatif_gen::{self as gen, GenTrick};
use serde::Serialize;

/// What a change costs the user.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Tier {
    /// The step computes the same result (slower, or rounded differently at most).
    SameResult,
    /// The training (or the output) changes.
    ChangesTraining,
    /// More GPUs.
    MoreGpus,
}

/// One change to a setup.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Change {
    InplaceRelu,
    ChunkedLoss,
    PagedKvCache,
    /// Training in fp32: AMP with bf16 autocast.
    AmpBf16,
    /// AdamW's two fp32 states as bitsandbytes' 8-bit ones.
    Optimizer8bit,
    Fp8KvCache,
    Checkpointing,
    /// DeepSpeed's optimizer offload (a ZeRO job only).
    OffloadOptimizer,
    /// The same samples per step in `factor`× more, smaller micro-batches.
    GradAccum(u64),
    LoraR16,
    /// LoRA r=16 on an NF4 base.
    Qlora,
    /// Inference weights stored as int8 (bitsandbytes).
    WeightsInt8,
    /// Inference weights stored as NF4 (bitsandbytes).
    WeightsNf4,
    /// Half the sequence (the prompt when generating).
    HalveSeq,
    HalveBatch,
    /// `gpus` GPUs under `strategy` (tensor parallelism for inference).
    Gpus(u64, Strategy),
}

impl Change {
    /// A stable id (JSON, `--apply`).
    pub fn id(self) -> String {
        match self {
            Change::InplaceRelu => "inplace-relu".into(),
            Change::ChunkedLoss => "chunked-loss".into(),
            Change::PagedKvCache => "paged-kv-cache".into(),
            Change::AmpBf16 => "amp-bf16".into(),
            Change::Optimizer8bit => "8bit-optimizer".into(),
            Change::Fp8KvCache => "fp8-kv-cache".into(),
            Change::Checkpointing => "checkpointing".into(),
            Change::OffloadOptimizer => "offload-optimizer".into(),
            Change::GradAccum(f) => format!("grad-accum-x{f}"),
            Change::LoraR16 => "lora-r16".into(),
            Change::Qlora => "qlora".into(),
            Change::WeightsInt8 => "weights-int8".into(),
            Change::WeightsNf4 => "weights-nf4".into(),
            Change::HalveSeq => "halve-seq".into(),
            Change::HalveBatch => "halve-batch".into(),
            Change::Gpus(n, s) => format!("{n}-gpus-{s}"),
        }
    }

    /// What the change does, in English.
    pub fn describe(self) -> String {
        match self {
            Change::InplaceRelu => "in-place ReLU".into(),
            Change::ChunkedLoss => "chunked linear-cross-entropy loss (Liger)".into(),
            Change::PagedKvCache => "paged KV cache".into(),
            Change::AmpBf16 => "mixed precision (AMP bf16)".into(),
            Change::Optimizer8bit => "8-bit AdamW (bitsandbytes)".into(),
            Change::Fp8KvCache => "fp8 KV cache".into(),
            Change::Checkpointing => "activation checkpointing".into(),
            Change::OffloadOptimizer => "offload the optimizer to the CPU (DeepSpeed)".into(),
            Change::GradAccum(f) => format!("{f}× gradient accumulation at the same effective batch"),
            Change::LoraR16 => "LoRA r=16 instead of full fine-tuning".into(),
            Change::Qlora => "QLoRA r=16 (NF4 base)".into(),
            Change::WeightsInt8 => "int8 weights (bitsandbytes)".into(),
            Change::WeightsNf4 => "NF4 weights (bitsandbytes)".into(),
            Change::HalveSeq => "halve the sequence".into(),
            Change::HalveBatch => "halve the batch".into(),
            Change::Gpus(n, s) => format!("{n} GPUs, {s}"),
        }
    }

    pub fn tier(self) -> Tier {
        match self {
            Change::InplaceRelu
            | Change::ChunkedLoss
            | Change::PagedKvCache
            | Change::AmpBf16
            | Change::Optimizer8bit
            | Change::Fp8KvCache
            | Change::Checkpointing
            | Change::OffloadOptimizer => Tier::SameResult,
            Change::Gpus(..) => Tier::MoreGpus,
            _ => Tier::ChangesTraining,
        }
    }

    /// Its price within the tier (an ordering: compute time, memory traffic, quality).
    pub fn cost(self) -> u32 {
        match self {
            Change::InplaceRelu => 1,
            Change::ChunkedLoss | Change::PagedKvCache => 2,
            Change::AmpBf16 => 3,
            Change::Optimizer8bit => 4,
            Change::Checkpointing => 5,
            Change::Fp8KvCache => 6,
            Change::OffloadOptimizer => 8,
            Change::GradAccum(f) => 9 + f.trailing_zeros(),
            Change::LoraR16 => 20,
            Change::Qlora => 25,
            Change::WeightsInt8 => 20,
            Change::WeightsNf4 => 25,
            Change::HalveSeq => 30,
            Change::HalveBatch => 35,
            Change::Gpus(n, s) => 10 * n as u32 + if matches!(s, Strategy::Zero3 | Strategy::Fsdp) { 2 } else { 0 },
        }
    }

    /// Changes of one group exclude each other in a set.
    fn group(self) -> u8 {
        match self {
            Change::LoraR16 | Change::Qlora => 1,
            Change::WeightsInt8 | Change::WeightsNf4 => 2,
            Change::GradAccum(_) => 3,
            Change::Gpus(..) => 4,
            other => 10 + Change::all(1).iter().position(|c| *c == other).unwrap_or(0) as u8,
        }
    }

    /// The setup with the change applied, or `None` where it does not apply.
    pub fn apply(self, spec: &crate::spec::ModelSpec, c: &TrainConfig, d: &DistConfig) -> Option<(TrainConfig, DistConfig)> {
        let train = c.mode == Mode::Train;
        let d = *d;
        let config = match self {
            Change::InplaceRelu => whatif::apply(Trick::InplaceRelu, spec, c)?,
            Change::ChunkedLoss => ft::apply(FineTuneTrick::ChunkedLoss, spec, c)?,
            Change::PagedKvCache => gen::apply(GenTrick::PagedCache, spec, c)?,
            Change::Fp8KvCache => gen::apply(GenTrick::Fp8KvCache, spec, c)?,
            Change::Checkpointing => whatif::apply(Trick::Checkpointing, spec, c)?,
            Change::AmpBf16 if train && c.precision == Precision::Fp32 => TrainConfig { precision: Precision::AmpBf16, ..*c },
            Change::Optimizer8bit if train && matches!(c.optimizer, OptimizerKind::Adam | OptimizerKind::Adamw | OptimizerKind::AdamwAmsgrad) => {
                TrainConfig { optimizer: OptimizerKind::Adam8bit, ..*c }
            }
            Change::OffloadOptimizer if train && matches!(d.strategy, Strategy::Zero1 | Strategy::Zero2 | Strategy::Zero3) && d.gpus > 1 && d.offload == Offload::None => {
                return Some((*c, DistConfig { offload: Offload::Optimizer, ..d }));
            }
            Change::GradAccum(f) if train && c.grad_accum.saturating_mul(f) <= c.batch => TrainConfig { grad_accum: c.grad_accum * f, ..*c },
            Change::LoraR16 => ft::apply(FineTuneTrick::LoraR16, spec, c)?,
            Change::Qlora if train && !c.finetune.quant_format().is_some_and(BaseFormat::is_quantised) => {
                let lora = if c.finetune.has_adapters() { c.finetune } else { ft::apply(FineTuneTrick::LoraR16, spec, c)?.finetune };
                TrainConfig { finetune: FineTune { method: Method::Qlora, base_format: Some(BaseFormat::Nf4), ..lora }, ..*c }
            }
            Change::WeightsInt8 | Change::WeightsNf4 if !train && c.weights.is_none_or(|w| !w.is_quantized()) => {
                let w = if self == Change::WeightsInt8 { crate::formats::WeightFormat::BnbInt8 } else { crate::formats::WeightFormat::Bnb4 { nf4: true, double_quant: false } };
                TrainConfig { weights: Some(w), ..*c }
            }
            Change::HalveSeq if c.mode == Mode::Generate => gen::apply(GenTrick::ShorterPrompt, spec, c)?,
            Change::HalveSeq => whatif::apply(Trick::ShorterSeq, spec, c)?,
            Change::HalveBatch => whatif::apply(Trick::HalveBatch, spec, c)?,
            // training shards (ZeRO, FSDP); inference splits the model (tensor parallelism)
            Change::Gpus(n, s) if d.gpus == 1 && train == (s != Strategy::Tp) => {
                return Some((*c, DistConfig { gpus: n, strategy: s, ..d }));
            }
            _ => return None,
        };
        Some((config, d))
    }

    /// Every change the search considers, cheapest first (more GPUs up to `max_gpus`).
    pub fn all(max_gpus: u64) -> Vec<Change> {
        let mut v = vec![
            Change::InplaceRelu,
            Change::ChunkedLoss,
            Change::PagedKvCache,
            Change::AmpBf16,
            Change::Optimizer8bit,
            Change::Checkpointing,
            Change::Fp8KvCache,
            Change::OffloadOptimizer,
            Change::GradAccum(2),
            Change::GradAccum(4),
            Change::GradAccum(8),
            Change::LoraR16,
            Change::WeightsInt8,
            Change::Qlora,
            Change::WeightsNf4,
            Change::HalveSeq,
            Change::HalveBatch,
        ];
        let mut n = 2;
        while n <= max_gpus {
            v.extend([Change::Gpus(n, Strategy::Zero2), Change::Gpus(n, Strategy::Zero3), Change::Gpus(n, Strategy::Fsdp), Change::Gpus(n, Strategy::Tp)]);
            n *= 2;
        }
        v
    }
}

impl Serialize for Change {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("Change", 4)?;
        st.serialize_field("id", &self.id())?;
        st.serialize_field("describe", &self.describe())?;
        st.serialize_field("tier", &self.tier())?;
        st.serialize_field("cost", &self.cost())?;
        st.end()
    }
}

/// A set of changes that makes the setup fit.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fix {
    pub changes: Vec<Change>,
    /// The highest tier among the changes.
    pub tier: Tier,
    pub cost: u32,
    pub config: TrainConfig,
    pub dist: DistConfig,
    /// Rank 0's peak allocated bytes and device total with the changes.
    pub peak_bytes: u64,
    pub device_total_bytes: u64,
    pub margin_bytes: u64,
}

/// How far the search goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FixOptions {
    /// Changes per set (1 to 3).
    pub max_changes: usize,
    /// More GPUs considered up to this many (1: none).
    pub max_gpus: u64,
    /// Fixes returned.
    pub top: usize,
}

impl Default for FixOptions {
    fn default() -> Self {
        FixOptions { max_changes: 3, max_gpus: 8, top: 10 }
    }
}

/// The changes that apply to `setup` on their own.
pub fn candidates(setup: &Setup, options: &FixOptions) -> Vec<Change> {
    Change::all(options.max_gpus).into_iter().filter(|ch| ch.apply(setup.spec, &setup.config, &setup.dist).is_some()).collect()
}

/// The cheapest minimal sets of changes that make `setup` fit `capacity` bytes, cheapest first;
/// empty when it fits already or nothing within the options does. An error when the setup itself
/// is refused. [`FixSearch`] run to its end.
pub fn fixes(setup: &Setup, capacity: u64, options: &FixOptions) -> Result<Vec<Fix>> {
    let mut search = FixSearch::new(setup, capacity, options)?;
    while search.step() {}
    Ok(search.fixes())
}

/// [`fixes`] one estimate at a time: [`FixSearch::step`] tries candidate sets until it has
/// estimated one (or the search is over), so a caller can yield between steps (the web app runs
/// one per task); the same fixes as [`fixes`] in the end.
pub struct FixSearch<'a> {
    setup: Setup<'a>,
    capacity: u64,
    top: usize,
    /// The changes that can combine, and the sets of them still to try, cheapest first.
    pool: Vec<Change>,
    sets: std::vec::IntoIter<Vec<usize>>,
    found: Vec<(Vec<usize>, Fix)>,
}

impl<'a> FixSearch<'a> {
    /// The search for `setup` (one estimate: whether it fits already, when there is nothing to
    /// search); an error when the setup itself is refused.
    pub fn new(setup: &Setup<'a>, capacity: u64, options: &FixOptions) -> Result<FixSearch<'a>> {
        let mut search = FixSearch { setup: *setup, capacity, top: options.top, pool: Vec::new(), sets: Vec::new().into_iter(), found: Vec::new() };
        if setup.totals()?.1 <= capacity {
            return Ok(search);
        }
        // the changes that can combine: those that apply alone, and offload (which needs a ZeRO job)
        let pool: Vec<Change> = Change::all(options.max_gpus)
            .into_iter()
            .filter(|ch| *ch == Change::OffloadOptimizer || ch.apply(setup.spec, &setup.config, &setup.dist).is_some())
            .collect();
        let mut sets: Vec<Vec<usize>> = Vec::new();
        let n = pool.len();
        let k = options.max_changes.clamp(1, 3);
        for i in 0..n {
            sets.push(vec![i]);
            for j in (i + 1..n).filter(|_| k >= 2) {
                sets.push(vec![i, j]);
                for l in (j + 1..n).filter(|_| k >= 3) {
                    sets.push(vec![i, j, l]);
                }
            }
        }
        sets.retain(|s| s.iter().enumerate().all(|(a, &x)| s[a + 1..].iter().all(|&y| pool[x].group() != pool[y].group())));
        sets.sort_by_key(|s| key(&pool, s));
        (search.pool, search.sets) = (pool, sets.into_iter());
        Ok(search)
    }

    /// Tries the next sets until one is estimated; `false` when the search is over.
    pub fn step(&mut self) -> bool {
        let pool = &self.pool;
        while self.found.len() < self.top {
            let Some(s) = self.sets.next() else { break };
            // not minimal: a found set is in it, change for change or by a weaker change of the
            // same kind (2× accumulation for 4×, 2 GPUs for 4 of the same strategy, LoRA for QLoRA)
            if self.found.iter().any(|(f, _)| f.iter().all(|&i| s.iter().any(|&j| covers(pool[i], pool[j])))) {
                continue;
            }
            // GPUs first: offload needs the ZeRO job
            let mut order = s.clone();
            order.sort_by_key(|&i| !matches!(pool[i], Change::Gpus(..)));
            let setup = &self.setup;
            let Some((config, dist)) = order.iter().try_fold((setup.config, setup.dist), |(c, d), &i| pool[i].apply(setup.spec, &c, &d)) else {
                continue;
            };
            if let Ok((peak, total)) = (Setup { config, dist, ..*setup }).totals() {
                if total <= self.capacity {
                    let (tier, cost, _) = key(pool, &s);
                    let changes = s.iter().map(|&i| pool[i]).collect();
                    let margin_bytes = self.capacity - total;
                    let fix = Fix { changes, tier: tier.unwrap_or(Tier::SameResult), cost, config, dist, peak_bytes: peak, device_total_bytes: total, margin_bytes };
                    self.found.push((s, fix));
                }
            }
            return true;
        }
        false
    }

    /// The fixes found so far, cheapest first (all of them once [`FixSearch::step`] is `false`).
    pub fn fixes(self) -> Vec<Fix> {
        self.found.into_iter().map(|(_, f)| f).collect()
    }
}

/// A set's rank: its highest tier, its summed cost, its size.
fn key(pool: &[Change], s: &[usize]) -> (Option<Tier>, u32, usize) {
    let tier = s.iter().map(|&i| pool[i].tier()).max();
    let cost: u32 = s.iter().map(|&i| pool[i].cost()).sum();
    (tier, cost, s.len())
}

/// Whether `a` saves no more than `b` in the same way at no more cost (a found fix with `a`
/// makes a set with `b` redundant).
fn covers(a: Change, b: Change) -> bool {
    match (a, b) {
        (Change::Gpus(n, s), Change::Gpus(m, t)) => s == t && n <= m,
        (Change::Gpus(..), _) | (_, Change::Gpus(..)) => false,
        _ => a == b || (a.group() == b.group() && a.cost() <= b.cost()),
    }
}

/// The CLI flags that give `fix`'s setup (the changes' own flags, with their final values).
pub fn flags(fix: &Fix) -> Vec<String> {
    let c = &fix.config;
    let mut v: Vec<String> = Vec::new();
    let mut push = |s: &[&str]| v.extend(s.iter().map(|x| x.to_string()));
    for ch in &fix.changes {
        match ch {
            Change::InplaceRelu => push(&["--inplace-relu"]),
            Change::ChunkedLoss => push(&["--loss", "chunked"]),
            Change::PagedKvCache => push(&["--kv-cache", "paged"]),
            Change::Fp8KvCache => push(&["--kv-dtype", "fp8"]),
            Change::AmpBf16 => push(&["--precision", "amp-bf16"]),
            Change::Optimizer8bit => push(&["--optimizer", c.optimizer.name()]),
            Change::Checkpointing => push(&["--checkpointing"]),
            Change::OffloadOptimizer => push(&["--offload", "optimizer"]),
            Change::GradAccum(_) => push(&["--grad-accum", &c.grad_accum.to_string()]),
            Change::LoraR16 | Change::Qlora => {
                push(&["--finetune", c.finetune.method.name(), "--lora-r", &c.finetune.lora_r.to_string(), "--lora-alpha", &c.finetune.lora_alpha.to_string()])
            }
            Change::WeightsInt8 | Change::WeightsNf4 => push(&["--weights", &c.weights.map(|w| w.name()).unwrap_or_default()]),
            Change::HalveSeq if c.mode == Mode::Generate => push(&["--prompt-len", &c.generate.prompt_len.unwrap_or(0).to_string()]),
            Change::HalveSeq => push(&["--seq-len", &c.seq_len.unwrap_or(0).to_string()]),
            Change::HalveBatch => push(&["--batch", &c.batch.to_string()]),
            Change::Gpus(n, s) => push(&["--gpus", &n.to_string(), "--strategy", s.name()]),
        }
    }
    v
}
