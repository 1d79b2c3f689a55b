//! One setup the solver varies: a model, its step's settings and the multi-GPU job (one GPU by
//! default), and what setting one variable does to it.

use super::variable::{Limit, Variable};
use crate::config::{Mode, TrainConfig};
use crate::distributed::{DistConfig, DistEstimate, DistPrepared};
use crate::error::{Error, Result};
use crate::memory::breakdown::Breakdown;
use crate::memory::simulate::Phase;
use crate::memory::peak::PeakSummary;
use crate::memory::MAX_BATCH;
use crate::spec::ModelSpec;

/// The longest sequence (or prompt) the solver searches: 16 Mi tokens.
pub const MAX_SEQ_LEN: u64 = 1 << 24;
/// The most new tokens the solver searches (each is a decode step of the simulation).
pub const MAX_NEW_TOKENS: u64 = 1 << 20;

/// A model, its settings and its job.
#[derive(Debug, Clone, Copy)]
pub struct Setup<'a> {
    pub spec: &'a ModelSpec,
    pub config: TrainConfig,
    pub dist: DistConfig,
}

impl<'a> Setup<'a> {
    /// The setup on one GPU.
    pub fn new(spec: &'a ModelSpec, config: TrainConfig) -> Setup<'a> {
        Setup { spec, config, dist: DistConfig::default() }
    }

    /// Rank 0 of the job, prepared (resolved and planned) at this setup.
    pub fn prepared(&self) -> Result<DistPrepared> {
        DistPrepared::new(self.spec, &self.config, &self.dist)
    }

    /// Rank 0's peak allocated bytes and device total.
    pub fn totals(&self) -> Result<(u64, u64)> {
        if self.dist.is_single() {
            // one simulation at the batch: no envelope to build for a single value
            self.dist.validate(&self.config)?;
            return crate::memory::Prepared::peak_once(self.spec, &self.config);
        }
        Ok(self.prepared()?.peak_at(self.config.batch))
    }

    /// [`Setup::totals`] with where the peak is, from the same simulations: the estimate's
    /// phase, `peak_at` and breakdown at that peak, for the answer's [`Limit`] without a second
    /// estimate. A multi-GPU job's rank without an overlay (inference) simulates once more.
    pub fn measure(&self) -> Result<PeakSummary> {
        if self.dist.is_single() {
            self.dist.validate(&self.config)?;
            return crate::memory::Prepared::measure(self.spec, &self.config);
        }
        Ok(self.prepared()?.peak_summary(self.config.batch))
    }

    /// Rank 0's full estimate.
    pub fn estimate(&self) -> Result<DistEstimate> {
        crate::distributed::estimate(self.spec, &self.config, &self.dist)
    }

    /// The values the solver searches for `of`, and an error where it does not apply.
    pub fn range(&self, of: Variable) -> Result<(u64, u64)> {
        let c = &self.config;
        let generate = |what: &str| -> Result<()> {
            if c.mode != Mode::Generate {
                return Err(Error::Config(format!("--of {what} is a generation setting: add --mode generate")));
            }
            Ok(())
        };
        match of {
            Variable::Batch => Ok((c.grad_accum.max(1), MAX_BATCH)),
            Variable::SeqLen => {
                if self.spec.seq_len(None).is_none() {
                    return Err(Error::Config("--of seq-len: the model takes no token sequence (its input has no sequence length)".into()));
                }
                Ok((self.step(of), MAX_SEQ_LEN))
            }
            Variable::PromptLen => generate("prompt-len").map(|_| (self.step(of), MAX_SEQ_LEN)),
            Variable::NewTokens => generate("new-tokens").map(|_| (1, MAX_NEW_TOKENS)),
            Variable::Context | Variable::Concurrency => {
                Err(Error::Config(format!("--of {of} is a vLLM serving figure (solve::max_serving)")))
            }
            Variable::GpuLayers => Err(Error::Config(
                "--of gpu-layers needs the llama.cpp engine, which this build does not have yet".into(),
            )),
        }
    }

    /// The unit a token count takes: Megatron's sequence parallelism splits the sequence over the
    /// tensor-parallel ranks, so it must be a multiple of their number.
    pub fn step(&self, of: Variable) -> u64 {
        match of {
            Variable::SeqLen | Variable::PromptLen if self.dist.sequence_parallel => self.dist.tp_degree().max(1),
            _ => 1,
        }
    }

    /// The variable's value in this setup (`None`: not set and no default).
    pub fn current(&self, of: Variable) -> Option<u64> {
        let c = &self.config;
        match of {
            Variable::Batch => Some(c.batch),
            Variable::SeqLen => self.spec.seq_len(c.seq_len),
            Variable::PromptLen => c.generate.prompt_len.or(self.spec.seq_len(c.seq_len)),
            Variable::NewTokens => Some(c.generate.new_tokens),
            _ => None,
        }
    }

    /// This setup with `of` set to `value`.
    pub fn at(&self, of: Variable, value: u64) -> Result<Setup<'a>> {
        let mut c = self.config;
        match of {
            Variable::Batch => c.batch = value,
            Variable::SeqLen => c.seq_len = Some(value),
            Variable::PromptLen => c.generate.prompt_len = Some(value),
            Variable::NewTokens => c.generate.new_tokens = value,
            _ => {
                self.range(of)?;
            }
        }
        Ok(Setup { config: c, ..*self })
    }

    /// Where the peak of this setup (at `value` of the variable) is, for the answer's `limit`.
    pub fn limit(&self, value: u64) -> Result<Limit> {
        let e = match self.estimate() {
            Ok(e) => e.estimate,
            // refused: beyond the model's positions, or more than 64 bits of bytes
            Err(err) => {
                return Ok(Limit {
                    value,
                    device_total_bytes: u64::MAX,
                    phase: "-".into(),
                    at: format!("refused: {err}"),
                    category: "-".into(),
                    category_bytes: 0,
                })
            }
        };
        Ok(limit_of(value, e.device_total_bytes, e.peak_phase, e.peak_at, &e.breakdown))
    }
}

/// The [`Setup::limit`] of a measurement at `value` ([`Setup::measure`], the same figures as the
/// estimate there).
pub fn limit_from(value: u64, s: PeakSummary) -> Limit {
    limit_of(value, s.device_total_bytes, s.peak_phase, s.peak_at, &s.breakdown)
}

fn limit_of(value: u64, device_total_bytes: u64, phase: Phase, at: String, b: &Breakdown) -> Limit {
    let (category, category_bytes) = b
        .entries()
        .into_iter()
        .map(|(c, v)| (serde_json::to_value(c).ok().and_then(|s| s.as_str().map(str::to_string)).unwrap_or_default(), v))
        .chain([("kv_cache".to_string(), b.kv_cache)])
        .fold((String::new(), 0), |best, x| if x.1 > best.1 { x } else { best });
    Limit { value, device_total_bytes, phase: phase.name().into(), at, category, category_bytes }
}
