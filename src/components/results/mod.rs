//! The results: headline figures against the GPU, the breakdown, and the charts.
//!
//! One component per file: [`Summary`], [`Charts`].

mod charts;
mod summary;

pub use charts::{Charts, ChartsProps};
pub use summary::{Summary, SummaryProps};
