//! Horizontal bars against the GPU's capacity, the stacked breakdown of the peak, and the
//! per-layer saved-activation bars.

use super::scale::{byte_ticks, Linear};
use vramcalc_core::{ByteUnit, Category, Estimate, LayerReport};

/// What a bar shows: a category of the peak, the device overhead, or a headline figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Category(Category),
    /// Of the activations: autocast's cached half-precision weight copies (`Breakdown::weight_casts`).
    WeightCasts,
    /// The KV cache of generation (`Breakdown::kv_cache`, not a core category).
    KvCache,
    Overhead,
    Peak,
    DeviceTotal,
}

impl Part {
    /// Its CSS class and test id (a category's JSON key).
    pub fn key(self) -> &'static str {
        match self {
            Part::Category(c) => c.key(),
            Part::WeightCasts => "weight_casts",
            Part::KvCache => "kv_cache",
            Part::Overhead => "overhead",
            Part::Peak => "peak",
            Part::DeviceTotal => "device_total",
        }
    }
}

/// One bar (or stacked segment) in viewBox units.
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    pub key: Part,
    pub bytes: u64,
    pub x: f64,
    pub w: f64,
}

/// Peak and device total against capacity: bars, the capacity line and byte ticks.
#[derive(Debug, Clone, PartialEq)]
pub struct CapacityGeom {
    pub bars: Vec<Bar>,
    pub capacity_x: f64,
    pub ticks: Vec<(f64, u64)>,
}

pub fn capacity(est: &Estimate, capacity: u64, width: f64, unit: ByteUnit) -> CapacityGeom {
    let top = est.device_total_bytes.max(est.peak_bytes).max(capacity).max(1);
    let ticks = byte_ticks(top, 4, unit);
    let end = ticks.last().copied().unwrap_or(top).max(top) as f64;
    let s = Linear::new((0.0, end), (0.0, width));
    let bar = |key, bytes: u64| Bar { key, bytes, x: 0.0, w: s.map(bytes as f64) };
    CapacityGeom {
        bars: vec![bar(Part::Peak, est.peak_bytes), bar(Part::DeviceTotal, est.device_total_bytes)],
        capacity_x: s.map(capacity as f64),
        ticks: ticks.into_iter().map(|t| (s.map(t as f64), t)).collect(),
    }
}

/// Where a bar's value label goes so the capacity line never runs through it: `(x, anchored at
/// its end)`. Right of the bar if the line is clear of it; else right of the line; else inside the
/// bar, ending before whichever comes first, the bar's end or the line. `text_w` is the label's
/// estimated width, everything in the chart's coordinates from the bars' left edge.
pub fn value_label_x(bar_end: f64, cap_x: f64, text_w: f64, width: f64) -> (f64, bool) {
    const GAP: f64 = 5.0;
    let clear = |x0: f64| x0 + text_w <= width && (cap_x <= x0 - GAP || cap_x >= x0 + text_w + GAP);
    if clear(bar_end + GAP) {
        (bar_end + GAP, false)
    } else if clear(bar_end.max(cap_x) + GAP) {
        (bar_end.max(cap_x) + GAP, false)
    } else {
        ((bar_end.min(cap_x) - GAP).max(text_w), true)
    }
}

/// The bytes the device total adds to the peak: allocator rounding and reserve, CUDA context,
/// cuBLAS workspace.
pub fn overhead(est: &Estimate) -> u64 {
    est.device_total_bytes.saturating_sub(est.peak_bytes)
}

/// The peak's categories plus the device overhead, stacked left to right over `width`
/// (zero categories are left out).
pub fn breakdown(est: &Estimate, width: f64) -> Vec<Bar> {
    let bk = &est.breakdown;
    let mut parts: Vec<(Part, u64)> = Vec::new();
    for (c, b) in bk.entries() {
        if c == Category::Activations {
            // autocast's weight copies are activations by PyTorch's count: shown as their own part
            parts.push((Part::Category(c), b.saturating_sub(bk.weight_casts)));
            parts.push((Part::WeightCasts, bk.weight_casts.min(b)));
        } else {
            parts.push((Part::Category(c), b));
        }
    }
    parts.push((Part::KvCache, bk.kv_cache));
    parts.push((Part::Overhead, overhead(est)));
    let total: u64 = parts.iter().fold(0u64, |a, (_, b)| a.saturating_add(*b));
    let s = Linear::new((0.0, total.max(1) as f64), (0.0, width));
    let mut x = 0.0;
    parts
        .into_iter()
        .filter(|(_, b)| *b > 0)
        .map(|(key, bytes)| {
            let w = s.map(bytes as f64);
            let bar = Bar { key, bytes, x, w };
            x += w;
            bar
        })
        .collect()
}

