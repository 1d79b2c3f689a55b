//! The search over a measured total ([`largest_by`]): the fewest full estimates that find the
//! largest value whose device total is within the capacity, exactly.
//!
//! A device total is the allocated peak (smooth in a token count or a batch: sums of products of
//! the shapes) plus the caching allocator's rounding (a staircase: each live tensor rounded up to
//! 512 bytes or 2 MiB). The search predicts with the smooth part and decides with the total:
//!
//! 1. **Bracket.** From the start, extrapolate the peak's slope through the two points measured
//!    nearest the capacity (doubling while there is no slope yet) to just past the answer.
//! 2. **Close in.** A secant step through the two measured points nearest the capacity (the
//!    peak's slope, the nearest point's total) predicts the answer `r`; the next value is aimed
//!    a margin `d` past `r`, on the side of the answer opposite to the nearest point, so that
//!    the bracket closes from both ends. A value that lands on the aimed side resets the margin
//!    to 1; one that does not (the prediction was off by more) quadruples it.
//! 3. **Guarantee.** Whenever three steps fail to halve the bracket (a flat stretch, a staircase
//!    step, a refused value) and no gallop is under way (a margin grown past 1 but under half the
//!    bracket, which crosses the answer within `log4` of the width), or the prediction falls
//!    outside it, the next value bisects it: `O(log²(range))` estimates at worst.
//!
//! The answer is always a value measured to fit next to one measured not to (or the range's
//! end): exact for any non-decreasing total, whatever the predictions were.

use crate::error::Result;

/// A value and its measurement (`(peak, device total)`; `None`: refused).
pub type Measured = (u64, Option<(u64, u64)>);

struct Search {
    cap: u64,
    seen: Vec<Measured>,
    /// The largest value measured to fit.
    good: Option<u64>,
    /// The smallest value measured not to fit (over the capacity, or refused).
    bad: Option<u64>,
}

impl Search {
    fn probe(&mut self, v: u64, measure: &mut impl FnMut(u64) -> Result<Option<(u64, u64)>>) -> Result<bool> {
        let m = measure(v)?;
        self.seen.push((v, m));
        let fits = m.is_some_and(|(_, t)| t <= self.cap);
        if fits {
            self.good = Some(self.good.map_or(v, |g| g.max(v)));
        } else {
            self.bad = Some(self.bad.map_or(v, |b| b.min(v)));
        }
        Ok(fits)
    }

    /// The value where the total reaches the capacity, predicted through the two measured points
    /// nearest it (by total) whose peaks differ: the line of their peaks, through the nearest
    /// point's total. `None` without two such points or without a rising slope.
    fn predict(&self) -> Option<(f64, bool)> {
        let pts = self.seen.iter().filter_map(|&(v, m)| m.map(|(p, t)| (v, p, t)));
        let dist = |t: u64| t.abs_diff(self.cap);
        let (nv, np, nt) = pts.clone().min_by_key(|&(v, _, t)| (dist(t), v))?;
        let (ov, op, _) = pts.filter(|&(v, p, _)| v != nv && p != np).min_by_key(|&(v, _, t)| (dist(t), v))?;
        let slope = (op as f64 - np as f64) / (ov as f64 - nv as f64);
        if !(slope.is_finite() && slope > 0.0) {
            return None;
        }
        let r = nv as f64 + (self.cap as f64 - nt as f64) / slope;
        r.is_finite().then_some((r, nt <= self.cap))
    }
}

/// The largest `v` in `lo..=hi` whose `measure(v)` (`(peak, device total)`, the total
/// non-decreasing in `v`; `None`: a value the model refuses, which counts as not fitting) has a
/// total of at most `cap`, with the measurements made, in order. Starts at `start` (clamped into
/// the range). See the module's text for the method.
pub fn largest_by(
    lo: u64,
    hi: u64,
    start: u64,
    cap: u64,
    mut measure: impl FnMut(u64) -> Result<Option<(u64, u64)>>,
) -> Result<(Option<u64>, Vec<Measured>)> {
    let mut s = Search { cap, seen: Vec::new(), good: None, bad: None };
    if lo > hi {
        return Ok((None, s.seen));
    }
    s.probe(start.clamp(lo, hi), &mut measure)?;
    // 1. the bracket, upwards: extrapolate (a 1/16 overshoot to land past the answer), doubling
    //    the distance after three extrapolations that stay below it
    let mut short = 0;
    while let (Some(g), None) = (s.good, s.bad) {
        if g == hi {
            return Ok((Some(hi), s.seen));
        }
        let doubled = g.saturating_add((g - lo).max(1)).min(hi);
        let x = match s.predict() {
            Some((r, _)) if short < 3 => {
                let x = r + (r - g as f64).max(0.0) / 16.0 + 1.0;
                if x >= hi as f64 { hi } else { (x as u64).max(g + 1) }
            }
            _ => doubled,
        };
        short += 1;
        s.probe(x, &mut measure)?;
    }
    // … or downwards: predict (undershooting by 1/16), halving after three predictions
    while let (None, Some(b)) = (s.good, s.bad) {
        if b == lo {
            return Ok((None, s.seen));
        }
        let half = lo + (b - lo) / 2;
        short += 1;
        let x = match s.predict() {
            Some((r, _)) if r < b as f64 && short <= 3 => {
                let x = r - (b as f64 - r) / 16.0 - 1.0;
                if x <= lo as f64 { lo } else { (x as u64).min(b - 1) }
            }
            _ => half,
        };
        s.probe(x, &mut measure)?;
    }
    // 2. close in: aimed secant steps, 3. a bisection when two steps did not halve the bracket
    let (Some(mut g), Some(mut b)) = (s.good, s.bad) else { unreachable!("both ends are known after the bracket loops") };
    let mut margin = 1.0f64;
    // the bracket's width one to three steps back (none yet: no bisection in the first three)
    let mut widths = [u64::MAX; 3];
    while b - g > 1 {
        let mid = g + (b - g) / 2;
        // a gallop in progress (the last aimed values missed: the margin grows fourfold each
        // time, so it crosses the answer within log4 of the bracket's width) goes on while its
        // margin is under half the bracket, instead of bisecting a bracket whose far end is far
        let galloping = margin > 1.0 && margin < (b - g) as f64 / 2.0;
        let bisect = (b - g).saturating_mul(2) > widths[0] && !galloping;
        // the answer is floor(r): aim past it, away from the nearest point; a prediction outside
        // the bracket (a staircase step the peaks' slope cannot see) bisects instead
        let aimed = s.predict().filter(|_| !bisect).and_then(|(r, near_fits)| {
            let x = if near_fits { r.floor() + margin } else { r.floor() + 1.0 - margin };
            (x > g as f64 && x < b as f64).then_some((x as u64, !near_fits))
        });
        let x = aimed.map_or(mid, |a| a.0);
        let fits = s.probe(x, &mut measure)?;
        match aimed {
            Some((_, want)) if want == fits => margin = 1.0,
            Some(_) => margin *= 4.0,
            None => {}
        }
        widths = [widths[1], widths[2], b - g];
        (g, b) = (s.good.unwrap_or(g), s.bad.unwrap_or(b));
    }
    Ok((Some(g), s.seen))
}
