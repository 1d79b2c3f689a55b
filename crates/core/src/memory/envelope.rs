//! Peak memory as a function of the batch size.
//!
//! The simulation's control flow does not depend on the batch, so every sample of the step is a
//! line `a + b·batch`, and the peak is the upper envelope of those lines. Two simulations (batch 0
//! and 1) give every line; the few lines on the envelope, with the tensors live at each, answer
//! sweeps and max-batch searches without re-simulating. The device total adds the caching
//! allocator's rounding of exactly the tensors live at the peak.

use super::device::DeviceTotal;
use super::device::{round512, round_reserved};
use super::simulate::{OptimizerCost, Overlay, Plan, TimelinePoint};
use crate::graph::{Graph, Lin};

#[derive(Debug, Clone)]
struct HullLine {
    line: Lin,
    /// Tensors live at this sample (their sizes), for allocator rounding.
    live: Vec<Lin>,
}

#[derive(Debug, Clone)]
pub struct Envelope {
    hull: Vec<HullLine>,
}

impl Envelope {
    pub fn build(plan: &Plan, g: &Graph, opt: OptimizerCost) -> Envelope {
        let t0 = plan.simulate(g, 0, opt, true, None).timeline;
        let lines = lines(&t0, &plan.simulate(g, 1, opt, true, None).timeline);
        let hull = upper_hull(&lines)
            .into_iter()
            .map(|i| HullLine { line: lines[i], live: plan.simulate(g, 1, opt, false, Some(i)).snapshot })
            .collect();
        Envelope { hull }
    }

    /// The peaks of a step under `overlay` (one rank of a multi-GPU job) at every batch, from
    /// the same two simulations. The overlay's bytes depend on the phase and op only, so each
    /// sample is still a line, unless the overlay takes more from a category than the step holds
    /// there at batch 0 (the sample is then cut at zero, and bends): `None`, and the caller
    /// simulates each batch. The peaks only: the device total comes from the step without the
    /// overlay (`Prepared::device_like`), so no tensors are listed.
    pub fn overlaid(plan: &Plan, g: &Graph, opt: OptimizerCost, overlay: &dyn Overlay) -> Option<Envelope> {
        let r0 = plan.simulate_overlaid(g, 0, opt, true, overlay);
        // a category held at batch 0 only grows with the batch: no cut at 0, none at any batch
        if r0.overlay_clamped {
            return None;
        }
        let lines = lines(&r0.timeline, &plan.simulate_overlaid(g, 1, opt, true, overlay).timeline);
        let hull = upper_hull(&lines).into_iter().map(|i| HullLine { line: lines[i], live: Vec::new() }).collect();
        Some(Envelope { hull })
    }

    /// Peak allocated bytes at `batch` (micro-batch) samples.
    pub fn peak(&self, batch: u64) -> u64 {
        self.hull.iter().map(|h| h.line.at(batch)).max().unwrap_or(0)
    }

    /// Peak allocated bytes and the device total at `batch` (micro-batch) samples.
    pub fn at(&self, batch: u64) -> (u64, DeviceTotal) {
        let Some(best) = self.hull.iter().max_by_key(|h| h.line.at(batch)) else {
            return (0, DeviceTotal::new(0, 0));
        };
        let peak = best.line.at(batch);
        (peak, device_total(peak, &best.live, batch))
    }
}

/// Each sample's line from its bytes at batch 0 and 1.
fn lines(t0: &[TimelinePoint], t1: &[TimelinePoint]) -> Vec<Lin> {
    t0.iter().zip(t1).map(|(a, b)| Lin { fixed: a.bytes, per_sample: b.bytes.saturating_sub(a.bytes) }).collect()
}

