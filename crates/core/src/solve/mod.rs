//! The reverse question: the largest value of one free variable (batch, sequence length, prompt,
//! new tokens, vLLM context or concurrency) whose setup fits a GPU.
//!
//! "Fits" is the test `max-batch`, `fewest-gpus` and `estimate --fits` use: the device total
//! (`memory/device.rs`: the allocated peak with the caching allocator's rounding and reserve, the
//! CUDA context and the cuBLAS workspace) of rank 0 is at most the GPU's memory. For vLLM it is
//! vLLM's own start-up test (`serve::capacity`): the KV pool holds the requests.
//!
//! Every variable is monotone: a larger value never needs less memory (each allocation grows with
//! it, the allocator's rounding is monotone, and a peak is a maximum of such sizes). So the answer
//! is found by [`largest`], a search over a `fits(value)` predicate: a gallop from a starting value
//! (doubling up, or halving down) to a bracket, then bisection, `2·log2(answer)` evaluations at
//! most, never a scan. The batch reads the simulation's envelope (`memory/envelope.rs`), which
//! needs no re-simulation; every other variable is searched by [`largest_by`] (`search.rs`), which
//! predicts from the measured peaks and totals and needs 6–9 full estimates. Another
//! engine (the llama.cpp one) plugs in by giving its own predicate to [`largest`].
//!
//! `fix` finds the cheapest set of changes that makes a setup fit; `fits` tabulates what fits a GPU.

pub mod fits;
pub mod fits_llama;
mod fits_row;
pub mod fix;
mod search;
pub mod setup;
mod variable;

use crate::error::{Error, Result};
use crate::serve::{self, ServeConfig};
use crate::spec::ModelSpec;
use crate::memory::peak::PeakSummary;
use serde::{Deserialize, Serialize};
pub use search::{largest_by, Measured};
pub use setup::Setup;
pub use variable::{Limit, Variable};

/// The largest value that fits, with its figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Answer {
    pub of: Variable,
    pub value: u64,
    pub capacity_bytes: u64,
    /// The device total at `value` (for vLLM: the KV bytes the requests hold).
    pub device_total_bytes: u64,
    pub peak_bytes: u64,
    /// `capacity_bytes − device_total_bytes` (for vLLM: the KV pool left over).
    pub margin_bytes: u64,
    /// The largest value searched; `limit` is `None` when even it fits.
    pub upper_bound: u64,
    pub limit: Option<Limit>,
    /// Setups evaluated by the search.
    pub evaluations: u32,
}

/// The largest `v` in `lo..=hi` for which `fits(v)` holds, given that it holds up to some value
/// and not beyond; `None` when not even `lo` fits. Gallops from `start` (clamped into the range):
/// doubling the distance from `lo` while it fits, halving it while it does not, then bisects the
/// bracket. An error from `fits` ends the search.
pub fn largest(lo: u64, hi: u64, start: u64, mut fits: impl FnMut(u64) -> Result<bool>) -> Result<Option<u64>> {
    if lo > hi {
        return Ok(None);
    }
    let start = start.clamp(lo, hi);
    // the bracket: `g` fits, `b` does not (`b` = hi + 1 when none is known; u128: no overflow)
    let (mut g, mut b): (u128, u128);
    if fits(start)? {
        g = start as u128;
        let mut step = ((start - lo) as u128).max(1);
        loop {
            if g == hi as u128 {
                return Ok(Some(hi));
            }
            let next = (g + step).min(hi as u128);
            if fits(next as u64)? {
                g = next;
                step *= 2;
            } else {
                b = next;
                break;
            }
        }
    } else {
        b = start as u128;
        loop {
            if b == lo as u128 {
                return Ok(None);
            }
            let next = lo as u128 + (b - lo as u128) / 2;
            if fits(next as u64)? {
                g = next;
                break;
            }
            b = next;
        }
    }
    // invariant: g fits, b does not, g < b
    while b - g > 1 {
        let mid = g + (b - g) / 2;
        if fits(mid as u64)? {
            g = mid;
        } else {
            b = mid;
        }
    }
    Ok(Some(g as u64))
}

