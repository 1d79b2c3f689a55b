//! Charts as pure functions: an [`vramcalc_core::Estimate`] (or a batch sweep) in, geometry out
//! (coordinates in a chart's `viewBox`, ticks, labels' positions). Tested natively; the components
//! in `components/charts/` only map geometry to SVG elements.

pub mod bars;
pub mod batch;
pub mod scale;
pub mod stacks;
pub mod timeline;

/// Formats a coordinate for an SVG attribute (one decimal is plenty at viewBox scale).
pub fn f(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.1}")
    } else {
        "0".into()
    }
}

/// Four decimals, for transform factors.
pub fn f4(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.4}")
    } else {
        "0".into()
    }
}
