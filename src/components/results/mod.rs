//! The results: headline figures against the GPU, the breakdown, and the charts.
//!
//! One component per file: [`summary_bar`], [`summary`], [`Charts`].

mod bar;
mod charts;
mod summary;

pub use bar::{cheapest_fix, summary_bar, BarProps};
pub use charts::{Charts, ChartsProps};
pub use summary::{summary, SummaryProps};