/// A column of the per-layer chart: one leaf layer's saved bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct Column {
    /// Index into `Estimate::layers`.
    pub row: usize,
    pub x: f64,
    pub w: f64,
    pub y: f64,
    pub h: f64,
}

/// Columns for every leaf layer (blocks are sums of their children and are left out), scaled to
/// the largest column; `ticks` are byte values with their y. The columns' own geometry depends
/// only on the layers' shares of the largest one (so a batch change, which scales every layer
/// alike, leaves it unchanged and the DOM untouched); `scale` (≤ 1) is the vertical factor, about
/// the baseline `height`, that puts them on the ticks' axis: draw them in a group with
/// [`column_transform`].
pub fn layer_columns(layers: &[LayerReport], width: f64, height: f64, unit: ByteUnit) -> (Vec<Column>, Vec<(f64, u64)>, f64) {
    let leaves: Vec<(usize, u64)> =
        layers.iter().enumerate().filter(|(_, l)| !l.info.block).map(|(i, l)| (i, l.saved_bytes)).collect();
    let max = leaves.iter().map(|(_, b)| *b).max().unwrap_or(0).max(1);
    let ticks = byte_ticks(max, 3, unit);
    let end = ticks.last().copied().unwrap_or(max).max(max) as f64;
    let y = Linear::new((0.0, end), (height, 0.0));
    let own = Linear::new((0.0, max as f64), (height, 0.0));
    let n = leaves.len().max(1) as f64;
    let slot = width / n;
    let gap = if slot > 4.0 { slot * 0.2 } else { 0.0 };
    let cols = leaves
        .into_iter()
        .enumerate()
        .map(|(i, (row, bytes))| {
            let top = own.map(bytes as f64);
            Column { row, x: i as f64 * slot + gap / 2.0, w: (slot - gap).max(0.5), y: top, h: (height - top).max(0.0) }
        })
        .collect();
    (cols, ticks.into_iter().map(|t| (y.map(t as f64), t)).collect(), max as f64 / end)
}

