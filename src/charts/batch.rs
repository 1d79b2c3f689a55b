//! Memory against batch size (log₂ x axis): allocated peak and device total, the GPU's capacity
//! and the largest batch that fits.

use super::f;
use super::scale::{byte_ticks, Linear};
use vramcalc_core::ByteUnit;

pub use vramcalc_core::memory::sweep_points;

#[derive(Debug, Clone, PartialEq)]
pub struct BatchGeom {
    pub peak_line: String,
    pub device_line: String,
    /// y of the capacity line (clamped into the box).
    pub capacity_y: f64,
    /// x of the largest batch that fits.
    pub max_x: Option<f64>,
    /// The current batch on the device-total curve.
    pub current: Option<(f64, f64)>,
    pub x_ticks: Vec<(f64, u64)>,
    pub y_ticks: Vec<(f64, u64)>,
    /// `(x0, x1, batch)`: the strip of the plot nearest to each swept batch (a click sets it).
    pub columns: Vec<(f64, f64, u64)>,
}

/// `sweep` holds `(batch, peak, device_total)` sorted by batch.
pub fn geometry(
    sweep: &[(u64, u64, u64)],
    capacity: u64,
    max_batch: Option<u64>,
    current: u64,
    width: f64,
    height: f64,
    unit: ByteUnit,
) -> BatchGeom {
    let lg = |b: u64| (b.max(1) as f64).log2();
    let (b0, b1) = match (sweep.first(), sweep.last()) {
        (Some(a), Some(b)) => (a.0, b.0),
        _ => (1, 2),
    };
    let x = Linear::new((lg(b0), lg(b1.max(b0 + 1))), (0.0, width));
    let top = sweep.iter().map(|s| s.2.max(s.1)).max().unwrap_or(0).max(capacity).max(1);
    let ticks = byte_ticks(top, 4, unit);
    let end = ticks.last().copied().unwrap_or(top).max(top) as f64;
    let y = Linear::new((0.0, end), (height, 0.0));
    let path = |pick: fn(&(u64, u64, u64)) -> u64| {
        let mut s = String::new();
        for (i, p) in sweep.iter().enumerate() {
            s.push_str(if i == 0 { "M" } else { "L" });
            s.push_str(&format!("{},{}", f(x.map(lg(p.0))), f(y.map(pick(p) as f64))));
        }
        s
    };
    let current_pt = sweep.iter().find(|p| p.0 == current).map(|p| (x.map(lg(p.0)), y.map(p.2 as f64)));
    let xs: Vec<f64> = sweep.iter().map(|p| x.map(lg(p.0))).collect();
    let columns = sweep
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let x0 = if i == 0 { 0.0 } else { (xs[i - 1] + xs[i]) / 2.0 };
            let x1 = if i + 1 == xs.len() { width } else { (xs[i] + xs[i + 1]) / 2.0 };
            (x0, x1, p.0)
        })
        .collect();
    let mut x_ticks: Vec<(f64, u64)> = Vec::new();
    let span = (lg(b1) - lg(b0)).max(1.0);
    let every = (span / 6.0).ceil().max(1.0) as u32;
    let mut k = lg(b0).ceil() as u32;
    while k <= 24 && (1u64 << k) <= b1 {
        x_ticks.push((x.map(k as f64), 1u64 << k));
        k += every;
    }
    BatchGeom {
        peak_line: path(|p| p.1),
        device_line: path(|p| p.2),
        capacity_y: y.map(capacity as f64).clamp(0.0, height),
        max_x: max_batch.filter(|&m| m >= b0 && m <= b1).map(|m| x.map(lg(m))),
        current: current_pt,
        x_ticks,
        y_ticks: ticks.into_iter().map(|t| (y.map(t as f64), t)).collect(),
        columns,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_cover_batch_and_max() {
        let p = sweep_points(48, Some(300));
        assert!(p.contains(&48) && p.contains(&300) && p.contains(&512));
        assert!(p.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(*sweep_points(1, None).last().unwrap(), 64);
        assert!(sweep_points(u64::MAX, Some(u64::MAX)).len() <= 27);
    }

    #[test]
    fn columns_tile_the_plot_one_per_swept_batch() {
        let sweep: Vec<(u64, u64, u64)> = sweep_points(48, Some(370)).into_iter().map(|b| (b, b, b)).collect();
        let g = geometry(&sweep, 500, Some(370), 48, 600.0, 200.0, ByteUnit::Mb);
        assert_eq!(g.columns.iter().map(|c| c.2).collect::<Vec<_>>(), sweep.iter().map(|s| s.0).collect::<Vec<_>>());
        assert_eq!((g.columns[0].0, g.columns.last().unwrap().1), (0.0, 600.0));
        assert!(g.columns.windows(2).all(|w| w[0].1 == w[1].0 && w[0].0 < w[0].1));
    }

    #[test]
    fn geometry_marks_capacity_and_max_batch() {
        let sweep: Vec<(u64, u64, u64)> = sweep_points(32, Some(100)).into_iter().map(|b| (b, b * 100, b * 120 + 500)).collect();
        let g = geometry(&sweep, 12_500, Some(100), 32, 600.0, 200.0, ByteUnit::Mb);
        let mx = g.max_x.unwrap();
        assert!(mx > 0.0 && mx < 600.0);
        assert!(g.current.is_some());
        assert!(g.capacity_y > 0.0 && g.capacity_y < 200.0);
        assert!(g.peak_line.starts_with("M0.0,"));
        assert!(!g.x_ticks.is_empty() && g.x_ticks[0].1 == 1);
        let empty = geometry(&[], 1, None, 1, 600.0, 200.0, ByteUnit::Mb);
        assert!(empty.peak_line.is_empty() && empty.max_x.is_none());
    }
}
