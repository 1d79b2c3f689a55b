//! Thin SVG views (plain functions, except the per-layer chart with its hover state): they map
//! the geometry of `crate::charts` to elements. Sizes are viewBox units; the SVGs scale to their
//! container's width.
//!
//! One chart per file.

mod batch;
mod breakdown;
mod capacity;
mod layers;
mod stacks;
mod timeline;

pub use batch::batch_chart;
pub use breakdown::breakdown_chart;
pub use capacity::capacity_chart;
pub use layers::{ChartProps, LayerChart};
pub use stacks::stacks_chart;
pub use timeline::timeline_chart;