/// The device total of a `peak` at which the tensors `live` exist: each rounded as the caching
/// allocator rounds it; the rest of the peak (optimizer state, workspaces) as it is.
pub(crate) fn device_total(peak: u64, live: &[Lin], batch: u64) -> DeviceTotal {
    let tensors: u64 = live.iter().map(|l| l.at(batch)).fold(0, u64::saturating_add);
    let other = peak.saturating_sub(tensors);
    let rounded: u64 = live.iter().map(|l| round512(l.at(batch))).fold(other, u64::saturating_add);
    let reserved: u64 = live.iter().map(|l| round_reserved(l.at(batch))).fold(other, u64::saturating_add);
    DeviceTotal::new(rounded, reserved)
}

/// Indices of the lines that are the maximum somewhere on `batch ≥ 1`, in increasing slope (of
/// identical lines, the last). Gift wrapping: from the top line at batch 1, the line that
/// overtakes the current one first, until none does. That is O(lines × hull lines), a few
/// passes since the hull is short, and needs no sort.
fn upper_hull(lines: &[Lin]) -> Vec<usize> {
    let a = |i: usize| lines[i].fixed as i128;
    let b = |i: usize| lines[i].per_sample as i128;
    // the top line at batch 1; of lines equal there the steeper, then the last
    let at1 = |i: usize| (lines[i].at(1), lines[i].per_sample);
    let Some(mut current) = (0..lines.len()).reduce(|best, i| if at1(i) >= at1(best) { i } else { best }) else {
        return Vec::new();
    };
    let mut hull = vec![current];
    loop {
        let c = current;
        // a steeper line j overtakes `c` at batch (a_c − a_j) / (b_j − b_c); the first to do so
        // is next (of lines crossing at the same batch, the steeper, then the last)
        let overtakes_first = |j: usize, n: usize| {
            let (lhs, rhs) = ((a(c) - a(j)).saturating_mul(b(n) - b(c)), (a(c) - a(n)).saturating_mul(b(j) - b(c)));
            lhs < rhs || (lhs == rhs && (b(j), j) >= (b(n), n))
        };
        let next = (0..lines.len())
            .filter(|&j| b(j) > b(c))
            .reduce(|n, j| if overtakes_first(j, n) { j } else { n });
        match next {
            Some(j) => {
                hull.push(j);
                current = j;
            }
            None => return hull,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hull_keeps_the_lines_that_win_somewhere() {
        let l = |fixed, per_sample| Lin { fixed, per_sample };
        let lines = [l(100, 0), l(10, 10), l(0, 11), l(50, 1), l(0, 5)];
        let hull = upper_hull(&lines);
        for batch in 1..200u64 {
            let best = lines.iter().map(|x| x.at(batch)).max().unwrap();
            let from_hull = hull.iter().map(|&i| lines[i].at(batch)).max().unwrap();
            assert_eq!(best, from_hull, "batch {batch}");
        }
        assert!(!hull.contains(&4) && !hull.contains(&3), "{hull:?}");
    }

    /// The hull of many random lines (with repeats and ties) is the envelope at every batch, has
    /// only lines that are strictly on top somewhere, and of identical lines keeps the last.
    #[test]
    fn hull_of_random_lines_is_the_envelope() {
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = |m: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % m
        };
        for _ in 0..300 {
            let n = 1 + next(40) as usize;
            let lines: Vec<Lin> = (0..n).map(|_| Lin { fixed: next(2000), per_sample: next(30) }).collect();
            let hull = upper_hull(&lines);
            for batch in 1..300u64 {
                let best = lines.iter().map(|x| x.at(batch)).max().unwrap();
                assert_eq!(best, hull.iter().map(|&i| lines[i].at(batch)).max().unwrap(), "batch {batch}: {lines:?} {hull:?}");
            }
            assert!(hull.windows(2).all(|w| lines[w[0]].per_sample < lines[w[1]].per_sample), "{hull:?}");
            for &i in &hull {
                assert!(lines.iter().enumerate().all(|(j, l)| *l != lines[i] || j <= i), "the last of identical lines: {i}");
            }
        }
    }
}
