//! Stacked horizontal bars on one byte scale: one row per device (llama.cpp's buffers on each
//! GPU and the host) or per stage of an image pipeline, in the order they run, each row's parts
//! side by side and its capacity marked.

use super::scale::{byte_ticks, Linear};
use vramcalc_core::ByteUnit;

/// One row's input: its label, its parts `(key, bytes)` and the memory it must fit in.
#[derive(Debug, Clone, PartialEq)]
pub struct StackInput {
    pub label: String,
    pub parts: Vec<(&'static str, u64)>,
    pub capacity: Option<u64>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Segment {
    pub key: &'static str,
    pub x: f64,
    pub w: f64,
    pub bytes: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct StackRow {
    pub label: String,
    pub y: f64,
    pub segments: Vec<Segment>,
    pub total: u64,
    /// Where the capacity line is drawn.
    pub cap_x: Option<f64>,
    /// The row is over its capacity.
    pub over: bool,
    /// The end of the bar.
    pub end_x: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct StackGeom {
    pub rows: Vec<StackRow>,
    /// `(x, bytes)` of the axis ticks.
    pub ticks: Vec<(f64, u64)>,
    pub height: f64,
    /// The row with the largest total (the pipeline's peak stage).
    pub peak: Option<usize>,
}

/// Rows of `row_h` over a plot `width` wide; empty parts are left out.
pub fn stacks(rows: &[StackInput], width: f64, row_h: f64, unit: ByteUnit) -> StackGeom {
    let max = rows.iter().map(|r| r.parts.iter().map(|p| p.1).fold(0u64, u64::saturating_add).max(r.capacity.unwrap_or(0))).max().unwrap_or(0);
    let ticks = byte_ticks(max.max(1), 4, unit);
    let end = ticks.last().copied().unwrap_or(1).max(max).max(1) as f64;
    let x = Linear::new((0.0, end), (0.0, width));
    let out: Vec<StackRow> = rows
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let mut at = 0u64;
            let segments = r
                .parts
                .iter()
                .filter(|p| p.1 > 0)
                .map(|&(key, bytes)| {
                    let x0 = x.map(at as f64);
                    at = at.saturating_add(bytes);
                    Segment { key, x: x0, w: (x.map(at as f64) - x0).max(0.0), bytes }
                })
                .collect();
            StackRow {
                label: r.label.clone(),
                y: i as f64 * row_h,
                segments,
                total: at,
                cap_x: r.capacity.map(|c| x.map(c as f64)),
                over: r.capacity.is_some_and(|c| at > c),
                end_x: x.map(at as f64),
            }
        })
        .collect();
    let peak = out.iter().enumerate().max_by(|a, b| a.1.total.cmp(&b.1.total).then(b.0.cmp(&a.0))).map(|(i, _)| i);
    StackGeom { ticks: ticks.iter().map(|&t| (x.map(t as f64), t)).collect(), height: rows.len() as f64 * row_h, rows: out, peak }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_follow_each_other_on_one_scale() {
        let rows = [
            StackInput { label: "GPU".into(), parts: vec![("model", 6 << 30), ("kv", 0), ("compute", 2 << 30)], capacity: Some(24 << 30) },
            StackInput { label: "CPU".into(), parts: vec![("model", 30 << 30)], capacity: Some(16 << 30) },
        ];
        let g = stacks(&rows, 400.0, 20.0, ByteUnit::Mib);
        assert_eq!(g.rows[0].segments.len(), 2, "the empty part is left out");
        let s = &g.rows[0].segments;
        assert!((s[0].x + s[0].w - s[1].x).abs() < 1e-9);
        assert!(s[1].w > 0.0 && (s[0].w - 3.0 * s[1].w).abs() < 1e-9);
        assert!(!g.rows[0].over && g.rows[1].over);
        assert_eq!(g.peak, Some(1));
        assert!(g.rows.iter().all(|r| r.end_x <= 400.0 + 1e-9 && r.cap_x.unwrap() <= 400.0 + 1e-9));
        assert_eq!(g.height, 40.0);
    }

    #[test]
    fn nothing_to_draw_is_no_error() {
        let g = stacks(&[], 400.0, 20.0, ByteUnit::Mb);
        assert!(g.rows.is_empty() && g.peak.is_none());
    }
}
