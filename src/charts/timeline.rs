//! Memory over one training step: forward rising, backward falling, the optimizer step, with the
//! peak marked.

use super::f;
use super::scale::{byte_ticks, Linear};
use vramcalc_core::memory::simulate::TimelinePoint;
use vramcalc_core::{ByteUnit, Phase};

#[derive(Debug, Clone, PartialEq)]
pub struct PhaseSpan {
    pub phase: Phase,
    pub x0: f64,
    pub x1: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TimelineGeom {
    /// The filled area under the curve (SVG path data).
    pub area: String,
    /// The curve itself.
    pub line: String,
    pub phases: Vec<PhaseSpan>,
    /// The highest point: `(x, y, bytes)`.
    pub peak: Option<(f64, f64, u64)>,
    pub y_ticks: Vec<(f64, u64)>,
}

/// The hover and click targets of the timeline: the plot cut into at most `slices` strips of
/// equal width, each `(x0, width, index of its highest point)`.
pub fn hits(points: &[TimelinePoint], width: f64, slices: usize) -> Vec<(f64, f64, usize)> {
    let n = points.len();
    let slices = slices.min(n).max(1);
    let w = width / slices as f64;
    (0..slices)
        .filter_map(|s| {
            let range = s * n / slices..((s + 1) * n / slices).max(s * n / slices + 1).min(n);
            let best = range.clone().max_by(|&a, &b| points[a].bytes.cmp(&points[b].bytes).then(b.cmp(&a)))?;
            Some((s as f64 * w, w, best))
        })
        .collect()
}

pub fn geometry(points: &[TimelinePoint], width: f64, height: f64, unit: ByteUnit) -> TimelineGeom {
    let max = points.iter().map(|p| p.bytes).max().unwrap_or(0);
    let ticks = byte_ticks(max.max(1), 4, unit);
    let end = ticks.last().copied().unwrap_or(1).max(max).max(1) as f64;
    let y = Linear::new((0.0, end), (height, 0.0));
    let n = points.len();
    let x = Linear::new((0.0, n.saturating_sub(1).max(1) as f64), (0.0, width));
    let xy: Vec<(f64, f64)> = points.iter().enumerate().map(|(i, p)| (x.map(i as f64), y.map(p.bytes as f64))).collect();

    let mut line = String::with_capacity(n * 14);
    for (i, (px, py)) in xy.iter().enumerate() {
        line.push_str(if i == 0 { "M" } else { "L" });
        line.push_str(&f(*px));
        line.push(',');
        line.push_str(&f(*py));
    }
    let area = match (xy.first(), xy.last()) {
        (Some(a), Some(b)) => format!("{line}L{},{}L{},{}Z", f(b.0), f(height), f(a.0), f(height)),
        _ => String::new(),
    };

    let mut phases: Vec<PhaseSpan> = Vec::new();
    for (i, p) in points.iter().enumerate() {
        let px = x.map(i as f64);
        match phases.last_mut() {
            Some(span) if span.phase == p.phase => span.x1 = px,
            _ => phases.push(PhaseSpan { phase: p.phase, x0: px, x1: px }),
        }
    }
    // Adjacent spans meet halfway between their points.
    for i in 1..phases.len() {
        let mid = (phases[i - 1].x1 + phases[i].x0) / 2.0;
        phases[i - 1].x1 = mid;
        phases[i].x0 = mid;
    }
    if let Some(last) = phases.last_mut() {
        last.x1 = width;
    }
    if let Some(first) = phases.first_mut() {
        first.x0 = 0.0;
    }

    let peak = points
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.bytes.cmp(&b.1.bytes).then(b.0.cmp(&a.0)))
        .map(|(i, p)| (x.map(i as f64), y.map(p.bytes as f64), p.bytes));
    TimelineGeom { area, line, phases, peak, y_ticks: ticks.into_iter().map(|t| (y.map(t as f64), t)).collect() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vramcalc_core::presets;

    #[test]
    fn peak_is_marked_at_the_estimate_peak_and_phases_tile() {
        let e = vramcalc_core::estimate(&presets::build("resnet18").unwrap(), &Default::default()).unwrap();
        let g = geometry(&e.timeline, 600.0, 200.0, ByteUnit::Mb);
        let (px, py, bytes) = g.peak.unwrap();
        assert_eq!(bytes, e.timeline.iter().map(|p| p.bytes).max().unwrap());
        assert!(bytes <= e.peak_bytes);
        assert!((0.0..=600.0).contains(&px) && (0.0..=200.0).contains(&py));
        assert_eq!(g.phases.first().unwrap().phase, Phase::Forward);
        assert_eq!(g.phases.first().unwrap().x0, 0.0);
        assert_eq!(g.phases.last().unwrap().x1, 600.0);
        assert!(g.phases.iter().any(|p| p.phase == Phase::Backward));
        assert!(g.area.ends_with('Z') && g.line.starts_with('M'));
    }

    #[test]
    fn hits_cover_the_plot_and_find_the_peak() {
        let e = vramcalc_core::estimate(&presets::build("resnet18").unwrap(), &Default::default()).unwrap();
        let h = hits(&e.timeline, 600.0, 120);
        assert_eq!(h.len(), 120.min(e.timeline.len()));
        assert_eq!(h[0].0, 0.0);
        assert!((h.last().unwrap().0 + h.last().unwrap().1 - 600.0).abs() < 1e-6);
        let max = e.timeline.iter().map(|p| p.bytes).max().unwrap();
        assert!(h.iter().any(|&(_, _, i)| e.timeline[i].bytes == max), "the peak is a target");
        assert!(hits(&[], 600.0, 120).is_empty());
    }

    #[test]
    fn empty_and_single_point_timelines() {
        let g = geometry(&[], 600.0, 200.0, ByteUnit::Mb);
        assert!(g.peak.is_none() && g.area.is_empty());
        let e = vramcalc_core::estimate(&presets::build("vgg11").unwrap(), &Default::default()).unwrap();
        let one = [e.timeline[0]];
        let g = geometry(&one, 600.0, 200.0, ByteUnit::Mb);
        assert!(g.peak.is_some());
    }
}