/// The largest value of `of` at which `setup` fits `capacity` bytes. An error when the variable
/// does not apply to the setup or the smallest value is refused, and [`Error::Config`] "does not
/// fit" when even the smallest value does not fit. Values the model refuses (a sequence beyond its
/// learned positions) count as not fitting; [`Answer::limit`] then names the reason.
pub fn max_value(setup: &Setup, of: Variable, capacity: u64) -> Result<Answer> {
    let (lo, hi) = setup.range(of)?;
    // token counts under sequence parallelism are multiples of `step`: search over k, value k·step
    let step = setup.step(of);
    let (klo, khi) = (lo.div_ceil(step), hi / step);
    let start = setup.current(of).unwrap_or(lo) / step;
    let mut evaluations = 0u32;
    let mut known: Vec<Measured> = Vec::new();
    // the smallest value measured not to fit, with where its peak is: the answer's limit, which
    // the search has measured (the answer is a value that fits next to one that does not)
    let mut above: Option<(u64, PeakSummary)> = None;
    let mut prepared = None;
    let found = if of == Variable::Batch {
        // one prepared model: the envelope answers every batch without re-simulating
        let p = prepared.insert(setup.at(of, klo)?.prepared()?);
        largest(klo, khi, start, |b| {
            evaluations += 1;
            Ok(p.peak_at(b).1 <= capacity)
        })?
    } else {
        // a value the model refuses (beyond its learned positions, too large for 64 bits) is one
        // it cannot run: the refused values lie above the accepted ones
        let (found, seen) = largest_by(klo, khi, start, capacity, |k| {
            let Ok(s) = setup.at(of, k * step)?.measure() else { return Ok(None) };
            let totals = (s.peak_bytes, s.device_total_bytes);
            if totals.1 > capacity && above.as_ref().is_none_or(|a| k < a.0) {
                above = Some((k, s));
            }
            Ok(Some(totals))
        })?;
        evaluations = seen.len() as u32;
        known = seen;
        found
    };
    let Some(k) = found else {
        let lo = klo * step;
        return Err(does_not_fit(of, lo, setup.at(of, lo)?.totals()?.1, capacity));
    };
    let value = k * step;
    let (peak, total) = match known.iter().find(|x| x.0 == k) {
        Some((_, Some(m))) => *m,
        _ => setup.at(of, value)?.totals()?,
    };
    let next = value + step;
    // the measurement just above the answer is the estimate's figures there; a refused value
    // (or one past 64 bits of bytes) takes the estimate's error as its limit
    let limit = if k < khi {
        let measured = match (above, &prepared) {
            (Some((a, s)), _) if a == k + 1 => Some(s),
            (_, Some(p)) => p.summary_at(next).ok(),
            _ => None,
        };
        Some(match measured.filter(|s| s.device_total_bytes != u64::MAX) {
            Some(s) => setup::limit_from(next, s),
            None => setup.at(of, next)?.limit(next)?,
        })
    } else {
        None
    };
    Ok(Answer {
        of,
        value,
        capacity_bytes: capacity,
        device_total_bytes: total,
        peak_bytes: peak,
        margin_bytes: capacity.saturating_sub(total),
        upper_bound: khi * step,
        limit,
        evaluations,
    })
}

/// Whether `e` is the solver's "does not fit" (not even the smallest value fits), as opposed to
/// a setup it refuses: the CLI exits 1 for it, 2 for bad input.
pub fn is_does_not_fit(e: &Error) -> bool {
    matches!(e, Error::Config(m) if m.starts_with("does not fit"))
}

fn does_not_fit(of: Variable, lo: u64, total: u64, capacity: u64) -> Error {
    Error::Config(format!(
        "does not fit: even {of} {lo} needs {} (device total) of {}",
        crate::units::format_bytes(total, crate::units::ByteUnit::Mb),
        crate::units::format_bytes(capacity, crate::units::ByteUnit::Mb)
    ))
}

/// The largest vLLM context at `cfg.concurrency` sequences, or the most sequences at `cfg.context`
/// ([`Variable::Context`], [`Variable::Concurrency`]): vLLM's own arithmetic (`serve::capacity`)
/// over whole 16-token blocks. The "capacity" is the KV pool vLLM allocates (its usable blocks).
pub fn max_serving(spec: &ModelSpec, cfg: &ServeConfig, of: Variable) -> Result<Answer> {
    let c = serve::capacity(spec, cfg)?;
    let usable = c.num_blocks.saturating_mul(c.page_bytes);
    let bytes = |len: u64| serve::request_bytes(spec, cfg, len);
    // (answer, upper bound, KV bytes held at the answer and just above it)
    let (value, hi, held, above) = match of {
        Variable::Concurrency => {
            let per = bytes(cfg.context);
            let n = c.max_concurrency;
            (n, u64::MAX, per.saturating_mul(n), per.saturating_mul(n.saturating_add(1)))
        }
        Variable::Context => {
            let n = cfg.concurrency.filter(|&n| n > 0).ok_or_else(|| {
                Error::Config("the longest vLLM context is found at a concurrency of at least 1 (--concurrency)".into())
            })?;
            let v = c.max_context_at_concurrency.unwrap_or(0);
            (v, serve::MAX_CONTEXT, bytes(v).saturating_mul(n), bytes(v.saturating_add(1)).saturating_mul(n))
        }
        other => return Err(Error::Config(format!("{other} is not a vLLM serving variable (context, concurrency)"))),
    };
    if value == 0 {
        let mb = |b: u64| crate::units::format_bytes(b, crate::units::ByteUnit::Mb);
        let what = match of {
            Variable::Context => format!("{} sequences of even one block", cfg.concurrency.unwrap_or(1)),
            _ => format!("one {}-token sequence ({})", cfg.context, mb(bytes(cfg.context))),
        };
        return Err(Error::Config(format!(
            "does not fit: vLLM's KV pool ({} left of {} after weights {}, profile run and overheads) holds not {what}",
            mb(usable),
            mb(c.requested_bytes),
            mb(c.weights_bytes)
        )));
    }
    let limit = (value < hi).then(|| Limit {
        value: value + 1,
        device_total_bytes: above,
        phase: "serving".into(),
        at: "vLLM KV cache pool".into(),
        category: "kv_cache".into(),
        category_bytes: above,
    });
    Ok(Answer {
        of,
        value,
        capacity_bytes: usable,
        device_total_bytes: held,
        peak_bytes: held,
        margin_bytes: usable.saturating_sub(held),
        upper_bound: hi,
        limit,
        evaluations: 1,
    })
}

#[cfg(test)]
mod tests;
