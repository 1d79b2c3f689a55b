//! Peak memory as a function of the batch size.
//!
//! The simulation's control flow does not depend on the batch, so every sample of the step is a
//! line `a + b·batch`, and the peak is the upper envelope of those lines. Two simulations (batch 0
//! and 1) give every line; the few lines on the envelope, with the tensors live at each, answer
//! sweeps and max-batch searches without re-simulating. The device total adds the caching
//! allocator's rounding of exactly the tensors live at the peak.

use super::device::DeviceTotal;
use super::simulate::{round512, round_reserved, OptimizerCost, Plan};
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
        let t1 = plan.simulate(g, 1, opt, true, None).timeline;
        let lines: Vec<Lin> = t0
            .iter()
            .zip(&t1)
            .map(|(a, b)| Lin { fixed: a.bytes, per_sample: b.bytes.saturating_sub(a.bytes) })
            .collect();
        let hull = upper_hull(&lines)
            .into_iter()
            .map(|i| HullLine { line: lines[i], live: plan.simulate(g, 1, opt, false, Some(i)).snapshot })
            .collect();
        Envelope { hull }
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

/// The device total of a `peak` at which the tensors `live` exist: each rounded as the caching
/// allocator rounds it; the rest of the peak (optimizer state, workspaces) as it is.
pub(crate) fn device_total(peak: u64, live: &[Lin], batch: u64) -> DeviceTotal {
    let tensors: u64 = live.iter().map(|l| l.at(batch)).fold(0, u64::saturating_add);
    let other = peak.saturating_sub(tensors);
    let rounded: u64 = live.iter().map(|l| round512(l.at(batch))).fold(other, u64::saturating_add);
    let reserved: u64 = live.iter().map(|l| round_reserved(l.at(batch))).fold(other, u64::saturating_add);
    DeviceTotal::new(rounded, reserved)
}

/// Indices of the lines that are the maximum somewhere on `batch ≥ 1`, in increasing slope.
fn upper_hull(lines: &[Lin]) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..lines.len()).collect();
    idx.sort_by_key(|&i| (lines[i].per_sample, lines[i].fixed));
    // among equal slopes only the highest line matters
    let mut by_slope: Vec<usize> = Vec::with_capacity(idx.len());
    for i in idx {
        if let Some(&last) = by_slope.last() {
            if lines[last].per_sample == lines[i].per_sample {
                by_slope.pop();
            }
        }
        by_slope.push(i);
    }
    let a = |i: usize| lines[i].fixed as i128;
    let b = |i: usize| lines[i].per_sample as i128;
    let mut hull: Vec<usize> = Vec::new();
    for i in by_slope {
        while hull.len() >= 2 {
            let (l1, l2) = (hull[hull.len() - 2], hull[hull.len() - 1]);
            // l2 is never above both neighbours if l1 and l3 cross no later than l1 and l2
            if (a(l1) - a(i)).saturating_mul(b(l2) - b(l1)) <= (a(l1) - a(l2)).saturating_mul(b(i) - b(l1)) {
                hull.pop();
            } else {
                break;
            }
        }
        hull.push(i);
    }
    // drop lines that are only on top for batch < 1
    while hull.len() >= 2 && lines[hull[0]].at(1) <= lines[hull[1]].at(1) {
        hull.remove(0);
    }
    hull
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
}
