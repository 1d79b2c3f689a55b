//! The results: headline figures against the GPU, the breakdown, and the charts.
//!
//! One component per file: [`SummaryBar`], [`Summary`], [`Charts`].

mod bar;
mod charts;
mod summary;

pub use bar::{cheapest_fix, SummaryBar};
pub use charts::{Charts, ChartsProps};
pub use summary::{Summary, SummaryProps};