/// The SVG `transform` that scales columns by `scale` about the baseline at `height`.
pub fn column_transform(scale: f64, height: f64) -> String {
    format!("matrix(1 0 0 {} 0 {})", super::f4(scale), super::f4(height * (1.0 - scale)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use vramcalc_core::presets;

    fn vgg() -> Estimate {
        vramcalc_core::estimate(&presets::build("vgg16").unwrap(), &Default::default()).unwrap()
    }

    /// Generation's KV cache is a part of the bar (issue 22 item 6), and autocast's cached weight
    /// copies a part of their own, taken out of the activations (item 2); the parts add up.
    #[test]
    fn the_kv_cache_and_autocasts_weight_copies_are_parts_of_the_bar() {
        let gpt2 = presets::build("gpt2").unwrap();
        let gen = vramcalc_core::TrainConfig { mode: vramcalc_core::Mode::Generate, batch: 2, seq_len: Some(128), ..Default::default() };
        let e = vramcalc_core::estimate(&gpt2, &gen).unwrap();
        let segs = breakdown(&e, 500.0);
        let kv = segs.iter().find(|s| s.key == Part::KvCache).expect("a KV-cache part");
        assert_eq!(kv.bytes, e.breakdown.kv_cache);
        assert_eq!(segs.iter().map(|s| s.bytes).sum::<u64>(), e.breakdown.total() + overhead(&e));
        // the split itself, on a breakdown whose activations hold weight copies (what FSDP with
        // autocast gives at its peak: crates/core, `StorageClass::ParamCast`)
        let mut e = vgg();
        e.breakdown.weight_casts = e.breakdown.activations / 4;
        let segs = breakdown(&e, 500.0);
        let part = |p: Part| segs.iter().find(|s| s.key == p).map_or(0, |s| s.bytes);
        assert_eq!(part(Part::WeightCasts), e.breakdown.weight_casts);
        assert_eq!(part(Part::Category(Category::Activations)) + part(Part::WeightCasts), e.breakdown.activations);
    }

    #[test]
    fn capacity_bars_fit_the_axis() {
        let e = vgg();
        let g = capacity(&e, 24 << 30, 600.0, ByteUnit::Mib);
        assert_eq!(g.bars.len(), 2);
        for b in &g.bars {
            assert!(b.w > 0.0 && b.w <= 600.0, "{b:?}");
        }
        assert!(g.capacity_x > 0.0 && g.capacity_x <= 600.0);
        assert!(g.bars[1].w >= g.bars[0].w, "device total ≥ peak");
        assert_eq!(g.ticks.first().map(|t| t.1), Some(0));
    }

    #[test]
    fn value_labels_stay_off_the_capacity_line() {
        let off = |(x, end): (f64, bool), w: f64, cap: f64| {
            let (x0, x1) = if end { (x - w, x) } else { (x, x + w) };
            cap < x0 || cap > x1
        };
        for (bar, cap) in [(100.0, 400.0), (380.0, 400.0), (400.0, 395.0), (480.0, 300.0), (10.0, 12.0), (490.0, 495.0)] {
            let got = value_label_x(bar, cap, 60.0, 500.0);
            assert!(off(got, 60.0, cap), "bar {bar}, line {cap}: {got:?}");
        }
        assert_eq!(value_label_x(100.0, 400.0, 60.0, 500.0), (105.0, false));
    }

    #[test]
    fn breakdown_stacks_to_the_width() {
        let e = vgg();
        let segs = breakdown(&e, 500.0);
        let end = segs.last().map(|s| s.x + s.w).unwrap();
        assert!((end - 500.0).abs() < 1e-6);
        let sum: u64 = segs.iter().map(|s| s.bytes).sum();
        assert_eq!(sum, e.breakdown.total() + overhead(&e));
        assert!(segs.windows(2).all(|w| w[1].x >= w[0].x));
    }

    #[test]
    fn layer_columns_are_leaves_in_the_box() {
        let e = vgg();
        let (cols, ticks, scale) = layer_columns(&e.layers, 800.0, 200.0, ByteUnit::Mb);
        assert_eq!(cols.len(), e.layers.iter().filter(|l| !l.info.block).count());
        for c in &cols {
            assert!(c.x >= 0.0 && c.x + c.w <= 800.0 + 1e-6);
            assert!(c.y >= 0.0 && c.y + c.h <= 200.0 + 1e-6);
        }
        assert!(!ticks.is_empty());
        assert!(scale > 0.0 && scale <= 1.0);
        // scaled about the baseline, the tallest column reaches the top tick's axis at its bytes
        let max = e.layers.iter().filter(|l| !l.info.block).map(|l| l.saved_bytes).max().unwrap();
        let top_tick = ticks.last().unwrap();
        let tallest = cols.iter().map(|c| c.h).fold(0.0, f64::max);
        assert!((tallest * scale - (200.0 - top_tick.0) * max as f64 / top_tick.1 as f64).abs() < 1e-6);
        // a batch change scales the per-sample activations alike: those columns stay (layers that
        // also save weights move), only the scale changes
        let e2 = vramcalc_core::estimate(&presets::build("vgg16").unwrap(), &vramcalc_core::TrainConfig { batch: 48, ..Default::default() }).unwrap();
        let (cols2, _, _) = layer_columns(&e2.layers, 800.0, 200.0, ByteUnit::Mb);
        let fmt = |c: &[Column]| c.iter().map(|c| (super::super::f(c.y), super::super::f(c.h))).collect::<Vec<_>>();
        let same = fmt(&cols).iter().zip(fmt(&cols2)).filter(|(a, b)| **a == *b).count();
        assert!(same * 2 >= cols.len(), "{same} of {}", cols.len());
        let (none, _, _) = layer_columns(&[], 800.0, 200.0, ByteUnit::Mb);
        assert!(none.is_empty());
    }
}
